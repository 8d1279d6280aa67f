//! `podtap show`: every attachment (or one) at a glance, like `ip -br`: pod
//! interface -> TAP (or macvtap) -> wiring -> VM NIC, each NIC with its live
//! state as `check` sees it (ok / drifted: what / missing) and the TAP's
//! packet counters.

mod render;

use std::path::PathBuf;

use serde::Serialize;

use crate::check::{inspect, Inspection, NicLive};
use crate::doors::output::emit_text;
use crate::doors::state_args::StateArgs;
use crate::error::{Error, Result};
use crate::kernel::netns::NetNs;
use crate::plan::NicPlan;
use crate::state::SandboxId;

pub use render::use_colour;

// Which attachments (a plain comment: a doc comment would become the subcommand's about).
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Only this sandbox id.
    #[arg(long, conflicts_with = "netns")]
    pub id: Option<String>,
    /// Only the attachments of this netns (matched by identity, whatever path recorded it).
    #[arg(long, value_name = "PATH")]
    pub netns: Option<PathBuf>,
    /// Print JSON instead of lines.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

/// One attachment.
#[derive(Debug, Serialize)]
pub struct Shown {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// "ok", "drifted" or "missing" (the worst of its NICs), or "broken"
    /// when the attachment as a whole cannot be looked at (`problem` says why).
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    pub nics: Vec<ShownNic>,
}

/// One NIC: pod interface -> TAP -> wiring -> VM NIC.
#[derive(Debug, Serialize)]
pub struct ShownNic {
    pub pod: String,
    pub pod_ifindex: u32,
    /// "tap" or "macvtap".
    pub tap_kind: &'static str,
    pub tap: String,
    /// The TAP's name now, when it differs from the recorded one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tap_now: Option<String>,
    pub tap_ifindex: u32,
    /// "tc", "bridge" or "macvtap", with its detail in `wiring_detail`.
    pub wiring: String,
    pub wiring_detail: String,
    pub vm: VmNic,
    /// "ok", "drifted" or "missing".
    pub state: &'static str,
    pub problems: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_packets: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_packets: Option<u64>,
}

/// What the VMM sees.
#[derive(Debug, Serialize)]
pub struct VmNic {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    pub mtu: u32,
    pub queues: u32,
    pub vnet_hdr: bool,
    /// How a VMM gets the NIC: "fd or name" for a TAP (fds from `podtap
    /// exec`, or the name from inside the netns), "device" for a macvtap.
    pub handover: &'static str,
    /// The TAP name to open, or the macvtap's device node.
    pub open: String,
}

pub fn run(args: &ShowArgs) -> Result<()> {
    let state = args.state.dir();
    let ids = match &args.id {
        Some(id) => vec![id.parse::<SandboxId>()?],
        None => state.ids()?,
    };
    let only = args
        .netns
        .as_deref()
        .map(|p| NetNs::open(p, false).map(|ns| ns.identity()))
        .transpose()?;
    let mut shown = Vec::new();
    for id in ids {
        match inspect(&id, &state) {
            Ok(seen) => {
                if only.is_none_or(|i| (seen.cp.netns.dev, seen.cp.netns.inode) == i) {
                    shown.push(attachment(&seen));
                }
            }
            // One asked for by id: its error is the answer.
            Err(e) if args.id.is_some() => return Err(e),
            Err(e) if only.is_none() => shown.push(unreadable(&id, &e)),
            Err(_) => {}
        }
    }
    if args.json {
        let text =
            serde_json::to_string_pretty(&shown).map_err(|e| Error::Invalid(e.to_string()))?;
        return emit_text(&(text + "\n"), None);
    }
    emit_text(&render::text(&shown, use_colour()), None)
}

fn unreadable(id: &SandboxId, e: &Error) -> Shown {
    Shown {
        id: id.to_string(),
        netns: None,
        mode: None,
        state: "broken",
        problem: Some(e.to_string()),
        nics: Vec::new(),
    }
}

fn attachment(seen: &Inspection) -> Shown {
    let cp = &seen.cp;
    let nics: Vec<ShownNic> = match &seen.whole {
        Some(_) => Vec::new(),
        None => cp
            .plan
            .nics
            .iter()
            .zip(&seen.nics)
            .map(|(plan, live)| nic(seen, plan, live))
            .collect(),
    };
    let worst = ["missing", "drifted"]
        .into_iter()
        .find(|s| nics.iter().any(|n| n.state == *s))
        .unwrap_or("ok");
    Shown {
        id: cp.id.to_string(),
        netns: Some(cp.netns.path.clone()),
        mode: Some(cp.plan.mode.as_str().to_string()),
        state: if seen.whole.is_some() {
            "broken"
        } else {
            worst
        },
        problem: seen.whole.clone(),
        nics,
    }
}

fn nic(seen: &Inspection, plan: &NicPlan, live: &NicLive) -> ShownNic {
    let guest_mac = seen
        .cp
        .description()
        .and_then(|d| d.interfaces.iter().find(|i| i.ifindex == plan.pod.ifindex))
        .and_then(|i| i.guest_mac.clone());
    let (state, problems) = match &live.problems.missing {
        Some(_) => ("missing", live.problems.clone().all()),
        None if live.problems.drifted.is_empty() => ("ok", Vec::new()),
        None => ("drifted", live.problems.drifted.clone()),
    };
    let wiring_detail = match (&plan.tc, &plan.bridge, &plan.macvtap) {
        (Some(tc), _, _) => match live.redirect {
            Some(via) => format!("tc {} redirect prio {}", via.as_str(), tc.prio),
            None => format!("tc redirect prio {}", tc.prio),
        },
        (_, Some(b), _) => format!("bridge {}", b.name),
        (_, _, Some(_)) => "macvtap passthru".to_string(),
        _ => plan.wiring.as_str().to_string(),
    };
    ShownNic {
        pod: plan.pod.name.clone(),
        pod_ifindex: plan.pod.ifindex,
        tap_kind: if plan.macvtap.is_some() {
            "macvtap"
        } else {
            "tap"
        },
        tap: plan.tap.name.clone(),
        tap_now: live
            .tap
            .as_ref()
            .map(|l| l.name.clone())
            .filter(|n| *n != plan.tap.name),
        tap_ifindex: crate::state::created_ifindex(&seen.cp.created, &plan.tap.name).unwrap_or(0),
        wiring: plan.wiring.as_str().to_string(),
        wiring_detail,
        vm: VmNic {
            mac: guest_mac,
            mtu: plan.tap.mtu,
            queues: plan.tap.queues,
            vnet_hdr: plan.tap.vnet_hdr,
            handover: if plan.macvtap.is_some() {
                "device"
            } else {
                "fd or name"
            },
            open: plan
                .macvtap
                .as_ref()
                .map_or_else(|| plan.tap.name.clone(), |m| m.device.clone()),
        },
        state,
        problems,
        rx_packets: live.packets.map(|p| p.0),
        tx_packets: live.packets.map(|p| p.1),
    }
}
