//! The tokio runtime podtap's commands run on.

use std::time::Duration;

use super::errno;
use crate::error::{Error, Result};

/// The longest a command's kernel work may take (a 64-NIC attach takes
/// tens of milliseconds). The kernel answers an rtnetlink request inside
/// the `sendmsg` that carries it, so only a kernel that misbehaves comes
/// near it; then the command fails (exit 10) as if it had been killed at
/// that point, which the checkpoint is made for (docs/attach.md, "Crash
/// safety").
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// Run `fut` to completion on a current-thread runtime, within [`COMMAND_TIMEOUT`].
///
/// podtap's work is a handful of netlink round trips; one thread is enough
/// and keeps start-up in the microseconds.
pub fn block_on<T>(fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| Error::io("start runtime", "tokio", e))?;
    rt.block_on(async {
        tokio::time::timeout(COMMAND_TIMEOUT, fut)
            .await
            .unwrap_or_else(|_| {
                Err(errno::in_netns(
                    "(the pod's)",
                    "wait for the kernel",
                    "",
                    std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "netlink work did not finish within {} s",
                            COMMAND_TIMEOUT.as_secs()
                        ),
                    ),
                ))
            })
    })
}
