//! One netns identity everywhere: the nsfs file's `(st_dev, st_ino)` and
//! the netns cookie.
//!
//! The kernel frees an nsfs inode number with its netns and gives it to a
//! later one: `(dev, inode)` names a netns only while something holds it.
//! The cookie (`SO_NETNS_COOKIE` on a socket made inside the netns, Linux
//! 5.14+) is never reused within a boot. podtap records both at attach and
//! compares both before it acts. A checkpoint written before cookies were
//! recorded, or a kernel without them, leaves `(dev, inode)`; the liveness
//! proof is then teardown's: every link is proven podtap's (its kind,
//! ifindex and podtap's marker for this id) before it is changed, and a
//! newcomer's links carry no such marker.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Once;

/// What identifies a netns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetnsId {
    /// `st_dev` of its nsfs file.
    pub dev: u64,
    /// `st_ino` of its nsfs file.
    pub inode: u64,
    /// Its cookie; `None` where the kernel has none or an old checkpoint
    /// did not record it.
    pub cookie: Option<u64>,
}

impl NetnsId {
    /// The recorded identity `(dev, inode)` with `cookie`.
    pub fn new((dev, inode): (u64, u64), cookie: Option<u64>) -> Self {
        NetnsId { dev, inode, cookie }
    }

    /// `(dev, inode)`.
    pub fn pair(&self) -> (u64, u64) {
        (self.dev, self.inode)
    }

    /// Whether `now` (a netns open now) is this recorded one: the same
    /// `(dev, inode)`, and the same cookie where both have one.
    pub fn matches(&self, now: &NetnsId) -> bool {
        let same_cookie = match (self.cookie, now.cookie) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        self.pair() == now.pair() && same_cookie
    }
}

static NO_COOKIE: Once = Once::new();

/// The cookie of the netns `socket` was made in, or `None` (said once per
/// process) when the kernel has no `SO_NETNS_COOKIE`.
pub fn socket_cookie(socket: BorrowedFd<'_>) -> Option<u64> {
    let mut cookie: u64 = 0;
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<u64>()).unwrap_or(8);
    // SAFETY: getsockopt writes at most `len` bytes into `cookie`, which we own.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NETNS_COOKIE,
            (&mut cookie as *mut u64).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        return Some(cookie);
    }
    NO_COOKIE.call_once(|| {
        tracing::warn!(
            "this kernel has no SO_NETNS_COOKIE (Linux 5.14+): a netns is known by (device, inode) alone, and podtap relies on its link proofs ({})",
            io::Error::last_os_error()
        );
    });
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_needs_inode_and_cookie_where_both_have_one() {
        let recorded = NetnsId::new((4, 10), Some(77));
        assert!(recorded.matches(&NetnsId::new((4, 10), Some(77))));
        assert!(
            !recorded.matches(&NetnsId::new((4, 10), Some(78))),
            "a reused inode number with a new cookie is another netns"
        );
        assert!(!recorded.matches(&NetnsId::new((4, 11), Some(77))));
        assert!(!recorded.matches(&NetnsId::new((5, 10), Some(77))));
        assert!(
            NetnsId::new((4, 10), None).matches(&NetnsId::new((4, 10), Some(1))),
            "an old checkpoint without a cookie falls back to (dev, inode)"
        );
    }
}
