//! Build what a plan says: TAPs (ioctls on /dev/net/tun fds opened in the netns), bridges, tc
//! redirects (rtnetlink), recording each link made as soon as it exists.

use std::collections::BTreeMap;
use std::time::Instant;

use rtnetlink::packet_route::link::InfoKind;

use super::{micros, requests, taps};
use crate::error::{Error, Result};
use crate::kernel::batch::Request;
use crate::kernel::links::LinkState;
use crate::kernel::netlink::Netlink;
use crate::kernel::netns::NetNs;
use crate::kernel::{bridge, links, macvtap, replay, sysctl};
use crate::model::Timings;
use crate::plan::{self, BridgePlan, NicPlan, Plan};
use crate::state::{created_ifindex, Created, CreatedKind};

/// Build every TAP, bridge and filter of `plan`, adding each link made to
/// `created` as soon as it exists (so a failure can undo exactly those).
pub(super) fn build(
    ns: &NetNs,
    nl: &Netlink,
    plan: &Plan,
    timings: &mut Timings,
    created: &mut Vec<Created>,
    prepared: Option<taps::Prepared>,
) -> Result<()> {
    let t = Instant::now();
    let specs = taps::specs(plan);
    let (made, failed) = taps::create(nl, &specs, prepared);
    created.extend(specs.iter().zip(&made).map(|(s, (i, mac))| Created {
        name: s.name.clone(),
        ifindex: *i,
        kind: CreatedKind::Tap,
        mac: Some(*mac),
    }));
    if let Some(e) = failed {
        return Err(e);
    }
    create_macvtaps(ns, nl, plan, created)?;
    let tap_indexes: Vec<u32> = plan
        .nics
        .iter()
        .map(|n| made_ifindex(nl, created, &n.tap.name))
        .collect::<Result<_>>()?;
    timings.tap = micros(t);

    let t = Instant::now();
    let marker = plan::marker(&plan.id);
    let marker = marker.as_str();
    let bridges = create_bridges(nl, plan)?;
    created.extend(bridges.iter().flatten().cloned());
    quiet_bridged_links(nl, plan)?;

    timings.tap += micros(t);
    log_phase("taps", plan, timings.tap);

    // The NICs without a bridge are wired in one batch (a few system calls
    // for all of them, in order); each bridged NIC then goes step by step.
    let t = Instant::now();
    let steps = requests::unbridged(&plan.nics, &tap_indexes, plan.group, marker);
    run_steps(nl, &steps)?;
    let bridged: Vec<Result<()>> = plan
        .nics
        .iter()
        .zip(&tap_indexes)
        .zip(&bridges)
        .filter_map(|((n, tap), br)| Some((n, *tap, br.as_ref()?)))
        .map(|(n, tap, br)| wire_bridged(nl, plan.group, marker, n, tap, br))
        .collect();
    bridged.into_iter().collect::<Result<Vec<()>>>()?;
    super::l3::build(nl, plan, &tap_indexes)?;
    timings.wiring = micros(t);
    log_phase("wiring", plan, timings.wiring);
    Ok(())
}

/// One event per NIC (debug) and one for the phase (info), with its time.
fn log_phase(phase: &'static str, plan: &Plan, us: u64) {
    for n in &plan.nics {
        let (interface, tap, wiring) =
            (n.pod.name.as_str(), n.tap.name.as_str(), n.wiring.as_str());
        tracing::debug!(phase, interface, tap, wiring, "done");
    }
    tracing::info!(phase, nics = plan.nics.len(), us, "phase done");
}

/// Send `steps` as one batch; the first that failed is the error.
fn run_steps(nl: &Netlink, steps: &[requests::Step]) -> Result<()> {
    if steps.is_empty() {
        return Ok(());
    }
    let batch: Vec<&Request> = steps.iter().map(|s| &s.request).collect();
    let results = nl
        .batch
        .run(&batch)
        .map_err(|e| nl.err("send request batch", "", e))?;
    match steps
        .iter()
        .zip(results)
        .find_map(|(s, r)| Some((s, r.err()?)))
    {
        Some((step, errno)) => Err(nl.err(step.op, &step.on, errno)),
        None => Ok(()),
    }
}

