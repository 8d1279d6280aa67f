//! The decisions of teardown, as pure functions of what the kernel holds now:
//! what is ours, what to undo (and in which order), what is missing.
//!
//! Objects are found by ifindex and link group, never by a name the pod could
//! have changed; names are only a fallback for a TAP made just before a crash,
//! before podtap could group it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use rtnetlink::packet_route::link::InfoKind;

use crate::id::SandboxId;
use crate::kernel::links::LinkState;
use crate::kernel::mac::MacAddr;
use crate::kernel::tc::FilterInfo;
use crate::plan::{self, NicPlan, Plan};
use crate::state::{created_ifindex, Created};

/// What the kernel holds now, as far as teardown and check look.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Every link of the netns, by ifindex.
    pub links: BTreeMap<u32, LinkState>,
    /// The ingress filters of the links whose filters were read.
    pub filters: BTreeMap<u32, Vec<FilterInfo>>,
}

impl Observed {
    fn filters_of(&self, ifindex: u32) -> &[FilterInfo] {
        self.filters.get(&ifindex).map_or(&[], Vec::as_slice)
    }
}

/// One kernel change teardown makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Delete the filters at `prio` on the ingress hook of `ifindex`.
    DeleteFilter {
        /// The link.
        ifindex: u32,
        /// Its name now (for messages).
        name: String,
        /// podtap's priority.
        prio: u16,
    },
    /// Delete the ingress qdisc podtap added.
    DeleteIngressQdisc {
        /// The link.
        ifindex: u32,
        /// Its name now.
        name: String,
    },
    /// Put back the transmit queue length the link had before attach.
    SetTxqlen {
        /// The link.
        ifindex: u32,
        /// Its name now.
        name: String,
        /// The recorded value.
        txqlen: u32,
    },
    /// Take a pod interface out of podtap's bridge and give back its MAC.
    ReleaseFromBridge {
        /// The pod interface.
        ifindex: u32,
        /// Its name now.
        name: String,
        /// Its original MAC.
        mac: MacAddr,
    },
    /// Delete every link of a group with one request (one RCU grace period).
    DeleteGroup {
        /// The link group.
        group: u32,
    },
    /// Delete one link.
    DeleteLink {
        /// The link.
        ifindex: u32,
        /// Its name now.
        name: String,
        /// Its kind ("tun", "bridge").
        kind: String,
    },
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::DeleteFilter { name, prio, .. } => {
                write!(f, "podtap filter prio {prio} on {name}")
            }
            Action::DeleteIngressQdisc { name, .. } => write!(f, "ingress qdisc on {name}"),
            Action::SetTxqlen { name, txqlen, .. } => write!(f, "txqueuelen {txqlen} on {name}"),
            Action::ReleaseFromBridge { name, mac, .. } => {
                write!(f, "{name} from its bridge (MAC {mac})")
            }
            Action::DeleteGroup { group } => write!(f, "link group {group}"),
            Action::DeleteLink { name, kind, .. } => write!(f, "{kind} {name}"),
        }
    }
}

/// What teardown will do: the pod side of each interface (in order within
/// one interface, interfaces side by side), then podtap's own links.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Undo {
    /// Per pod interface, the changes to it, in order.
    pub pod_side: Vec<Vec<Action>>,
    /// Then the links podtap made.
    pub links: Vec<Action>,
    /// Things already gone or left alone on purpose.
    pub warnings: Vec<String>,
}

/// Undo what a checkpoint records. Links are podtap's when their ifindex is
/// in `created` or they are in the plan's group; `match_names` also takes a
/// TAP or bridge with a planned name, only for an attach that died before it
/// could record or group what it made. `now.filters` must hold the filters
/// of the plan's tc-wired pod interfaces.
pub fn undo_recorded(plan: &Plan, created: &[Created], now: &Observed, match_names: bool) -> Undo {
    let mut undo = Undo::default();
    for nic in &plan.nics {
        match now.links.get(&nic.pod.ifindex) {
            Some(live) => undo
                .pod_side
                .push(restore_pod(nic, live, now, &mut undo.warnings)),
            None => undo.warnings.push(format!(
                "pod interface {} (ifindex {}) is gone",
                nic.pod.name, nic.pod.ifindex
            )),
        }
    }
    for c in created {
        if !now.links.contains_key(&c.ifindex) {
            undo.warnings.push(format!(
                "{} {} (ifindex {}) was already gone",
                c.kind, c.name, c.ifindex
            ));
        }
    }
    let ours = our_links(plan, created, now.links.values(), match_names);
    undo.links = delete_links(plan.group, &ours, now.links.values());
    undo
}

