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

/// Run `work`, which blocks its thread, from whatever thread the library's
/// caller is on. A thread inside a tokio runtime (a task of a runtime that
/// embeds podtap) cannot start podtap's own runtime ([`block_on`] would
/// panic there), so the work runs on a thread of its own and the caller's
/// thread waits for it; any other thread runs it itself.
pub fn off_async<T: Send>(work: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    if tokio::runtime::Handle::try_current().is_err() {
        return work();
    }
    std::thread::scope(|s| {
        let worker = std::thread::Builder::new()
            .name("podtap-blocking".into())
            .spawn_scoped(s, work)
            .map_err(|e| Error::io("spawn a thread", "podtap-blocking", e))?;
        worker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

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
