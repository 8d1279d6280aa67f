//! Stopping a long-running operation from outside (a signal, another
//! thread, a task): a descriptor it waits on with everything else.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::error::{Error, Result};

/// What ends a long-running operation (`watch`, `serve::daemon`) from
/// outside: a file descriptor that becomes readable when it should end.
pub trait Stop {
    /// The descriptor to wait on (readable: stop).
    fn fd(&self) -> BorrowedFd<'_>;
    /// Once [`Stop::fd`] is readable: consume what made it so and name the
    /// reason (a watch's `stopped` event says it), or `None` if it was nothing.
    fn take(&self) -> Option<String>;
}

/// A [`Stop`] another thread (or a task) pulls: [`Stopper::stop`] makes
/// the operation that waits on it return.
#[derive(Debug)]
pub struct Stopper {
    read: OwnedFd,
    write: OwnedFd,
}

impl Stopper {
    /// A new stopper (a non-blocking pipe).
    pub fn new() -> Result<Self> {
        use nix::fcntl::OFlag;
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)
            .map_err(|e| Error::io("make", "a pipe for a stopper", e.into()))?;
        Ok(Stopper { read, write })
    }

    /// Make the operation waiting on this stopper return (a full pipe already does).
    pub fn stop(&self) {
        let _ = nix::unistd::write(&self.write, b"s");
    }
}

impl Stop for Stopper {
    fn fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    fn take(&self) -> Option<String> {
        let mut byte = [0u8; 1];
        match nix::unistd::read(&self.read, &mut byte) {
            Ok(1) => Some("stopped".into()),
            _ => None,
        }
    }
}