/// Remove podtap's filter (and its qdisc if podtap made it and nothing else
/// uses it), put back txqueuelen, or unbridge and restore the MAC.
fn restore_pod(
    nic: &NicPlan,
    live: &LinkState,
    now: &Observed,
    warnings: &mut Vec<String>,
) -> Vec<Action> {
    let pod = &nic.pod;
    let mut steps = Vec::new();
    if let Some(tcp) = &nic.tc {
        steps.push(Action::DeleteFilter {
            ifindex: pod.ifindex,
            name: live.name.clone(),
            prio: tcp.prio,
        });
        if tcp.create_pod_qdisc {
            let foreign = now
                .filters_of(pod.ifindex)
                .iter()
                .filter(|f| f.prio != tcp.prio)
                .count();
            if foreign == 0 {
                steps.push(Action::DeleteIngressQdisc {
                    ifindex: pod.ifindex,
                    name: live.name.clone(),
                });
            } else {
                warnings.push(format!(
                    "kept the ingress qdisc on {}: it now holds {foreign} filter(s) that are not podtap's",
                    live.name
                ));
            }
        }
    }
    // Adding an ingress qdisc to a link with txqueuelen 0 (as CNI plugins make
    // veths) makes the kernel raise it to 1000, and deleting the qdisc does not
    // lower it again: put the recorded value back.
    if let Some(q) = pod.txqlen.filter(|q| live.txqlen != Some(*q)) {
        steps.push(Action::SetTxqlen {
            ifindex: pod.ifindex,
            name: live.name.clone(),
            txqlen: q,
        });
    }
    if let (Some(_), Some(mac)) = (&nic.bridge, pod.mac) {
        if live.controller.is_some() || live.mac != Some(mac) {
            steps.push(Action::ReleaseFromBridge {
                ifindex: pod.ifindex,
                name: live.name.clone(),
                mac,
            });
        }
    }
    steps
}

/// Links podtap made for this plan: by recorded ifindex, by group, or (with
/// `match_names`, for a TAP made just before a crash) by its planned name when
/// nothing marks it as someone else's (no other ifalias, no other group).
pub fn our_links<'a>(
    plan: &Plan,
    created: &[Created],
    live: impl Iterator<Item = &'a LinkState>,
    match_names: bool,
) -> Vec<&'a LinkState> {
    let unclaimed = |l: &LinkState| {
        (l.group == 0 || l.group == plan.group)
            && l.alias
                .as_deref()
                .is_none_or(|a| plan::is_marker_of(a, &plan.id))
    };
    let recorded: BTreeSet<u32> = created.iter().map(|c| c.ifindex).collect();
    let planned: BTreeSet<&str> = plan
        .nics
        .iter()
        .flat_map(|n| {
            std::iter::once(n.tap.name.as_str()).chain(n.bridge.as_ref().map(|b| b.name.as_str()))
        })
        .collect();
    let pods: BTreeSet<u32> = plan.nics.iter().map(|n| n.pod.ifindex).collect();
    live.filter(|l| l.is_tap_or_bridge() && !pods.contains(&l.ifindex))
        .filter(|l| {
            recorded.contains(&l.ifindex)
                || l.group == plan.group
                || (match_names && planned.contains(l.name.as_str()) && unclaimed(l))
        })
        .collect()
}

/// Delete `ours`: one group deletion when the group holds exactly them (and
/// some of them), then one by one for the rest.
fn delete_links<'a>(
    group: u32,
    ours: &[&LinkState],
    live: impl Iterator<Item = &'a LinkState>,
) -> Vec<Action> {
    let ours_idx: BTreeSet<u32> = ours.iter().map(|l| l.ifindex).collect();
    let foreign_in_group = { live }.any(|l| l.group == group && !ours_idx.contains(&l.ifindex));
    let by_group = !foreign_in_group && ours.iter().any(|l| l.group == group);
    let mut actions = Vec::new();
    if by_group {
        actions.push(Action::DeleteGroup { group });
    }
    actions.extend(
        ours.iter()
            .filter(|l| !(by_group && l.group == group))
            .map(|l| delete_link(l)),
    );
    actions
}

fn delete_link(l: &LinkState) -> Action {
    Action::DeleteLink {
        ifindex: l.ifindex,
        name: l.name.clone(),
        kind: l.kind.clone().unwrap_or_else(|| "link".into()),
    }
}

