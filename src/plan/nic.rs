//! Planning one pod interface: its TAP, and how it is wired.

use std::collections::BTreeSet;

use super::naming::{self, bridged_mac, is_podtap_prio, unique_name};
use super::{
    AttachOptions, BridgePlan, IngressState, Inventory, MacvtapPlan, NicPlan, PinnedNeighbour,
    PodSide, TapPlan, TcPlan, TC_PRIO_BASE, TC_PRIO_SPAN,
};
use crate::error::{Error, Invalid, Result};
use crate::id::SandboxId;
use crate::kernel::mac::MacAddr;
use crate::model::{Description, Interface, LinkKind, Wiring};

/// Plan the TAP and wiring of one chosen pod interface; `taken` holds the
/// link names in use and gets the new ones.
pub(super) fn plan_nic(
    desc: &Description,
    inv: &Inventory,
    opts: &AttachOptions,
    id: &SandboxId,
    iface: &Interface,
    taken: &mut BTreeSet<String>,
) -> Result<NicPlan> {
    let mac: Option<MacAddr> = iface.mac.as_deref().and_then(|m| m.parse().ok());
    let chosen = opts.nic(&iface.name);
    // An asked-for name was checked against the netns and is in `taken`.
    let tap_name = match chosen.and_then(|c| c.tap_name.clone()) {
        Some(name) => name,
        None => unique_name("tap", iface, taken),
    };
    let queues = chosen.and_then(|c| c.queues).unwrap_or(opts.queues);
    let (owner, group) = match chosen.and_then(|c| c.owner) {
        Some(o) => (Some(o.uid), o.gid),
        None => (opts.owner, opts.group),
    };
    let (mut wiring, mut wiring_note) = choose_wiring(opts.mode, iface, mac, inv);
    let l3 = (wiring == Wiring::L3)
        .then(|| super::l3::plan_nic(iface))
        .flatten();
    if wiring == Wiring::L3 && l3.is_none() {
        wiring = Wiring::Tc;
        wiring_note = Some("no address to route; wired with tc redirect instead".into());
    }
    let serve = serve_choice(opts.serve, chosen.and_then(|c| c.serve), iface, wiring)?;
    let ingress = inv.ingress.get(&iface.ifindex).cloned().unwrap_or_default();
    refuse_second_redirect(iface, &ingress)?;
    let tc = match wiring {
        Wiring::Tc => Some(tc_plan(iface, &ingress)?),
        Wiring::Bridge | Wiring::Macvtap | Wiring::L3 => None,
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
    Ok(NicPlan {
        pod: PodSide {
            ifindex: iface.ifindex,
            name: iface.name.clone(),
            mac,
            mtu: iface.mtu,
            kind: iface.kind,
            txqlen: inv.txqlen.get(&iface.ifindex).copied(),
            neighbours: pinned_neighbours(desc, iface),
        },
        tap: TapPlan {
            name: tap_name,
            mtu: iface.mtu,
            queues,
            vnet_hdr: opts.vnet_hdr,
            multi_queue: queues > 1,
            owner,
            group,
        },
        guest_mac: chosen.and_then(|c| c.guest_mac),
        wiring,
        wiring_note,
        tc,
        bridge,
        macvtap,
        l3,
        serve,
    })
}

/// Whether `iface`, wired as `wiring`, is served: `all` (the attachment's
/// choice) unless `explicit` (the NIC's) says otherwise. A NIC that cannot
/// be served is passed over, or refused when it was asked for explicitly.
fn serve_choice(
    all: bool,
    explicit: Option<bool>,
    iface: &Interface,
    wiring: Wiring,
) -> Result<bool> {
    if !explicit.unwrap_or(all) {
        return Ok(false);
    }
    let why = if wiring == Wiring::Macvtap {
        Some("a macvtap's guest cannot be served: its frames leave through the macvtap, where podtap can neither see them first nor answer them")
    } else if iface.address_details.iter().all(|a| a.link_local) {
        Some("the interface has no address to lease: its network configures the guest itself (DHCP through the wiring)")
    } else {
        None
    };
    match (why, explicit) {
        (None, _) => Ok(true),
        (Some(why), Some(true)) => Err(Error::Invalid(Invalid::nic_option(
            crate::error::Input::Serve,
            &iface.name,
            why,
        ))),
        (Some(why), _) => {
            tracing::info!(interface = iface.name.as_str(), "not served: {why}");
            Ok(false)
        }
    }
}

/// The wiring `iface` gets in `mode`, and why it differs when it does.
fn choose_wiring(
    mode: Wiring,
    iface: &Interface,
    mac: Option<MacAddr>,
    inv: &Inventory,
) -> (Wiring, Option<String>) {
    let instead = |why: String| {
        (
            Wiring::Tc,
            Some(format!("{why}; wired with tc redirect instead")),
        )
    };
    match mode {
        Wiring::Bridge if !iface.kind.bridgeable() => {
            instead(format!("{} links cannot be bridged", iface.kind.as_str()))
        }
        Wiring::Bridge if mac.is_none() => {
            instead("a link without an Ethernet address cannot be bridged".into())
        }
        Wiring::Bridge if inv.lower_of_stacked.contains(&iface.ifindex) => {
            instead("a macvlan/ipvlan/vlan sits on this link, so it cannot be bridged".into())
        }
        Wiring::Macvtap => match macvtap_refusal(iface, mac, inv) {
            Some(why) => instead(why),
            None => (Wiring::Macvtap, None),
        },
        mode => (mode, None),
    }
}

/// A second redirect would never see a packet, and its detach could not
/// tell whose ingress qdisc it is: one attachment per pod interface.
fn refuse_second_redirect(iface: &Interface, ingress: &IngressState) -> Result<()> {
    match ingress.redirects.iter().find(|p| is_podtap_prio(**p)) {
        Some(p) => Err(Error::Invalid(Invalid::AlreadyWired {
            name: iface.name.clone(),
            prio: *p,
        })),
        None => Ok(()),
    }
}

/// The tc redirect of `iface`: a free priority, and whether its ingress qdisc is podtap's.
fn tc_plan(iface: &Interface, ingress: &IngressState) -> Result<TcPlan> {
    let prio = naming::free_prio(&ingress.prios).ok_or_else(|| {
        Error::Invalid(Invalid::NoFreePriority {
            name: iface.name.clone(),
            first: TC_PRIO_BASE,
            last: TC_PRIO_BASE + TC_PRIO_SPAN - 1,
        })
    })?;
    Ok(TcPlan {
        prio,
        create_pod_qdisc: ingress.qdisc.is_none(),
        existing_pod_qdisc: ingress.qdisc.clone(),
    })
}

/// The permanent neighbours of `iface` (`check` verifies they stay).
fn pinned_neighbours(desc: &Description, iface: &Interface) -> Vec<PinnedNeighbour> {
    desc.neighbours
        .iter()
        .filter(|n| n.interface == iface.name && (n.state == "permanent" || n.state == "noarp"))
        .map(|n| PinnedNeighbour {
            ip: n.ip.clone(),
            mac: n.mac.clone(),
        })
        .collect()
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