/// Configure one bridged NIC's TAP into its bridge, bring the bridge up and
/// hand the pod interface over to it.
fn wire_bridged(
    nl: &Netlink,
    group: u32,
    marker: &str,
    n: &NicPlan,
    tap: u32,
    b: &Created,
) -> Result<()> {
    let up = true;
    let controller = Some(b.ifindex);
    links::configure_tap(&nl.batch, tap, n.tap.mtu, group, marker, controller, up)
        .map_err(|e| nl.err("configure TAP", &n.tap.name, e))?;
    links::set_up(&nl.batch, b.ifindex).map_err(|e| nl.err("bring bridge up", &b.name, e))?;
    if n.serve {
        // Before the pod interface joins: nothing the guest asks for leaves.
        let mut steps = vec![requests::Step {
            request: Request::create(crate::kernel::tc::new_ingress_qdisc(tap)),
            op: "add ingress qdisc",
            on: n.tap.name.clone(),
        }];
        steps.extend(requests::stop_steps(n, tap));
        run_steps(nl, &steps)?;
    }
    if let Some(bp) = &n.bridge {
        hand_over_pod(nl, n, bp, b)?;
    }
    Ok(())
}

/// podtap's bridge and TAP take no part in IPv6 in the pod netns (no
/// link-local, DAD, RS or MLD on the pod's wire, no SLAAC from a router
/// advertisement): switched off before either is up.
fn quiet_bridged_links(nl: &Netlink, plan: &Plan) -> Result<()> {
    let settings: Vec<(String, bool)> = plan
        .nics
        .iter()
        .filter_map(|n| n.bridge.as_ref().map(|b| (n, b)))
        .flat_map(|(n, b)| [(n.tap.name.clone(), true), (b.name.clone(), true)])
        .collect();
    if settings.is_empty() {
        return Ok(());
    }
    sysctl::set_ipv6_disabled(&nl.worker, settings)
}

/// Give the wire to the guest: the pod interface takes its bridged MAC and
/// joins the bridge, and gets its permanent neighbours back (the MAC change
/// flushed them).
fn hand_over_pod(nl: &Netlink, n: &NicPlan, bp: &BridgePlan, b: &Created) -> Result<()> {
    bridge::enslave(&nl.batch, n.pod.ifindex, b.ifindex, bp.pod_mac).map_err(|e| {
        nl.err(
            "enslave pod interface to bridge",
            format!("{} -> {}", n.pod.name, b.name),
            e,
        )
    })?;
    for neigh in &bp.restore.neighbours {
        replay::restore(&nl.batch, neigh)
            .map_err(|e| nl.err("restore permanent neighbour", &n.pod.name, e))?;
    }
    Ok(())
}

