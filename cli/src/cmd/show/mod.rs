//! `podtap show`: every attachment (or one) at a glance, like `ip -br`: pod
//! interface -> TAP (or macvtap) -> wiring -> VM NIC, each NIC with its live
//! state as `check` sees it (ok / drifted: what / missing) and the TAP's
//! packet counters.

mod render;

use std::path::PathBuf;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::output::emit_text;
use crate::state_args::StateArgs;
use podtap::check::{inspect, Inspection, NicInspection, Orphan, WiringDetail};
use podtap::model::Wiring;
use podtap::state::SandboxId;

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
    /// "ok", "drifted" or "missing" (the worst of its NICs), "broken"
    /// when the attachment as a whole cannot be looked at (`problem` says
    /// why), or "orphan": a link of podtap's that no checkpoint records.
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
        .map(podtap::netns::Netns::open)
        .transpose()?
        .map(|ns| ns.identity());
    let mut shown = Vec::new();
    for id in ids {
        match inspect(&id, &state) {
            Ok(seen) => {
                if only.is_none_or(|i| (seen.netns.dev, seen.netns.inode) == (i.dev, i.inode)) {
                    shown.push(attachment(&seen));
                }
            }
            // One asked for by id: its error is the answer.
            Err(e) if args.id.is_some() => return Err(e.into()),
            Err(e) if only.is_none() => shown.push(unreadable(&id, &e)),
            Err(_) => {}
        }
    }
    if args.id.is_none() {
        let orphans = podtap::check::orphans(&state)?;
        shown.extend(
            orphans
                .iter()
                .filter(|o| only.is_none_or(|i| o.identity == i))
                .map(orphan),
        );
    }
    if args.json {
        let text =
            serde_json::to_string_pretty(&shown).map_err(|e| Error::Invalid(e.to_string()))?;
        return emit_text(&(text + "\n"), None);
    }
    emit_text(&render::text(&shown, use_colour()), None)
}

/// A link of podtap's that no checkpoint records, and how to remove it.
fn orphan(o: &Orphan) -> Shown {
    Shown {
        id: o.id.clone(),
        netns: Some(o.netns.display().to_string()),
        mode: None,
        state: "orphan",
        problem: Some(format!(
            "{} (ifindex {}) carries podtap's marker and no checkpoint records it; \
             `podtap detach --force --id {} --netns {}` removes it",
            o.link,
            o.ifindex,
            o.id,
            o.netns.display()
        )),
        nics: Vec::new(),
    }
}

fn unreadable(id: &SandboxId, e: &podtap::error::Error) -> Shown {
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
    let nics: Vec<ShownNic> = seen.nics.iter().map(nic).collect();
    let worst = ["missing", "drifted"]
        .into_iter()
        .find(|s| nics.iter().any(|n| n.state == *s))
        .unwrap_or("ok");
    Shown {
        id: seen.id.to_string(),
        netns: Some(seen.netns.path.clone()),
        mode: Some(seen.mode.as_str().to_string()),
        state: if seen.whole.is_some() {
            "broken"
        } else {
            worst
        },
        problem: seen.whole.clone(),
        nics,
    }
}

fn nic(seen: &NicInspection) -> ShownNic {
    let wiring_detail = match &seen.wiring {
        WiringDetail::Tc {
            prio,
            redirect: Some(via),
        } => format!("tc {via} redirect prio {prio}"),
        WiringDetail::Tc {
            prio,
            redirect: None,
        } => format!("tc redirect prio {prio}"),
        WiringDetail::Bridge(name) => format!("bridge {name}"),
        WiringDetail::Macvtap => "macvtap passthru".to_string(),
        WiringDetail::Other(mode) => mode.as_str().to_string(),
    };
    let wiring = match &seen.wiring {
        WiringDetail::Tc { .. } => Wiring::Tc,
        WiringDetail::Bridge(_) => Wiring::Bridge,
        WiringDetail::Macvtap => Wiring::Macvtap,
        WiringDetail::Other(mode) => *mode,
    };
    let problems = seen.missing.iter().chain(&seen.drifted).cloned().collect();
    ShownNic {
        pod: seen.pod.0.clone(),
        pod_ifindex: seen.pod.1,
        tap_kind: if seen.device.is_some() {
            "macvtap"
        } else {
            "tap"
        },
        tap: seen.tap.clone(),
        tap_now: seen.tap_now.clone(),
        tap_ifindex: seen.tap_ifindex.unwrap_or(0),
        wiring: wiring.as_str().to_string(),
        wiring_detail,
        vm: VmNic {
            mac: seen.guest_mac.clone(),
            mtu: seen.mtu,
            queues: seen.queues,
            vnet_hdr: seen.vnet_hdr,
            handover: if seen.device.is_some() {
                "device"
            } else {
                "fd or name"
            },
            open: seen.device.clone().unwrap_or_else(|| seen.tap.clone()),
        },
        state: seen.state(),
        problems,
        rx_packets: seen.packets.map(|p| p.0),
        tx_packets: seen.packets.map(|p| p.1),
    }
}
