//! The pure plan: what attach will build, decided from a scan and the options.
//!
//! No kernel calls here. The plan is recorded in the checkpoint before the
//! first kernel change, and undo walks the same plan, so naming, mode
//! fallback and priorities are unit-tested without root.

use std::collections::BTreeSet;

mod naming;
mod nic;
mod options;
#[cfg(test)]
mod tests;
mod types;

use crate::error::{Error, Result};
use crate::id::SandboxId;
use crate::model::{Description, Interface};
pub use naming::{
    bridge_marker, bridge_marker_mac, is_marker_of, is_podtap_prio, link_group, marker,
    preferred_group,
};
use nic::plan_nic;
pub use options::{
    check_queues, check_tc_redirect, check_tc_redirect_env, parse_queues, AttachOptions, TapOwner,
    MAX_QUEUES, TC_REDIRECT, TC_REDIRECT_ENV,
};
pub use types::{
    BridgePlan, IngressState, Inventory, MacvtapPlan, NicPlan, PinnedNeighbour, Plan, PodRestore,
    PodSide, TapOptions, TapPlan, TcPlan,
};

/// The tc priority podtap tries first for its own filters.
pub const TC_PRIO_BASE: u16 = 0xC0DE;
/// How many priorities above the base podtap may use.
pub const TC_PRIO_SPAN: u16 = 64;

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
        tc_redirect: Some(TC_REDIRECT.to_string()),
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
    if !iface.eligible && !iface.named_only {
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
                // Named, a kind that carries no pod traffic by default
                // (a vxlan, an ifb) is attached too.
                if !iface.eligible && !iface.named_only {
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