/// Without a checkpoint: links marked `podtap:<id>` (or unmarked ones in the
/// id's preferred group), podtap-priority filters that redirect to them, and
/// bridged pod interfaces given back the MAC recorded in their bridge's
/// marker. `now.filters` must hold the filters of every link.
pub fn undo_by_markers(id: &SandboxId, now: &Observed) -> Undo {
    let group = plan::preferred_group(id);
    let ours: Vec<&LinkState> = now
        .links
        .values()
        .filter(|l| l.is_tap_or_bridge())
        .filter(|l| {
            // The marker decides. The group alone could be another id's (a
            // colliding id moves to the next free group), so it counts
            // only for an unmarked link: a bridge made just before a crash.
            match l.alias.as_deref() {
                Some(a) => plan::is_marker_of(a, id),
                None => l.group == group,
            }
        })
        .collect();
    let our_idx: BTreeSet<u32> = ours.iter().map(|l| l.ifindex).collect();
    let mut undo = Undo::default();
    for l in now.links.values().filter(|l| !our_idx.contains(&l.ifindex)) {
        let mut steps = Vec::new();
        let marked_mac = l
            .controller
            .filter(|c| our_idx.contains(c))
            .and_then(|c| now.links.get(&c))
            .and_then(|b| plan::bridge_marker_mac(b.alias.as_deref()?, l.ifindex));
        if let Some(mac) = marked_mac {
            steps.push(Action::ReleaseFromBridge {
                ifindex: l.ifindex,
                name: l.name.clone(),
                mac,
            });
        }
        for f in now.filters_of(l.ifindex) {
            if plan::is_podtap_prio(f.prio) && f.redirect_to.is_some_and(|t| our_idx.contains(&t)) {
                steps.push(Action::DeleteFilter {
                    ifindex: l.ifindex,
                    name: l.name.clone(),
                    prio: f.prio,
                });
            }
        }
        if !steps.is_empty() {
            undo.pod_side.push(steps);
        }
    }
    undo.links = ours.into_iter().map(delete_link).collect();
    undo
}

/// What is not as `plan` recorded it (empty when all is well). `now.filters`
/// must hold the filters of every pod interface and TAP of the plan.
pub fn missing(plan: &Plan, created: &[Created], now: &Observed) -> Vec<String> {
    let mut problems = Vec::new();
    for nic in &plan.nics {
        missing_nic(nic, created, now, &mut problems);
    }
    problems
}

fn missing_nic(nic: &NicPlan, created: &[Created], now: &Observed, problems: &mut Vec<String>) {
    let Some(pod) = now.links.get(&nic.pod.ifindex) else {
        problems.push(format!(
            "pod interface {} (ifindex {}) is missing",
            nic.pod.name, nic.pod.ifindex
        ));
        return;
    };
    let tap_idx = created_ifindex(created, &nic.tap.name);
    let Some(tap) = now.links.get(&tap_idx).filter(|l| l.is_kind(InfoKind::Tun)) else {
        problems.push(format!(
            "TAP {} (ifindex {tap_idx}) is missing",
            nic.tap.name
        ));
        return;
    };
    if !tap.up {
        problems.push(format!("TAP {} is down", tap.name));
    }
    if tap.mtu != nic.tap.mtu {
        problems.push(format!(
            "TAP {} has MTU {} instead of {}",
            tap.name, tap.mtu, nic.tap.mtu
        ));
    }
    if let Some(tcp) = &nic.tc {
        for (from, to) in [(pod, tap), (tap, pod)] {
            let ok = now
                .filters_of(from.ifindex)
                .iter()
                .any(|f| f.prio == tcp.prio && f.redirect_to == Some(to.ifindex));
            if !ok {
                problems.push(format!(
                    "tc redirect {} -> {} (prio {}) is missing",
                    from.name, to.name, tcp.prio
                ));
            }
        }
    }
    if let Some(b) = &nic.bridge {
        let idx = created_ifindex(created, &b.name);
        match now.links.get(&idx) {
            None => problems.push(format!("bridge {} (ifindex {idx}) is missing", b.name)),
            Some(br) => {
                for port in [pod, tap] {
                    if port.controller != Some(br.ifindex) {
                        problems.push(format!("{} is not in bridge {}", port.name, br.name));
                    }
                }
                if pod.mac != Some(b.pod_mac) {
                    problems.push(format!(
                        "{} does not carry its bridged MAC {}",
                        pod.name, b.pod_mac
                    ));
                }
            }
        }
    }
}
