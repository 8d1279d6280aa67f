//! The tokio runtime podtap's commands run on.

use crate::error::{Error, Result};

/// Run `fut` to completion on a current-thread runtime.
///
/// podtap's work is a handful of netlink round trips; one thread is enough
/// and keeps start-up in the microseconds.
pub fn block_on<T>(fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| Error::io("start runtime", "tokio", e))?;
    rt.block_on(fut)
}
