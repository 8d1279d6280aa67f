//! The pure plan: what attach will build, decided from a scan and the options.
//!
//! No kernel calls here. The plan is recorded in the checkpoint before the
//! first kernel change, and undo walks the same plan, so naming, mode
//! fallback and priorities are unit-tested without root.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::{Description, Interface, LinkKind, Wiring};

/// Linux's IFNAMSIZ minus the terminating NUL.
pub const MAX_IFNAME: usize = 15;
/// The tc priority podtap tries first for its own filters.
pub const TC_PRIO_BASE: u16 = 0xC0DE;
/// How many priorities above the base podtap may use.
pub const TC_PRIO_SPAN: u16 = 64;
/// High bits of the link group podtap puts its TAPs and bridges in.
const GROUP_BASE: u32 = 0x7064_0000;

/// What the caller asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachOptions {
    pub mode: Wiring,
    pub queues: u32,
    pub vnet_hdr: bool,
    pub owner: Option<u32>,
    pub group: Option<u32>,
    /// Only these pod interfaces; all eligible ones when `None`.
    pub interfaces: Option<Vec<String>>,
}

impl Default for AttachOptions {
    fn default() -> Self {
        AttachOptions {
            mode: Wiring::Tc,
            queues: 1,
            vnet_hdr: true,
            owner: None,
            group: None,
            interfaces: None,
        }
    }
}

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

/// What the netns holds beyond the description, needed to plan.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    pub ingress: BTreeMap<u32, IngressState>,
    /// Link groups in use in the netns.
    pub groups: BTreeSet<u32>,
    /// Links that carry a macvlan/macvtap/ipvlan/vlan of this netns on top:
    /// the kernel refuses to bridge them (EBUSY), so bridge mode uses tc there.
    pub lower_of_stacked: BTreeSet<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub id: String,
    pub mode: Wiring,
    /// Link group of every TAP and bridge of this attachment.
    pub group: u32,
    pub nics: Vec<NicPlan>,
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
}

/// The pod interface as it was before attach (what detach restores).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodSide {
    pub ifindex: u32,
    pub name: String,
    pub mac: String,
    pub mtu: u32,
    pub kind: LinkKind,
    /// Transmit queue length before attach, filled in from the scan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txqlen: Option<u32>,
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
    pub pod_mac: String,
}

