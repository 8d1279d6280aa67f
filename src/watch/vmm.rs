//! Hotplugging a NIC into a running VM: what QEMU (QMP) and Cloud Hypervisor
//! (REST API) are asked, and the one socket primitive both need (a message
//! with fds attached as SCM_RIGHTS).

use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};

use super::ch_api::CloudHypervisorApi;
use super::peer;
use super::qmp::QmpVmm;
use super::WatchOptions;
use crate::error::{Error, Result};

/// What a VMM needs to plug one NIC, taken from the description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotNic {
    /// The device id podtap gives the NIC in the VMM: `podtap-<tap>`.
    pub device: String,
    /// The guest MAC (the pod interface's).
    pub mac: String,
    /// The pod interface's MTU.
    pub mtu: u32,
    /// TAP queues (one fd each).
    pub queues: u32,
}

/// The id podtap's hotplugged NIC for TAP `tap` has in the VMM. QEMU ids
/// take letters, digits, '-', '.', '_' and start with a letter; TAP names are
/// already in that alphabet.
pub fn device_id(tap: &str) -> String {
    format!("podtap-{tap}")
}

/// The TAP name behind a device id podtap gave, if it is one of podtap's.
pub fn tap_of(device: &str) -> Option<&str> {
    device.strip_prefix("podtap-")
}

/// A VMM that takes NICs while it runs.
pub enum Vmm {
    /// QEMU's QMP socket.
    Qemu(QmpVmm),
    /// Cloud Hypervisor's API socket.
    CloudHypervisor(CloudHypervisorApi),
}

impl Vmm {
    /// The VMM `opts` names, if one (naming both is an error).
    pub fn choose(opts: &WatchOptions) -> Result<Option<Vmm>> {
        match (&opts.qmp, &opts.cloud_hypervisor_api) {
            (Some(_), Some(_)) => Err(Error::Invalid(
                "watch: give --qmp or --cloud-hypervisor-api, not both".into(),
            )),
            (Some(q), None) => Ok(Some(Vmm::Qemu(QmpVmm::new(q, opts.vmm_uid)))),
            (None, Some(c)) => Ok(Some(Vmm::CloudHypervisor(CloudHypervisorApi::new(
                c,
                opts.vmm_uid,
            )))),
            (None, None) => Ok(None),
        }
    }

    /// The ids of the NICs the VMM has now.
    pub fn devices(&self) -> io::Result<BTreeSet<String>> {
        match self {
            Vmm::Qemu(q) => q.devices(),
            Vmm::CloudHypervisor(c) => c.devices(),
        }
    }

    /// Clear what an earlier plug of `nic` that failed or was killed left
    /// behind (a backend without its device, handed-over fds), before its
    /// queues are opened again.
    pub fn prepare(&self, nic: &HotNic) -> io::Result<()> {
        match self {
            Vmm::Qemu(q) => q.prepare(nic),
            Vmm::CloudHypervisor(_) => Ok(()),
        }
    }

    /// Plug `nic`, handing over its queue fds (the VMM keeps its own copies).
    pub fn plug(&self, nic: &HotNic, fds: &[OwnedFd]) -> io::Result<()> {
        match self {
            Vmm::Qemu(q) => q.plug(nic, fds),
            Vmm::CloudHypervisor(c) => c.plug(nic, fds),
        }
    }

    /// Unplug the NIC `device`; one that is not there counts as done.
    pub fn unplug(&self, device: &str) -> io::Result<()> {
        match self {
            Vmm::Qemu(q) => q.unplug(device),
            Vmm::CloudHypervisor(c) => c.unplug(device),
        }
    }
}

/// Send all of `data` on `stream`, with `fds` attached to its first byte.
/// Fds go only to a peer running as root or `vmm_uid` ([`peer::check`]).
pub fn send_with_fds(
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

    #[test]
    fn device_ids_name_the_tap_and_are_recognised() {
        assert_eq!(device_id("tap_eth1"), "podtap-tap_eth1");
        assert_eq!(tap_of("podtap-tap_eth1"), Some("tap_eth1"));
        assert_eq!(tap_of("net0"), None);
    }

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
