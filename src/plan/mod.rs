//! The pure plan: what attach will build, decided from a scan and the options.
//!
//! No kernel calls here. The plan is recorded in the checkpoint before the
//! first kernel change, and undo walks the same plan, so naming, mode
//! fallback and priorities are unit-tested without root.

use std::collections::{BTreeMap, BTreeSet};

mod naming;
mod options;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::id::SandboxId;
use crate::kernel::mac::MacAddr;
use crate::kernel::replay::Recorded;
use crate::kernel::tc::IngressHook;
use crate::model::{Description, Interface, LinkKind, Wiring};
pub use naming::{
    bridge_marker, bridge_marker_mac, bridged_mac, is_marker_of, is_podtap_prio, link_group,
    marker, preferred_group, unique_name,
};
pub use options::{check_queues, parse_queues, AttachOptions, TapOwner, MAX_QUEUES};

/// The tc priority podtap tries first for its own filters.
pub const TC_PRIO_BASE: u16 = 0xC0DE;
/// How many priorities above the base podtap may use.
pub const TC_PRIO_SPAN: u16 = 64;

/// The ingress side of one existing link, as found before attach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngressState {
    /// "ingress" or "clsact" when such a qdisc is already there.
    pub qdisc: Option<String>,
    /// Priorities of filters already attached to it.
    pub prios: BTreeSet<u16>,
    /// Those of them that carry a mirred redirect.
    pub redirects: BTreeSet<u16>,
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
    pub ingress: BTreeMap<u32, IngressState>,
    /// Link groups in use in the netns.
    pub groups: BTreeSet<u32>,
    /// For bridge mode: what each candidate pod interface would give up.
    pub restore: BTreeMap<u32, PodRestore>,
    /// Links that carry a macvlan/macvtap/ipvlan/vlan of this netns on top:
    /// the kernel refuses to bridge them (EBUSY), so bridge mode uses tc there.
    pub lower_of_stacked: BTreeSet<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub id: SandboxId,
    pub mode: Wiring,
    /// Link group of every TAP and bridge of this attachment.
    pub group: u32,
    pub nics: Vec<NicPlan>,
    /// The TAP options attach was given, for NICs `podtap watch` adds later
    /// (absent in checkpoints written before watch existed: then the first
    /// NIC's are used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taps: Option<TapOptions>,
}

/// The TAP options of an attachment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapOptions {
    pub queues: u32,
    pub vnet_hdr: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
}

/// One pod interface and what is built for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicPlan {
    pub pod: PodSide,
    pub tap: TapPlan,
    pub wiring: Wiring,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wiring_note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tc: Option<TcPlan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<BridgePlan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub macvtap: Option<MacvtapPlan>,
}

/// A macvtap (passthru) on the pod interface; `tap` names and sizes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MacvtapPlan {
    /// podtap's own node for its character device. The kernel's
    /// `/dev/tapN` is named by ifindex, which is per netns: two pods with a
    /// macvtap at the same ifindex would share one name in the host's /dev.
    pub device: String,
}

/// The pod interface as it was before attach (what detach restores).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodSide {
    pub ifindex: u32,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
    pub mtu: u32,
    pub kind: LinkKind,
    /// Transmit queue length before attach, filled in from the scan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txqlen: Option<u32>,
    /// Its permanent neighbours before attach (`check` verifies they are still there).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub neighbours: Vec<PinnedNeighbour>,
}

/// A permanent neighbour entry: IP and link-layer address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedNeighbour {
    /// The neighbour's IP address.
    pub ip: String,
    /// Its link-layer address.
    pub mac: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapPlan {
    pub name: String,
    pub mtu: u32,
    pub queues: u32,
    pub vnet_hdr: bool,
    pub multi_queue: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
}

/// tc redirect both ways.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcPlan {
    /// Priority of podtap's filter on the pod interface (and on the TAP).
    pub prio: u16,
    /// Whether podtap adds the pod interface's ingress qdisc (and so removes it on detach).
    pub create_pod_qdisc: bool,
    /// The kind of qdisc already on the pod interface, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing_pod_qdisc: Option<String>,
}

/// A bridge holding the pod interface and the TAP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgePlan {
    pub name: String,
    /// Locally administered MAC the pod interface carries while bridged.
    pub pod_mac: MacAddr,
    /// What the pod interface loses while bridged, to be put back exactly.
    #[serde(default)]
    pub restore: PodRestore,
}

/// What bridge mode must put back on the pod interface: giving it the
/// bridged MAC makes the kernel flush its neighbour table, permanent entries
/// included. Recorded exactly as the kernel dumped them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodRestore {
    /// Its permanent neighbours.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub neighbours: Vec<Recorded>,
}

