//! One attach at a time into a netns, whatever its sandbox id or state dir.
//!
//! Planning reads the netns, so two plans made side by side could claim the
//! same interface. The lock is an exclusive `flock(2)` on the netns itself:
//! every open of one netns (a `/run/netns` bind mount, `/proc/PID/ns/net`,
//! from any mount namespace) reaches the same nsfs inode while any of them
//! is open, and the holder's own fd keeps it open. So no lock file is made or
//! removed per attach, and a holder that dies releases it with its fds.
//!
//! A CNI DEL's link deleter holds it shared until podtap's links are gone
//! (see `unlist::When::AfterPodLinks`): an attach waits for it, another DEL
//! does not.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;

use super::netns::NetNs;
use crate::error::{Error, Result};

/// A held lock on a netns; released when dropped.
#[derive(Debug)]
pub struct NetnsLock<'a> {
    fd: BorrowedFd<'a>,
}

impl NetNs {
    /// Take the attach lock on this netns for sandbox `id`, waiting up to
    /// `timeout` for another podtap to release it.
    pub fn lock(&self, id: &str, timeout: Duration) -> Result<NetnsLock<'_>> {
        self.flock(id, timeout, libc::LOCK_EX)
    }

    /// Share the lock with other holders of a shared lock, and keep an
    /// attach out: a deferred link deletion holds it (several DELs of one
    /// pod, Multus's `net1` and `eth0`, do not wait for one another).
    pub fn lock_shared(&self, id: &str, timeout: Duration) -> Result<NetnsLock<'_>> {
        self.flock(id, timeout, libc::LOCK_SH)
    }

    fn flock(&self, id: &str, timeout: Duration, how: libc::c_int) -> Result<NetnsLock<'_>> {
        let fd = self.borrow_fd();
        let deadline = Instant::now() + timeout;
        loop {
            // SAFETY: flock on an fd that `self` keeps open.
            if unsafe { libc::flock(fd.as_raw_fd(), how | libc::LOCK_NB) } == 0 {
                return Ok(NetnsLock { fd });
            }
            match Errno::last() {
                Errno::EINTR => {}
                Errno::EWOULDBLOCK if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Errno::EWOULDBLOCK => {
                    return Err(Error::Busy {
                        id: id.to_string(),
                        lock: self.path().to_path_buf(),
                    })
                }
                e => return Err(Error::io("lock netns", self.path(), e.into())),
            }
        }
    }
}

impl NetnsLock<'_> {
    /// Keep the lock past this guard, for a child process that inherits
    /// the netns fd: the lock belongs to the open file, so it holds until
    /// every copy of the fd is closed (ours when the [`NetNs`] drops, the
    /// child's when it exits), where unlocking it here would release the
    /// child's too. The fd it is held on.
    pub fn hand_over(self) -> std::os::fd::RawFd {
        let fd = self.fd.as_raw_fd();
        std::mem::forget(self);
        fd
    }
}

impl Drop for NetnsLock<'_> {
    fn drop(&mut self) {
        // SAFETY: the fd outlives this guard (its lifetime says so).
        unsafe { libc::flock(self.fd.as_raw_fd(), libc::LOCK_UN) };
    }
}
