//! Errno mapping, in one place: the kernel's answers (a netlink reply's
//! code, an I/O error on a socket, a failed ioctl or system call) as
//! podtap's [`KernelError`], and as an [`Error`] with its context (which
//! netns, which operation or system call, on what interface).
//!
//! Which answers mean "already gone" is decided here too ([`is_gone`]):
//! teardown treats those as success.

use std::io;
use std::path::Path;

use nix::errno::Errno;

use crate::error::{Error, KernelError};

/// A kernel failure in the netns `netns` (as the user named it) while doing
/// `op` on `on` (an interface, a filter; empty for none).
pub fn in_netns(
    netns: &str,
    op: &'static str,
    on: impl AsRef<str>,
    e: impl Into<KernelError>,
) -> Error {
    Error::kernel(netns, op, on, e)
}

/// Entering the netns at `path` (or opening a socket there) failed with `e`:
/// a permission problem is [`Error::Permission`], anything else a
/// kernel failure in that netns.
pub fn entering(path: &Path, e: io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::PermissionDenied => Error::Permission {
            action: "enter netns",
            path: path.into(),
            source: e,
        },
        _ => in_netns(&path.display().to_string(), "enter netns / open", "", e),
    }
}

/// The code of a netlink control message (`NLMSG_ERROR`, `NLMSG_DONE`: 0,
/// or the negative errno) as a result.
pub fn reply(code: i32) -> Result<(), Errno> {
    match code {
        0 => Ok(()),
        code => Err(Errno::from_raw(-code)),
    }
}

/// A raw errno as a system call reports it (0: success) as a result.
pub fn raw(errno: i32) -> Result<(), Errno> {
    reply(-errno)
}

/// An I/O error on a netlink socket as a kernel error: its errno, or its
/// message when it has none (a dump that stayed interrupted, a timeout).
pub fn kernel_error(e: &io::Error) -> KernelError {
    match e.raw_os_error() {
        Some(code) => KernelError::Errno(Errno::from_raw(code)),
        None => KernelError::Netlink(e.to_string()),
    }
}

/// The errno of an I/O error on a netlink socket (EIO when it has none),
/// for callers whose errors are kernel errors.
pub fn of_io(e: &io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// The return value of an ioctl or another system call that answers -1 and
/// sets errno: `Ok` or the errno as an I/O error.
pub fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A failed system call `what` (named in the message) as an I/O error.
pub fn syscall(what: &str, e: Errno) -> io::Error {
    io::Error::other(format!("{what}: {e}"))
}

/// Errors that mean "already gone": teardown treats them as success.
///
/// Checked against the kernel (net/core/rtnetlink.c, net/sched/): a link
/// deletion by index or group answers ENODEV when there is no such link;
/// a filter or qdisc deletion answers ENODEV for a gone link and ENOENT for
/// a missing filter, chain or qdisc. EINVAL is not among them: it means a
/// refused request; the kernel also gives it for a filter whose parent
/// qdisc is gone and for an ingress qdisc that is gone (the hook's noop
/// qdisc has another handle), and there the caller looks again
/// (`teardown::execute`). ESRCH is the answer of route deletions, which
/// teardown does not make.
pub fn is_gone(e: &KernelError) -> bool {
    matches!(e.errno(), Some(Errno::ENOENT | Errno::ENODEV))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_raw_errnos_read_the_same_way() {
        assert_eq!(reply(0), Ok(()));
        assert_eq!(reply(-libc::EBUSY), Err(Errno::EBUSY));
        assert_eq!(raw(libc::ENODEV), Err(Errno::ENODEV));
        assert!(is_gone(&KernelError::Errno(Errno::ENODEV)));
        assert!(!is_gone(&KernelError::Errno(Errno::EINVAL)));
        let timeout = io::Error::new(io::ErrorKind::TimedOut, "no answer");
        assert_eq!(of_io(&timeout), Errno::EIO);
        assert!(matches!(kernel_error(&timeout), KernelError::Netlink(_)));
    }
}