/// Decide what to build. Fails on an unknown or ineligible `--interfaces` entry,
/// or when there is nothing to attach.
pub fn plan(
    desc: &Description,
    inv: &Inventory,
    opts: &AttachOptions,
    id: &SandboxId,
) -> Result<Plan> {
    check_queues(opts.queues).map_err(|why| Error::Invalid(format!("--queues {why}")))?;
    let chosen = choose_interfaces(desc, opts.interfaces.as_deref())?;
    let mut taken: BTreeSet<String> = desc.interfaces.iter().map(|i| i.name.clone()).collect();
    let mut nics = Vec::with_capacity(chosen.len());
    for iface in chosen {
        nics.push(plan_nic(desc, inv, opts, id, iface, &mut taken)?);
    }
    Ok(Plan {
        id: id.clone(),
        mode: opts.mode,
        group: link_group(id, &inv.groups),
        nics,
        taps: Some(TapOptions {
            queues: opts.queues,
            vnet_hdr: opts.vnet_hdr,
            owner: opts.owner,
            group: opts.group,
        }),
    })
}

/// Plan one pod interface that appeared after attach (`podtap watch`), in
/// the attachment `prev` records: the same mode, TAP options and link group,
/// names that clash with nothing in the netns or in `prev`.
pub fn plan_late(
    desc: &Description,
    inv: &Inventory,
    prev: &Plan,
    iface: &Interface,
) -> Result<NicPlan> {
    let opts = prev.options();
    let mut taken: BTreeSet<String> = desc.interfaces.iter().map(|i| i.name.clone()).collect();
    for nic in &prev.nics {
        taken.insert(nic.tap.name.clone());
        taken.extend(nic.bridge.as_ref().map(|b| b.name.clone()));
    }
    if !iface.eligible {
        let why = iface.ineligible_reason.clone().unwrap_or_default();
        return Err(Error::Invalid(format!(
            "interface {}: not eligible ({why})",
            iface.name
        )));
    }
    plan_nic(desc, inv, &opts, &prev.id, iface, &mut taken)
}

impl Plan {
    /// The attach options this plan was made with, as far as a late
    /// interface needs them (mode and TAP options).
    pub fn options(&self) -> AttachOptions {
        let mut opts = AttachOptions {
            mode: self.mode,
            ..AttachOptions::default()
        };
        let recorded = self.taps.clone().or_else(|| {
            self.nics.first().map(|n| TapOptions {
                queues: n.tap.queues,
                vnet_hdr: n.tap.vnet_hdr,
                owner: n.tap.owner,
                group: n.tap.group,
            })
        });
        if let Some(taps) = recorded {
            opts.queues = taps.queues;
            opts.vnet_hdr = taps.vnet_hdr;
            opts.owner = taps.owner;
            opts.group = taps.group;
        }
        opts
    }
}

