//! The NICs the VMM should have, and plugging one: its TAP's queues opened
//! in the pod netns and handed over (`handover`), the VMM asked through
//! [`VmmClient`].

use std::os::fd::OwnedFd;
use std::path::PathBuf;

use super::vmm::{HotNic, VmmClient};
use crate::error::{Error, Input, Result};
use crate::handover::open_tap_fds;
use crate::kernel::netns::NetNs;
use crate::model::Description;
use crate::state::{Checkpoint, SandboxId};

/// A NIC the VMM should have: a late NIC of this attachment, or a NIC of
/// another attachment in the same netns that arrived after watch started
/// (a later CNI ADD, such as a Multus network).
pub(super) struct Wanted {
    /// The attachment it belongs to.
    pub(super) id: SandboxId,
    pub(super) tap: String,
    /// The TAP's ifindex.
    pub(super) tap_ifindex: u32,
    /// The pod interface's ifindex.
    pub(super) ifindex: u32,
    /// That attachment's description.
    pub(super) desc: Description,
}

impl Wanted {
    /// The name of its pod interface in its description.
    pub(super) fn interface(&self) -> String {
        self.desc
            .interfaces
            .iter()
            .find(|i| i.ifindex == self.ifindex)
            .map(|i| i.name.clone())
            .unwrap_or_default()
    }
}

/// The NICs the VMM should have: `cp`'s late NICs and its adopted ones.
pub(super) fn wanted(
    id: &SandboxId,
    cp: &Checkpoint,
    others: &[(SandboxId, Checkpoint)],
) -> Vec<Wanted> {
    let mut out = Vec::new();
    let mut add = |owner: &SandboxId, desc: &Description, taps: &[String]| {
        for (iface, tap) in desc.attached() {
            if taps.contains(&tap.name) {
                out.push(Wanted {
                    id: owner.clone(),
                    tap: tap.name.clone(),
                    tap_ifindex: tap.ifindex,
                    ifindex: iface.ifindex,
                    desc: desc.clone(),
                });
            }
        }
    };
    if let Some(desc) = cp.description() {
        add(id, desc, &cp.late);
    }
    if !cp.adopted.is_empty() {
        for (owner, other) in others {
            if let Some(desc) = other.description() {
                add(owner, desc, &cp.adopted);
            }
        }
    }
    out
}

/// Hand the TAP of `w` to the VMM as `device`.
pub(super) fn plug(vmm: &dyn VmmClient, ns: &NetNs, w: &Wanted, device: &str) -> Result<()> {
    let (nic, one) = hot_nic(&w.desc, w.ifindex, device)?;
    // What a failed or killed earlier plug left in the VMM would hold the
    // TAP's queue (a single-queue TAP takes one opener): clear it first.
    vmm.prepare(&nic)
        .map_err(|e| Error::io("hotplug", PathBuf::from(device), e))?;
    let fds: Vec<OwnedFd> = open_tap_fds(w.id.as_str(), ns, &one)?
        .into_iter()
        .flatten()
        .collect();
    vmm.plug(&nic, &fds)
        .map_err(|e| Error::io("hotplug", PathBuf::from(device), e))
}

/// What the VMM needs for the NIC of pod interface `ifindex`, and a
/// description holding only that interface (to open its queues).
fn hot_nic(desc: &Description, ifindex: u32, device: &str) -> Result<(HotNic, Description)> {
    let mut one = desc.clone();
    one.interfaces.retain(|i| i.ifindex == ifindex);
    let iface = one.interfaces.first().ok_or_else(|| {
        Error::invalid(
            Input::Description,
            format!("interface {ifindex} is not in it"),
        )
    })?;
    let tap = iface.tap.as_ref().ok_or_else(|| {
        Error::invalid(
            Input::Description,
            format!("interface {} has no TAP", iface.name),
        )
    })?;
    let mac = iface.guest_mac.clone().ok_or_else(|| {
        Error::invalid(
            Input::Description,
            format!("interface {} has no guest MAC", iface.name),
        )
    })?;
    let nic = HotNic {
        device: device.into(),
        mac,
        mtu: iface.mtu,
        queues: tap.queues,
    };
    Ok((nic, one))
}
