//! The fds a VMM needs: every queue of every TAP (and macvtap) of an
//! attachment, and `/dev/vhost-net` fds, opened from any netns.
//!
//! A VMM that runs in the host's netns (Kuasar, Cloud Hypervisor, QEMU
//! started by a runtime) cannot open a TAP by name: the name lives in the
//! pod netns. [`open`] proves the netns is the one attach recorded
//! (device, inode and netns cookie), opens each queue on a thread inside
//! it, and proves each fd belongs to the recorded TAP (its name now, and
//! that name's ifindex, against the recorded ifindex); a TAP fd keeps its
//! netns for life, so the caller's thread and the VMM use it anywhere. The
//! fds are close-on-exec: the caller decides who inherits them.
//!
//! ```no_run
//! # fn main() -> podtap::error::Result<()> {
//! use podtap::handover::{self, HandoverOptions};
//! use podtap::state::{SandboxId, StateDir};
//!
//! let state = StateDir::new("/run/podtap");
//! let id: SandboxId = "pod-1234".parse()?;
//! let handover = handover::open(&id, &state, &HandoverOptions::default())?;
//! for tap in &handover.taps {
//!     println!("{}: {} queue(s), MAC {:?}", tap.tap, tap.queues.len(), tap.guest_mac);
//! }
//! // `-netdev tap,fds=…` arguments naming these very fds, for a QEMU that inherits them.
//! let args = handover.qemu_args()?;
//! # let _ = args;
//! # Ok(())
//! # }
//! ```
//!
//! Inside: `queues.rs` opens (and proves) the queues and vhost-net fds;
//! `args.rs` renders the VMM arguments that name them; `scm.rs` and
//! `peer.rs` send fds over a VMM's socket to a checked peer (`watch`).

mod args;
mod peer;
mod queues;
mod recorded_netns;
mod scm;

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

pub(crate) use queues::open_tap_fds;
pub(crate) use recorded_netns::prove;
pub(crate) use scm::send_with_fds;

/// Fail unless the process behind `stream` runs as root (SO_PEERCRED).
pub(crate) fn check_root_peer(stream: &std::os::unix::net::UnixStream) -> std::io::Result<()> {
    peer::check(stream, None)
}

use crate::error::Result;
use crate::model::Description;
use crate::state::{SandboxId, StateDir};
use args::{handover_args, Layout};

/// What to open besides the TAP queues.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandoverOptions {
    /// One `/dev/vhost-net` fd per queue (QEMU's `vhostfds=`).
    pub vhost_net: bool,
}

/// The open fds of one attached interface.
#[derive(Debug)]
pub struct TapFds {
    /// The pod interface the TAP mirrors.
    pub interface: String,
    /// The TAP's (or macvtap's) name in the pod netns.
    pub tap: String,
    /// Its ifindex in the pod netns.
    pub ifindex: u32,
    /// The MAC the guest's NIC must have.
    pub guest_mac: Option<String>,
    /// The MTU the guest's NIC must have.
    pub mtu: u32,
    /// Whether each queue carries a virtio-net header (`IFF_VNET_HDR`).
    pub vnet_hdr: bool,
    /// Whether it is a macvtap (its queues are opens of its device node).
    pub macvtap: bool,
    /// One fd per queue, in queue order.
    pub queues: Vec<OwnedFd>,
    /// One `/dev/vhost-net` fd per queue, when asked for.
    pub vhost: Vec<OwnedFd>,
}

/// Every fd of an attachment, with the description they belong to.
#[derive(Debug)]
pub struct Handover {
    /// The description attach recorded.
    pub description: Description,
    /// The attached interfaces' fds, in description order.
    pub taps: Vec<TapFds>,
}

impl Handover {
    /// QEMU's `-netdev tap,fds=…[,vhostfds=…]` and `-device …` arguments
    /// naming these fds by number, for a QEMU that inherits them.
    pub fn qemu_args(&self) -> Result<Vec<String>> {
        self.args(Layout::Qemu)
    }

    /// Cloud Hypervisor's `--net fd=[…],…` arguments naming these fds.
    pub fn cloud_hypervisor_args(&self) -> Result<Vec<String>> {
        self.args(Layout::CloudHypervisor)
    }

    /// Every fd (queues, then vhost-net), for a caller that hands them on.
    pub fn fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        self.taps
            .iter()
            .flat_map(|t| t.queues.iter().chain(&t.vhost))
            .map(AsFd::as_fd)
    }

    fn args(&self, layout: Layout) -> Result<Vec<String>> {
        let raw = |fds: &Vec<OwnedFd>| fds.iter().map(AsRawFd::as_raw_fd).collect();
        let queues: Vec<Vec<i32>> = self.taps.iter().map(|t| raw(&t.queues)).collect();
        let vhost: Vec<Vec<i32>> = self.taps.iter().map(|t| raw(&t.vhost)).collect();
        let vhost = if vhost.iter().all(Vec::is_empty) {
            Vec::new()
        } else {
            vhost
        };
        handover_args(&self.description, layout, &queues, &vhost)
    }
}

/// Open every queue of every TAP of attachment `id` (and its vhost-net fds
/// when `opts` asks), from whichever netns the caller is in. Fails when
/// there is no checkpoint, attach did not finish, the netns or a TAP is
/// not the recorded one any more ([`crate::error::Error::CheckFailed`]),
/// or a queue cannot be opened (a single-queue TAP a VMM already holds).
/// Blocks the calling thread (from async code, call it through
/// `spawn_blocking`).
pub fn open(id: &SandboxId, state: &StateDir, opts: &HandoverOptions) -> Result<Handover> {
    let description = state.description(id)?;
    let ns = prove(state, id)?;
    let queues = open_tap_fds(id.as_str(), &ns, &description)?;
    let mut vhost = if opts.vhost_net {
        queues::open_vhost_fds(&queues)?
    } else {
        Vec::new()
    };
    vhost.resize_with(queues.len(), Vec::new);
    let taps = description
        .attached()
        .zip(queues.into_iter().zip(vhost))
        .map(|((iface, tap), (queues, vhost))| TapFds {
            interface: iface.name.clone(),
            tap: tap.name.clone(),
            ifindex: tap.ifindex,
            guest_mac: iface.guest_mac.clone(),
            mtu: iface.mtu,
            vnet_hdr: tap.vnet_hdr,
            macvtap: tap.device.is_some(),
            queues,
            vhost,
        })
        .collect();
    Ok(Handover { description, taps })
}
