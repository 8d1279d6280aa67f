//! Passing fds by SCM_RIGHTS over a VMM's socket (QMP `getfd`, Cloud
//! Hypervisor `vm.add-net`), only to a peer `peer::check` admits.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};

use super::peer;

/// Send all of `data` on `stream`, with `fds` attached to its first byte.
/// Fds go only to a peer running as root or `vmm_uid` ([`peer::check`]).
pub(crate) fn send_with_fds(
    stream: &UnixStream,
    data: &[u8],
    fds: &[RawFd],
    vmm_uid: Option<u32>,
) -> io::Result<()> {
    if !fds.is_empty() {
        peer::check(stream, vmm_uid)?;
    }
    let mut sent = 0;
    while sent < data.len() {
        let iov = [io::IoSlice::new(&data[sent..])];
        let rights = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage<'_>] = if sent == 0 && !fds.is_empty() {
            &rights
        } else {
            &[]
        };
        match sendmsg::<()>(
            stream.as_raw_fd(),
            &iov,
            cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        ) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "socket closed")),
            Ok(n) => sent += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;

    #[test]
    fn fds_travel_with_the_message() {
        use std::io::Read;
        use std::os::fd::AsFd;
        let (a, mut b) = UnixStream::pair().unwrap();
        let file = std::fs::File::open("/dev/null").unwrap();
        let me = nix::unistd::geteuid().as_raw();
        send_with_fds(&a, b"hello", &[file.as_fd().as_raw_fd()], Some(me)).unwrap();
        let mut space = nix::cmsg_space!([RawFd; 1]);
        let mut buf = [0u8; 5];
        let mut iov = [io::IoSliceMut::new(&mut buf)];
        let msg = nix::sys::socket::recvmsg::<()>(
            b.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::empty(),
        )
        .unwrap();
        let got: Vec<RawFd> = msg
            .cmsgs()
            .unwrap()
            .flat_map(|c| match c {
                nix::sys::socket::ControlMessageOwned::ScmRights(fds) => fds,
                _ => vec![],
            })
            .collect();
        assert_eq!(got.len(), 1);
        assert_eq!(&buf, b"hello");
        // SAFETY: the fd was just received and is owned by nobody else.
        drop(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(got[0]) });
        drop(a);
        let mut rest = Vec::new();
        b.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
    }
}