/// Decide what to build. Fails on an unknown or ineligible `--interfaces` entry,
/// or when there is nothing to attach.
pub fn plan(desc: &Description, inv: &Inventory, opts: &AttachOptions, id: &str) -> Result<Plan> {
    if opts.queues == 0 || opts.queues > 256 {
        return Err(Error::Invalid(format!(
            "--queues {}: must be 1..=256",
            opts.queues
        )));
    }
    let chosen = choose_interfaces(desc, opts.interfaces.as_deref())?;
    let mut taken: BTreeSet<String> = desc.interfaces.iter().map(|i| i.name.clone()).collect();
    let mut nics = Vec::with_capacity(chosen.len());
    for iface in chosen {
        let mac = iface.mac.clone().unwrap_or_default();
        let tap_name = unique_name("tap", iface, &mut taken);
        let (wiring, wiring_note) = match opts.mode {
            Wiring::Bridge if !iface.kind.bridgeable() => (
                Wiring::Tc,
                Some(format!(
                    "{} links cannot be bridged; wired with tc redirect instead",
                    iface.kind.as_str()
                )),
            ),
            Wiring::Bridge if inv.lower_of_stacked.contains(&iface.ifindex) => (
                Wiring::Tc,
                Some(
                    "a macvlan/ipvlan/vlan sits on this link, so it cannot be bridged; \
                     wired with tc redirect instead"
                        .into(),
                ),
            ),
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
        let tc = (wiring == Wiring::Tc).then(|| TcPlan {
            prio: free_prio(&ingress.prios),
            create_pod_qdisc: ingress.qdisc.is_none(),
            existing_pod_qdisc: ingress.qdisc.clone(),
        });
        let bridge = (wiring == Wiring::Bridge).then(|| BridgePlan {
            name: unique_name("br", iface, &mut taken),
            pod_mac: bridged_mac(&mac, id),
        });
        nics.push(NicPlan {
            pod: PodSide {
                ifindex: iface.ifindex,
                name: iface.name.clone(),
                mac,
                mtu: iface.mtu,
                kind: iface.kind,
                txqlen: None,
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
        });
    }
    Ok(Plan {
        id: id.to_string(),
        mode: opts.mode,
        group: link_group(id, &inv.groups),
        nics,
    })
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
        return Err(Error::Invalid(format!(
            "netns {}: no eligible interface to attach",
            desc.netns.path
        )));
    }
    Ok(chosen)
}

/// `<prefix>_<ifname>` if it fits in 15 bytes and is free, else `<prefix><ifindex>`,
/// then `<prefix><ifindex>_<n>`. Deterministic for a given netns.
pub fn unique_name(prefix: &str, iface: &Interface, taken: &mut BTreeSet<String>) -> String {
    // Built lazily: the first candidate is almost always free.
    let fallbacks = (1..1000).map(|n| format!("{prefix}{}_{n}", iface.ifindex));
    let name = [
        format!("{prefix}_{}", iface.name),
        format!("{prefix}{}", iface.ifindex),
    ]
    .into_iter()
    .chain(fallbacks)
    .find(|c| c.len() <= MAX_IFNAME && !taken.contains(c))
    .unwrap_or_else(|| format!("{prefix}{}", iface.ifindex));
    taken.insert(name.clone());
    name
}

fn free_prio(used: &BTreeSet<u16>) -> u16 {
    (TC_PRIO_BASE..TC_PRIO_BASE + TC_PRIO_SPAN)
        .find(|p| !used.contains(p))
        .unwrap_or(TC_PRIO_BASE + TC_PRIO_SPAN)
}

/// Whether `prio` is in podtap's own range (for `detach --force`).
pub fn is_podtap_prio(prio: u16) -> bool {
    (TC_PRIO_BASE..=TC_PRIO_BASE + TC_PRIO_SPAN).contains(&prio)
}

/// A link group for this id, avoiding groups already used in the netns.
pub fn link_group(id: &str, used: &BTreeSet<u32>) -> u32 {
    let start = preferred_group(id);
    (0..0x1_0000u32)
        .map(|n| GROUP_BASE | ((start + n) & 0xffff))
        .find(|g| !used.contains(g))
        .unwrap_or(start)
}

/// The group an id gets when nothing else uses it (what `detach --force` looks for first).
pub fn preferred_group(id: &str) -> u32 {
    GROUP_BASE | (fnv1a(id.as_bytes()) & 0xffff)
}

/// A locally administered unicast MAC for the bridged pod interface, derived from
/// its own MAC and the id, never equal to the original.
pub fn bridged_mac(original: &str, id: &str) -> String {
    let h = fnv1a(format!("{id}/{original}").as_bytes()).to_be_bytes();
    let h2 = fnv1a(original.as_bytes()).to_be_bytes();
    let bytes = [0x02 | 0x04, h[0], h[1], h[2], h[3], h2[3]];
    let mac = crate::scan::parse::format_mac(&bytes);
    if mac == original.to_ascii_lowercase() {
        crate::scan::parse::format_mac(&[0x06, h[1], h[2], h[3], h[0], h2[2]])
    } else {
        mac
    }
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NetnsRef, SCHEMA};

    fn iface(name: &str, ifindex: u32, kind: LinkKind) -> Interface {
        Interface {
            name: name.into(),
            ifindex,
            kind,
            kind_raw: None,
            mac: Some(format!("aa:bb:cc:00:00:{ifindex:02x}")),
            mtu: 1500,
            oper_state: "UP".into(),
            controller: None,
            eligible: kind.eligible(),
            ineligible_reason: (!kind.eligible()).then(|| "no".into()),
            guest_mac: None,
            addresses: vec![],
            address_details: vec![],
            tap: None,
            wiring: None,
            wiring_note: None,
            bridge: None,
        }
    }

    fn desc(ifaces: Vec<Interface>) -> Description {
        Description {
            schema: SCHEMA.into(),
            netns: NetnsRef {
                path: "/run/netns/t".into(),
                inode: 1,
                dev: 2,
            },
            ipv6_enabled: true,
            interfaces: ifaces,
            routes: vec![],
            neighbours: vec![],
            attachment: None,
        }
    }

    #[test]
    fn picks_eligible_interfaces_and_names_taps() {
        let d = desc(vec![
            iface("lo", 1, LinkKind::Loopback),
            iface("eth0", 2, LinkKind::Veth),
            iface("net1", 3, LinkKind::Macvlan),
        ]);
        let p = plan(&d, &Inventory::default(), &AttachOptions::default(), "s1").unwrap();
        let names: Vec<_> = p.nics.iter().map(|n| n.tap.name.as_str()).collect();
        assert_eq!(names, ["tap_eth0", "tap_net1"]);
        assert!(p
            .nics
            .iter()
            .all(|n| n.wiring == Wiring::Tc && n.tc.as_ref().unwrap().create_pod_qdisc));
    }

    #[test]
    fn long_names_fall_back_to_ifindex_and_stay_unique() {
        let d = desc(vec![
            iface("abcdefghijklmno", 7, LinkKind::Veth),
            iface("tap7", 8, LinkKind::Veth),
        ]);
        let p = plan(&d, &Inventory::default(), &AttachOptions::default(), "s").unwrap();
        assert_eq!(p.nics[0].tap.name, "tap7_1");
        assert_eq!(p.nics[1].tap.name, "tap_tap7");
        assert!(p.nics.iter().all(|n| n.tap.name.len() <= MAX_IFNAME));
    }

    #[test]
    fn bridge_mode_falls_back_to_tc_for_macvlan() {
        let d = desc(vec![
            iface("eth0", 2, LinkKind::Veth),
            iface("mv0", 3, LinkKind::Macvlan),
        ]);
        let opts = AttachOptions {
            mode: Wiring::Bridge,
            ..Default::default()
        };
        let p = plan(&d, &Inventory::default(), &opts, "s").unwrap();
        assert_eq!(p.nics[0].wiring, Wiring::Bridge);
        let br = p.nics[0].bridge.as_ref().unwrap();
        assert_eq!(br.name, "br_eth0");
        assert_ne!(br.pod_mac, p.nics[0].pod.mac);
        let first = u8::from_str_radix(&br.pod_mac[..2], 16).unwrap();
        assert_eq!(first & 0x03, 0x02, "locally administered unicast");
        assert_eq!(p.nics[1].wiring, Wiring::Tc);
        assert!(p.nics[1]
            .wiring_note
            .as_deref()
            .unwrap()
            .contains("macvlan"));
    }

    #[test]
    fn bridge_mode_falls_back_to_tc_under_a_stacked_link() {
        let d = desc(vec![iface("eth0", 2, LinkKind::Veth)]);
        let inv = Inventory {
            lower_of_stacked: [2].into_iter().collect(),
            ..Default::default()
        };
        let opts = AttachOptions {
            mode: Wiring::Bridge,
            ..Default::default()
        };
        let p = plan(&d, &inv, &opts, "s").unwrap();
        assert_eq!(p.nics[0].wiring, Wiring::Tc);
        assert!(p.nics[0].bridge.is_none());
        assert!(p.nics[0]
            .wiring_note
            .as_deref()
            .unwrap()
            .contains("cannot be bridged"));
    }

    #[test]
    fn existing_ingress_is_kept_and_prio_avoids_theirs() {
        let d = desc(vec![iface("eth0", 2, LinkKind::Veth)]);
        let mut inv = Inventory::default();
        inv.ingress.insert(
            2,
            IngressState {
                qdisc: Some("clsact".into()),
                prios: [TC_PRIO_BASE, 1].into_iter().collect(),
                ..Default::default()
            },
        );
        let p = plan(&d, &inv, &AttachOptions::default(), "s").unwrap();
        let tc = p.nics[0].tc.as_ref().unwrap();
        assert!(!tc.create_pod_qdisc);
        assert_eq!(tc.prio, TC_PRIO_BASE + 1);
    }

    #[test]
    fn an_interface_wired_by_another_attachment_is_refused() {
        let d = desc(vec![iface("eth0", 2, LinkKind::Veth)]);
        let mut inv = Inventory::default();
        inv.ingress.insert(
            2,
            IngressState {
                qdisc: Some("ingress".into()),
                prios: [TC_PRIO_BASE].into_iter().collect(),
                redirects: [TC_PRIO_BASE].into_iter().collect(),
            },
        );
        let err = plan(&d, &inv, &AttachOptions::default(), "s2").unwrap_err();
        assert!(err.to_string().contains("already wired"), "{err}");
    }

    #[test]
    fn queues_set_multi_queue_only_above_one() {
        let d = desc(vec![iface("eth0", 2, LinkKind::Veth)]);
        let one = plan(&d, &Inventory::default(), &AttachOptions::default(), "s").unwrap();
        assert!(!one.nics[0].tap.multi_queue);
        let four = plan(
            &d,
            &Inventory::default(),
            &AttachOptions {
                queues: 4,
                ..Default::default()
            },
            "s",
        )
        .unwrap();
        assert!(four.nics[0].tap.multi_queue);
        assert_eq!(four.nics[0].tap.queues, 4);
        assert!(plan(
            &d,
            &Inventory::default(),
            &AttachOptions {
                queues: 0,
                ..Default::default()
            },
            "s"
        )
        .is_err());
    }

    #[test]
    fn interface_selection_errors_are_clear() {
        let d = desc(vec![
            iface("lo", 1, LinkKind::Loopback),
            iface("eth0", 2, LinkKind::Veth),
        ]);
        let only = |names: &[&str]| AttachOptions {
            interfaces: Some(names.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        };
        assert!(plan(&d, &Inventory::default(), &only(&["nope"]), "s")
            .unwrap_err()
            .to_string()
            .contains("not found"));
        assert!(plan(&d, &Inventory::default(), &only(&["lo"]), "s")
            .unwrap_err()
            .to_string()
            .contains("not eligible"));
        assert_eq!(
            plan(&d, &Inventory::default(), &only(&["eth0"]), "s")
                .unwrap()
                .nics
                .len(),
            1
        );
        let none = desc(vec![iface("lo", 1, LinkKind::Loopback)]);
        assert!(plan(&none, &Inventory::default(), &AttachOptions::default(), "s").is_err());
    }

    #[test]
    fn link_group_is_stable_and_avoids_used() {
        let g = link_group("sandbox", &BTreeSet::new());
        assert_eq!(g, preferred_group("sandbox"));
        let used: BTreeSet<u32> = [g].into_iter().collect();
        assert_ne!(link_group("sandbox", &used), g);
    }
}
