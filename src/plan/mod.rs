//! The pure plan: what attach will build, decided from a scan and the options.
//!
//! No kernel calls here. The plan is recorded in the checkpoint before the
//! first kernel change, and undo walks the same plan, so naming, mode
//! fallback and priorities are unit-tested without root.

use std::collections::BTreeSet;

pub mod l3;
mod naming;
mod nic;
mod options;
#[cfg(test)]
mod tests;
mod types;

use crate::error::{Error, Input, Invalid, Result};
use crate::id::SandboxId;
use crate::kernel::mac::MacAddr;
use crate::model::{Description, Interface, Wiring};
pub use naming::{
    bridge_marker, bridge_marker_mac, is_marker_of, is_podtap_prio, link_group, marked_id, marker,
    preferred_group,
};
use nic::plan_nic;
pub use options::{
    check_queues, AttachOptions, NicOptions, TapOwner, MAX_QUEUES, TABLE_ANSWER_LIMIT,
};
pub use types::{
    BridgePlan, IngressState, Inventory, MacvtapPlan, NicPlan, PinnedNeighbour, Plan, PodRestore,
    PodSide, TapOptions, TapPlan, TcPlan,
};

/// The tc priority podtap tries first for its own filters.
pub const TC_PRIO_BASE: u16 = 0xC0DE;
/// How many priorities above the base podtap may use.
pub const TC_PRIO_SPAN: u16 = 64;

/// Decide what to build. Fails on an unknown or ineligible interface asked
/// for, a choice for one that clashes (a TAP name taken or too long, two
/// NICs with one MAC), or when there is nothing to attach.
pub fn plan(
    desc: &Description,
    inv: &Inventory,
    opts: &AttachOptions,
    id: &SandboxId,
) -> Result<Plan> {
    check_queues(opts.queues).map_err(|why| Error::invalid(Input::Queues, why))?;
    let chosen = choose_interfaces(desc, opts.interfaces.as_deref())?;
    let mut taken: BTreeSet<String> = desc.interfaces.iter().map(|i| i.name.clone()).collect();
    check_nic_options(desc, &chosen, opts, &taken)?;
    // Asked-for names first, so that no default name takes one.
    taken.extend(opts.nics.iter().filter_map(|n| n.tap_name.clone()));
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
            serve: opts.serve,
        }),
        tc_redirect: None,
        l3: None,
    })
}

/// The caller's per-interface choices, each for an interface attach
/// builds, and none clashing with the netns or with each other.
fn check_nic_options(
    desc: &Description,
    chosen: &[&Interface],
    opts: &AttachOptions,
    links: &BTreeSet<String>,
) -> Result<()> {
    let mut names = BTreeSet::new();
    let mut macs: BTreeSet<MacAddr> = BTreeSet::new();
    for (n, nic) in opts.nics.iter().enumerate() {
        let bad =
            |input, why: String| Error::Invalid(Invalid::nic_option(input, &nic.interface, why));
        if opts.nics[..n].iter().any(|o| o.interface == nic.interface) {
            return Err(bad(Input::Nics, "chosen for twice".into()));
        }
        if !chosen.iter().any(|i| i.name == nic.interface) {
            return Err(match desc.interface(&nic.interface) {
                None => Error::Invalid(Invalid::NoSuchInterface {
                    name: nic.interface.clone(),
                    netns: desc.netns.path.clone(),
                }),
                Some(_) => bad(Input::Nics, "not among the interfaces attached".into()),
            });
        }
        if let Some(q) = nic.queues {
            check_queues(q).map_err(|why| bad(Input::Queues, why))?;
        }
        if let Some(name) = &nic.tap_name {
            if let Some(why) = naming::tap_name_refusal(name, links, &names) {
                return Err(bad(Input::TapName, format!("{name:?}: {why}")));
            }
            names.insert(name.clone());
        }
        if let Some(mac) = nic.guest_mac {
            if opts.mode == Wiring::Macvtap {
                let why = "macvtap passthru gives the guest the pod interface's own MAC";
                return Err(bad(Input::GuestMac, why.into()));
            }
            if mac.0[0] & 0x01 != 0 || mac.0 == [0; 6] {
                return Err(bad(
                    Input::GuestMac,
                    format!("{mac}: not a unicast address"),
                ));
            }
            if !macs.insert(mac) {
                return Err(bad(Input::GuestMac, format!("{mac}: another NIC has it")));
            }
        }
    }
    // A NIC left with its pod interface's MAC must not meet a chosen one.
    for iface in chosen {
        let own = opts.nic(&iface.name).and_then(|n| n.guest_mac);
        let theirs: Option<MacAddr> = iface.mac.as_deref().and_then(|m| m.parse().ok());
        if let (None, Some(mac)) = (own, theirs) {
            if macs.contains(&mac) {
                let why = format!("{mac}: interface {} keeps it as its guest MAC", iface.name);
                return Err(Error::Invalid(Invalid::nic_option(
                    Input::GuestMac,
                    &iface.name,
                    why,
                )));
            }
        }
    }
    Ok(())
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
    if !iface.eligible && !iface.named_only {
        return Err(ineligible(iface));
    }
    plan_nic(desc, inv, &opts, &prev.id, iface, &mut taken)
}

impl Plan {
    /// The `(gateway, pod interface)` of each served NIC whose default
    /// gateway's MAC the pod has not resolved ([`Description::gateway_to_resolve`]).
    pub fn served_gateways_to_resolve(&self, desc: &Description) -> Vec<(std::net::IpAddr, u32)> {
        self.nics
            .iter()
            .filter(|n| n.serve)
            .filter_map(|n| desc.interfaces.iter().find(|i| i.ifindex == n.pod.ifindex))
            .filter_map(|i| Some((desc.gateway_to_resolve(i)?, i.ifindex)))
            .collect()
    }

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
                serve: false,
            })
        });
        if let Some(taps) = recorded {
            opts.queues = taps.queues;
            opts.vnet_hdr = taps.vnet_hdr;
            opts.owner = taps.owner;
            opts.group = taps.group;
            opts.serve = taps.serve;
        }
        opts
    }
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
                    Error::Invalid(Invalid::NoSuchInterface {
                        name: name.clone(),
                        netns: desc.netns.path.clone(),
                    })
                })?;
                // Named, a kind that carries no pod traffic by default
                // (a vxlan, an ifb) is attached too.
                if !iface.eligible && !iface.named_only {
                    return Err(ineligible(iface));
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
        let passed_over = desc
            .interfaces
            .iter()
            .filter_map(|i| Some((i.name.clone(), i.ineligible_reason.clone()?)))
            .collect();
        return Err(Error::Invalid(Invalid::NoEligibleInterface {
            netns: desc.netns.path.clone(),
            passed_over,
        }));
    }
    Ok(chosen)
}

fn ineligible(iface: &Interface) -> Error {
    Error::Invalid(Invalid::Ineligible {
        name: iface.name.clone(),
        why: iface.ineligible_reason.clone().unwrap_or_default(),
    })
}
