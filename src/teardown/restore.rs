//! The pod side of teardown: whether a pod interface is still the recorded
//! one, and what puts it back as it was before attach.

use std::collections::BTreeSet;

use super::actions::{Action, Observed};
use crate::kernel::links::LinkState;
use crate::kernel::mac::MacAddr;
use crate::kernel::tc::FilterInfo;
use crate::model::LinkKind;
use crate::plan::{BridgePlan, NicPlan, PodRestore, TcPlan};

/// Whether `live` is still the pod interface `nic` recorded: same kind and,
/// in bridge mode (where podtap restores the MAC), its own MAC or the one
/// podtap gave it. In tc mode the MAC proves nothing (someone may change it
/// while attached); podtap's filter is proven by its redirect target, so a
/// changed MAC must not leave a dead redirect behind. (Its name may change.)
pub(super) fn is_recorded_pod(nic: &NicPlan, live: &LinkState) -> bool {
    let kind_ok = match nic.pod.kind {
        LinkKind::Physical => live.kind.is_none(),
        LinkKind::Other => true,
        k => live.kind.as_deref() == Some(k.as_str()),
    };
    let mac_ok = match &nic.bridge {
        Some(b) => nic.pod.mac.is_none() || live.mac == nic.pod.mac || live.mac == Some(b.pod_mac),
        None => true,
    };
    kind_ok && mac_ok
}

/// What restoring a pod interface may act on.
pub(super) struct PodContext<'a> {
    /// ifindexes our filters may redirect to.
    pub(super) targets: &'a BTreeSet<u32>,
    /// podtap's own bridges (proven ours).
    pub(super) our_bridges: &'a BTreeSet<u32>,
}

/// Remove podtap's filter (and its qdisc if podtap made it and nothing else
/// uses it), put back txqueuelen, or unbridge and restore the MAC.
pub(super) fn restore_pod(
    nic: &NicPlan,
    live: &LinkState,
    now: &Observed,
    ctx: &PodContext<'_>,
    warnings: &mut Vec<String>,
) -> Vec<Action> {
    let pod = &nic.pod;
    let mut steps = Vec::new();
    // Whether podtap's tc objects were found here (only tc mode adds any).
    let tc_ours = match &nic.tc {
        Some(tcp) => undo_tc(tcp, pod.ifindex, live, now, ctx, &mut steps, warnings),
        None => false,
    };
    // Adding an ingress qdisc to a link with txqueuelen 0 (as CNI plugins make
    // veths) makes the kernel raise it to 1000, and deleting the qdisc does not
    // lower it again: put the recorded value back (only where podtap's tc was).
    if let Some(q) = pod.txqlen.filter(|q| tc_ours && live.txqlen != Some(*q)) {
        steps.push(Action::SetTxqlen {
            ifindex: pod.ifindex,
            name: live.name.clone(),
            txqlen: q,
        });
    }
    if let (Some(b), Some(mac)) = (&nic.bridge, pod.mac) {
        unbridge(b, pod.ifindex, mac, live, ctx, &mut steps, warnings);
    }
    steps
}

/// Remove podtap's filter on the pod interface `ifindex`, or the ingress
/// qdisc podtap added when it holds nothing else. Returns whether podtap's
/// tc objects were found there.
fn undo_tc(
    tcp: &TcPlan,
    ifindex: u32,
    live: &LinkState,
    now: &Observed,
    ctx: &PodContext<'_>,
    steps: &mut Vec<Action>,
    warnings: &mut Vec<String>,
) -> bool {
    let filters = now.filters_of(ifindex);
    let at_prio: Vec<&FilterInfo> = filters.iter().filter(|f| f.prio == tcp.prio).collect();
    // The kernel reports a mirred whose device is gone with ifindex 0.
    let ours = at_prio.iter().any(|f| {
        f.redirect_to
            .is_some_and(|t| t == 0 || ctx.targets.contains(&t))
    });
    if !ours && !at_prio.is_empty() {
        warnings.push(format!(
            "the filter at prio {} on {} does not redirect to podtap's TAP; left it",
            tcp.prio, live.name
        ));
    }
    let foreign = filters
        .iter()
        .filter(|f| !(ours && f.prio == tcp.prio))
        .count();
    // The qdisc podtap added, holding nothing but podtap's filter: deleting
    // it takes the filter too (one request, not two, per interface).
    if tcp.create_pod_qdisc && foreign == 0 {
        steps.push(Action::DeleteIngressQdisc {
            ifindex,
            name: live.name.clone(),
        });
        return true;
    }
    if ours {
        steps.push(Action::DeleteFilter {
            ifindex,
            name: live.name.clone(),
            prio: tcp.prio,
        });
    }
    if tcp.create_pod_qdisc {
        warnings.push(format!(
            "kept the ingress qdisc on {}: it now holds {foreign} filter(s) that are not podtap's",
            live.name
        ));
    }
    ours
}

/// Take the pod interface `ifindex` out of podtap's bridge with its own
/// `mac`, and put back what the MAC change flushed; leave it in anyone
/// else's bridge.
fn unbridge(
    b: &BridgePlan,
    ifindex: u32,
    mac: MacAddr,
    live: &LinkState,
    ctx: &PodContext<'_>,
    steps: &mut Vec<Action>,
    warnings: &mut Vec<String>,
) {
    let release = Action::ReleaseFromBridge {
        ifindex,
        name: live.name.clone(),
        mac,
    };
    match live.controller {
        Some(c) if ctx.our_bridges.contains(&c) => steps.push(release),
        Some(c) => {
            warnings.push(format!(
                "{} is now a port of ifindex {c}, not of podtap's bridge; left it there",
                live.name
            ));
            return;
        }
        // Out of every bridge but still with podtap's MAC: give back its own.
        None if live.mac == Some(b.pod_mac) => steps.push(release),
        None => {}
    }
    steps.extend(give_back(&live.name, &b.restore));
}

/// Bridge mode: the pod interface's permanent neighbours (its MAC changes flushed them).
fn give_back(name: &str, r: &PodRestore) -> Vec<Action> {
    r.neighbours
        .iter()
        .map(|record| Action::Restore {
            name: name.to_string(),
            what: "neighbour",
            record: record.clone(),
        })
        .collect()
}