/// Plan the TAP and wiring of one chosen pod interface; `taken` holds the
/// link names in use and gets the new ones.
fn plan_nic(
    desc: &Description,
    inv: &Inventory,
    opts: &AttachOptions,
    id: &SandboxId,
    iface: &Interface,
    taken: &mut BTreeSet<String>,
) -> Result<NicPlan> {
    let mac: Option<MacAddr> = iface.mac.as_deref().and_then(|m| m.parse().ok());
    let tap_name = unique_name("tap", iface, taken);
    let (wiring, wiring_note) = match opts.mode {
        Wiring::Bridge if !iface.kind.bridgeable() => (
            Wiring::Tc,
            Some(format!(
                "{} links cannot be bridged; wired with tc redirect instead",
                iface.kind.as_str()
            )),
        ),
        Wiring::Bridge if mac.is_none() => (
            Wiring::Tc,
            Some(
                "a link without an Ethernet address cannot be bridged; \
                  wired with tc redirect instead"
                    .into(),
            ),
        ),
        Wiring::Bridge if inv.lower_of_stacked.contains(&iface.ifindex) => (
            Wiring::Tc,
            Some(
                "a macvlan/ipvlan/vlan sits on this link, so it cannot be bridged; \
                 wired with tc redirect instead"
                    .into(),
            ),
        ),
        Wiring::Macvtap => match macvtap_refusal(iface, mac, inv) {
            Some(why) => (
                Wiring::Tc,
                Some(format!("{why}; wired with tc redirect instead")),
            ),
            None => (Wiring::Macvtap, None),
        },
        mode => (mode, None),
    };
    let ingress = inv.ingress.get(&iface.ifindex).cloned().unwrap_or_default();
    // A second redirect would never see a packet, and its detach could not
    // tell whose ingress qdisc it is: one attachment per pod interface.
    if let Some(p) = ingress.redirects.iter().find(|p| is_podtap_prio(**p)) {
        return Err(Error::Invalid(format!(
            "interface {}: already wired by another podtap attachment (tc filter prio {p}); \
             detach it first, or choose others with --interfaces",
            iface.name
        )));
    }
    let tc = match wiring {
        Wiring::Tc => Some(TcPlan {
            prio: naming::free_prio(&ingress.prios).ok_or_else(|| {
                Error::Invalid(format!(
                    "interface {}: every tc priority podtap may use ({TC_PRIO_BASE}..{}) \
                     is held by other filters; nothing was built",
                    iface.name,
                    TC_PRIO_BASE + TC_PRIO_SPAN - 1
                ))
            })?,
            create_pod_qdisc: ingress.qdisc.is_none(),
            existing_pod_qdisc: ingress.qdisc.clone(),
        }),
        Wiring::Bridge | Wiring::Macvtap => None,
    };
    let bridge = (wiring == Wiring::Bridge).then(|| BridgePlan {
        name: unique_name("br", iface, taken),
        pod_mac: bridged_mac(mac, id),
        restore: inv.restore.get(&iface.ifindex).cloned().unwrap_or_default(),
    });
    let macvtap = (wiring == Wiring::Macvtap).then(|| MacvtapPlan {
        device: crate::kernel::macvtap::node_path(id.as_str(), &tap_name)
            .display()
            .to_string(),
    });
    let neighbours = desc
        .neighbours
        .iter()
        .filter(|n| n.interface == iface.name && (n.state == "permanent" || n.state == "noarp"))
        .map(|n| PinnedNeighbour {
            ip: n.ip.clone(),
            mac: n.mac.clone(),
        })
        .collect();
    Ok(NicPlan {
        pod: PodSide {
            ifindex: iface.ifindex,
            name: iface.name.clone(),
            mac,
            mtu: iface.mtu,
            kind: iface.kind,
            txqlen: None,
            neighbours,
        },
        tap: TapPlan {
            name: tap_name,
            mtu: iface.mtu,
            queues: opts.queues,
            vnet_hdr: opts.vnet_hdr,
            multi_queue: opts.queues > 1,
            owner: opts.owner,
            group: opts.group,
        },
        wiring,
        wiring_note,
        tc,
        bridge,
        macvtap,
    })
}

/// Why `iface` cannot carry a passthru macvtap, if it cannot.
fn macvtap_refusal(iface: &Interface, mac: Option<MacAddr>, inv: &Inventory) -> Option<String> {
    if !matches!(iface.kind, LinkKind::Veth | LinkKind::Physical) {
        return Some(format!(
            "a macvtap cannot sit on a {} link",
            iface.kind.as_str()
        ));
    }
    if mac.is_none() {
        return Some("a link without an Ethernet address cannot carry a macvtap".into());
    }
    if inv.lower_of_stacked.contains(&iface.ifindex) {
        return Some(
            "a macvlan/ipvlan/vlan already sits on this link, and a passthru macvtap must be its only upper"
                .into(),
        );
    }
    if let Some(c) = &iface.controller {
        return Some(format!("the link is a port of {c}"));
    }
    None
}

fn choose_interfaces<'a>(
    desc: &'a Description,
    wanted: Option<&[String]>,
) -> Result<Vec<&'a Interface>> {
    let chosen: Vec<&Interface> = match wanted {
        None => desc.interfaces.iter().filter(|i| i.eligible).collect(),
        Some(names) => {
            let mut out = Vec::new();
            for name in names {
                let iface = desc.interface(name).ok_or_else(|| {
                    Error::Invalid(format!(
                        "interface {name}: not found in netns {}",
                        desc.netns.path
                    ))
                })?;
                if !iface.eligible {
                    let why = iface.ineligible_reason.clone().unwrap_or_default();
                    return Err(Error::Invalid(format!(
                        "interface {name}: not eligible ({why})"
                    )));
                }
                if !out.iter().any(|i: &&Interface| i.ifindex == iface.ifindex) {
                    out.push(iface);
                }
            }
            out
        }
    };
    if chosen.is_empty() {
        // Say why each one was passed over: a loser of a race for a pod
        // interface learns which bridge (whose attachment) holds it.
        let why: Vec<String> = desc
            .interfaces
            .iter()
            .filter_map(|i| Some(format!("{}: {}", i.name, i.ineligible_reason.as_deref()?)))
            .collect();
        return Err(Error::Invalid(format!(
            "netns {}: no eligible interface to attach ({})",
            desc.netns.path,
            why.join("; ")
        )));
    }
    Ok(chosen)
}
