//! The plan's types: what attach records before its first kernel change,
//! and what the netns holds beyond the description that planning needs.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::id::SandboxId;
use crate::kernel::mac::MacAddr;
use crate::kernel::replay::Recorded;
use crate::kernel::tc::IngressHook;
use crate::model::{LinkKind, Wiring};

/// The ingress side of one existing link, as found before attach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngressState {
    /// "ingress" or "clsact" when such a qdisc is already there.
    pub(crate) qdisc: Option<String>,
    /// Priorities of filters already attached to it.
    pub(crate) prios: BTreeSet<u16>,
    /// Those of them that carry a mirred redirect.
    pub(crate) redirects: BTreeSet<u16>,
}

impl From<&IngressHook> for IngressState {
    fn from(hook: &IngressHook) -> Self {
        IngressState {
            qdisc: Some(hook.qdisc.clone()),
            prios: hook.filters.iter().map(|f| f.prio).collect(),
            redirects: hook
                .filters
                .iter()
                .filter(|f| f.redirect_to.is_some())
                .map(|f| f.prio)
                .collect(),
        }
    }
}

/// What the netns holds beyond the description, needed to plan.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    pub(crate) ingress: BTreeMap<u32, IngressState>,
    /// Link groups in use in the netns.
    pub(crate) groups: BTreeSet<u32>,
    /// For bridge mode: what each candidate pod interface would give up.
    pub(crate) restore: BTreeMap<u32, PodRestore>,
    /// Links that carry a macvlan/macvtap/ipvlan/vlan of this netns on top:
    /// the kernel refuses to bridge them (EBUSY), so bridge mode uses tc there.
    pub(crate) lower_of_stacked: BTreeSet<u32>,
    /// Each link's transmit queue length, by ifindex (detach puts it back).
    pub(crate) txqlen: BTreeMap<u32, u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub(crate) id: SandboxId,
    pub(crate) mode: Wiring,
    /// Link group of every TAP and bridge of this attachment.
    pub(crate) group: u32,
    pub(crate) nics: Vec<NicPlan>,
    /// The TAP options attach was given, for NICs `podtap watch` adds later
    /// (absent in checkpoints written before watch existed: then the first
    /// NIC's are used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) taps: Option<TapOptions>,
    /// The redirect filter of the tc NICs, as an earlier release recorded
    /// it (`u32`, `bpf`, or nothing for `auto`): read and kept, never
    /// written anew. Teardown goes by the filters a dump shows, whatever
    /// this says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tc_redirect: Option<String>,
    /// What routed NICs hold for the whole netns (their nftables table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) l3: Option<super::l3::L3Netns>,
}

/// The TAP options of an attachment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapOptions {
    pub(crate) queues: u32,
    pub(crate) vnet_hdr: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) owner: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) group: Option<u32>,
    /// Every NIC served (a late one too), where it can be.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) serve: bool,
}

/// One pod interface and what is built for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicPlan {
    pub(crate) pod: PodSide,
    pub(crate) tap: TapPlan,
    /// The guest MAC the caller chose; `None`: the pod interface's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) guest_mac: Option<MacAddr>,
    pub(crate) wiring: Wiring,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) wiring_note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tc: Option<TcPlan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) bridge: Option<BridgePlan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) macvtap: Option<MacvtapPlan>,
    /// Routed wiring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) l3: Option<super::l3::L3Plan>,
    /// Whether the guest is served its configuration (DHCP, router
    /// advertisements): the TAP stops the guest's requests from leaving.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) serve: bool,
}

/// A macvtap (passthru) on the pod interface; `tap` names and sizes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MacvtapPlan {
    /// podtap's own node for its character device. The kernel's
    /// `/dev/tapN` is named by ifindex, which is per netns: two pods with a
    /// macvtap at the same ifindex would share one name in the host's /dev.
    pub(crate) device: String,
}

/// The pod interface as it was before attach (what detach restores).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodSide {
    pub(crate) ifindex: u32,
    pub(crate) name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mac: Option<MacAddr>,
    pub(crate) mtu: u32,
    pub(crate) kind: LinkKind,
    /// Transmit queue length before attach, as the scan found it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) txqlen: Option<u32>,
    /// Its permanent neighbours before attach (`check` verifies they are still there).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) neighbours: Vec<PinnedNeighbour>,
}

/// A permanent neighbour entry: IP and link-layer address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedNeighbour {
    /// The neighbour's IP address.
    pub(crate) ip: String,
    /// Its link-layer address.
    pub(crate) mac: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapPlan {
    pub(crate) name: String,
    pub(crate) mtu: u32,
    pub(crate) queues: u32,
    pub(crate) vnet_hdr: bool,
    pub(crate) multi_queue: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) owner: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) group: Option<u32>,
}

/// tc redirect both ways.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcPlan {
    /// Priority of podtap's filter on the pod interface (and on the TAP).
    pub(crate) prio: u16,
    /// Whether podtap adds the pod interface's ingress qdisc (and so removes it on detach).
    pub(crate) create_pod_qdisc: bool,
    /// The kind of qdisc already on the pod interface, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) existing_pod_qdisc: Option<String>,
}

/// A bridge holding the pod interface and the TAP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgePlan {
    pub(crate) name: String,
    /// Locally administered MAC the pod interface carries while bridged.
    pub(crate) pod_mac: MacAddr,
    /// What the pod interface loses while bridged, to be put back exactly.
    #[serde(default)]
    pub(crate) restore: PodRestore,
}

/// What bridge mode must put back on the pod interface: giving it the
/// bridged MAC makes the kernel flush its neighbour table, permanent entries
/// included. Recorded exactly as the kernel dumped them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodRestore {
    /// Its permanent neighbours.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) neighbours: Vec<Recorded>,
}