/// Create the macvtaps of `plan`, record each (kind "macvtap", the pod's
/// MAC, which passthru takes), then make their device nodes.
fn create_macvtaps(
    ns: &NetNs,
    nl: &Netlink,
    plan: &Plan,
    created: &mut Vec<Created>,
) -> Result<()> {
    let nics: Vec<&NicPlan> = plan.nics.iter().filter(|n| n.macvtap.is_some()).collect();
    if nics.is_empty() {
        return Ok(());
    }
    let made: Vec<Result<()>> = nics
        .iter()
        .map(|n| {
            let (name, lower) = (&n.tap.name, n.pod.ifindex);
            macvtap::create(&nl.batch, name, lower, n.tap.mtu, plan.group).map_err(|e| {
                let on = format!("{} on {}", n.tap.name, n.pod.name);
                nl.err("create macvtap (passthru)", on, e)
            })
        })
        .collect();
    // Learn every macvtap that exists before reporting a failure, so the
    // rollback finds them by ifindex.
    let live = dump_links(nl)?;
    for n in &nics {
        if let Some(l) = made_link(&live, &n.tap.name, plan.group, InfoKind::MacVtap) {
            created.push(Created {
                name: n.tap.name.clone(),
                ifindex: l.ifindex,
                kind: CreatedKind::Macvtap,
                mac: l.mac,
            });
        }
    }
    made.into_iter().collect::<Result<Vec<()>>>()?;
    let links: Vec<(String, u32)> = nics
        .iter()
        .map(|n| Ok((n.tap.name.clone(), made_ifindex(nl, created, &n.tap.name)?)))
        .collect::<Result<_>>()?;
    // The thread's own errors (mount, sysfs) come back inside: they name their step.
    let numbers = ns
        .run(|| Ok(macvtap::device_numbers(&links)))?
        .map_err(|e| Error::kernel(&ns.display(), "find macvtap character devices", "", e))?;
    for (n, dev) in nics.iter().zip(numbers) {
        let Some(mp) = &n.macvtap else { continue };
        macvtap::make_node(
            std::path::Path::new(&mp.device),
            dev,
            n.tap.owner,
            n.tap.group,
        )
        .map_err(|e| Error::io("make macvtap device node", mp.device.clone(), e))?;
    }
    Ok(())
}

fn create_bridges(nl: &Netlink, plan: &Plan) -> Result<Vec<Option<Created>>> {
    if plan.nics.iter().all(|n| n.bridge.is_none()) {
        return Ok(vec![None; plan.nics.len()]);
    }
    let made: Vec<Result<()>> = plan
        .nics
        .iter()
        .filter_map(|n| n.bridge.as_ref().map(|b| (n, b)))
        .map(|(n, b)| {
            let marker = plan::bridge_marker(&plan.id, n.pod.ifindex, n.pod.mac);
            bridge::create(&nl.batch, &b.name, n.pod.mtu, plan.group, &marker)
                .map_err(|e| nl.err("create bridge", &b.name, e))
        })
        .collect();
    made.into_iter().collect::<Result<Vec<()>>>()?;
    let live = dump_links(nl)?;
    plan.nics
        .iter()
        .map(|n| match &n.bridge {
            None => Ok(None),
            Some(b) => made_link(&live, &b.name, plan.group, InfoKind::Bridge)
                .map(|l| {
                    Some(Created {
                        name: b.name.clone(),
                        ifindex: l.ifindex,
                        kind: CreatedKind::Bridge,
                        mac: l.mac,
                    })
                })
                .ok_or_else(|| {
                    nl.err(
                        "find bridge right after creating it",
                        &b.name,
                        nix::errno::Errno::ENODEV,
                    )
                }),
        })
        .collect()
}

/// The ifindex of the link this attach just made as `name` (every one it
/// made is recorded before the creation step returns).
fn made_ifindex(nl: &Netlink, created: &[Created], name: &str) -> Result<u32> {
    created_ifindex(created, name).ok_or_else(|| {
        nl.err(
            "find link right after creating it",
            name,
            nix::errno::Errno::ENODEV,
        )
    })
}

fn dump_links(nl: &Netlink) -> Result<BTreeMap<u32, LinkState>> {
    links::list(&nl.batch).map_err(|e| nl.err("dump links", "", e))
}

/// The link this attach just made as `name` (of `kind`, in its `group`), as
/// one dump taken after the creation requests shows it.
fn made_link<'a>(
    live: &'a BTreeMap<u32, LinkState>,
    name: &str,
    group: u32,
    kind: InfoKind,
) -> Option<&'a LinkState> {
    let kind = kind.to_string();
    live.values()
        .find(|l| l.name == name && l.group == group && l.kind.as_deref() == Some(kind.as_str()))
}
