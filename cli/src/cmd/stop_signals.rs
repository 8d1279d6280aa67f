//! What stops `podtap watch`: SIGTERM or SIGINT, blocked on the calling
//! thread while the watch runs and read from a signalfd.
//!
//! The watch itself (a library call) touches no signal state; the program
//! decides, as a VMM launcher that stops its watch with SIGTERM expects.

use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;

use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::error::{Error, Result};
use podtap::watch::Stop;

/// SIGTERM/SIGINT, blocked on this thread and read from a signalfd.
pub struct StopSignals {
    fd: SignalFd,
    old: SigSet,
}

impl StopSignals {
    /// Block SIGTERM and SIGINT on this thread and open their signalfd.
    pub fn block() -> Result<Self> {
        let mut mask = SigSet::empty();
        mask.add(Signal::SIGTERM);
        mask.add(Signal::SIGINT);
        let old = mask
            .thread_swap_mask(SigmaskHow::SIG_BLOCK)
            .map_err(|e| Error::io("block signals for", PathBuf::from("watch"), e.into()))?;
        let fd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .map_err(|e| Error::io("signalfd for", PathBuf::from("watch"), e.into()))?;
        Ok(StopSignals { fd, old })
    }

    /// Put the caller's mask back. A signal still pending is read first:
    /// unblocked, it would kill a process that was about to exit 0.
    pub fn restore(self) {
        while self.take().is_some() {}
        let _ = self.old.thread_set_mask();
    }
}

impl Stop for StopSignals {
    fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn take(&self) -> Option<String> {
        match self.fd.read_signal() {
            Ok(Some(info)) => Some(
                Signal::try_from(i32::try_from(info.ssi_signo).unwrap_or(0))
                    .map_or_else(|_| info.ssi_signo.to_string(), |s| s.as_str().to_string()),
            ),
            _ => None,
        }
    }
}
