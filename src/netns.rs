//! A network namespace, opened and proven: what a caller holds to run
//! something in a pod's netns (`podtap exec --enter-netns`) or to tell two
//! paths of one netns apart from two netns.
//!
//! [`Netns::open`] checks the path on the file it opened, never on the
//! path again: a regular nsfs file (a pinned `/run/netns/NAME` or
//! `/proc/PID/ns/net`), of a network namespace, and not the host's own.
//! [`crate::state::StateDir::prove_netns`] also checks it is the very
//! netns an attachment recorded (device, inode and netns cookie).

use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

use crate::error::Result;
use crate::kernel::netns::NetNs;

/// An open network namespace.
#[derive(Debug)]
pub struct Netns(pub(crate) NetNs);

/// What identifies a netns whatever path names it: the nsfs file's device
/// and inode numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NetnsIdentity {
    /// `st_dev` of the nsfs file.
    pub dev: u64,
    /// `st_ino` of the nsfs file.
    pub inode: u64,
}

impl Netns {
    /// Open the netns at `path`; the host's own netns is refused.
    pub fn open(path: &Path) -> Result<Self> {
        NetNs::open(path, false).map(Netns)
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Its identity.
    pub fn identity(&self) -> NetnsIdentity {
        let (dev, inode) = self.0.identity();
        NetnsIdentity { dev, inode }
    }
}

/// The fd of the nsfs file: `setns(2)` takes it.
impl AsFd for Netns {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.borrow_fd()
    }
}
