//! Who is on the other end of a VMM socket, before TAP fds go there.
//!
//! A TAP fd is a raw Ethernet port on the node. watch hands one over
//! (SCM_RIGHTS) only to a peer whose uid is root or the VMM uid the node
//! admin configured (`podtap watch --vmm-uid UID`): anyone else who bound
//! the socket path gets an error, not the fd.

use std::io;
use std::os::unix::net::UnixStream;

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};

/// Fail unless the process behind `stream` runs as uid 0 or `vmm_uid`.
///
/// SO_PEERCRED gives the credentials the peer had when it called
/// `listen(2)` (or `connect(2)`), not its current ones: a server that binds
/// as root and then drops to another uid still counts as root, which is the
/// VMM's own business (QEMU's `-run-with user=`); a socket bound by another
/// uid never does.
pub(super) fn check(stream: &UnixStream, vmm_uid: Option<u32>) -> io::Result<()> {
    let creds = getsockopt(stream, PeerCredentials).map_err(|e| {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("SO_PEERCRED: {e}; no TAP fds sent"),
        )
    })?;
    allowed(creds.uid(), creds.pid(), vmm_uid)
}

fn allowed(uid: u32, pid: i32, vmm_uid: Option<u32>) -> io::Result<()> {
    if uid == 0 || Some(uid) == vmm_uid {
        return Ok(());
    }
    let allowed = match vmm_uid {
        Some(v) => format!("root or uid {v}"),
        None => "root (the only uid allowed)".into(),
    };
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("the socket's peer (pid {pid}) runs as uid {uid}, not {allowed}; no TAP fds sent"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_the_configured_uid_pass_others_do_not() {
        assert!(allowed(0, 1, None).is_ok());
        assert!(allowed(0, 1, Some(107)).is_ok());
        assert!(allowed(107, 1, Some(107)).is_ok());
        let e = allowed(65534, 42, Some(107)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("uid 65534"), "{e}");
        assert!(allowed(107, 1, None).is_err());
    }

    #[test]
    fn a_socket_pair_is_its_own_process() {
        let (a, _b) = UnixStream::pair().unwrap();
        let me = nix::unistd::geteuid().as_raw();
        assert!(check(&a, Some(me)).is_ok());
    }
}
