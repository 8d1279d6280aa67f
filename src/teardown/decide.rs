//! The decisions of teardown, as pure functions of what the kernel holds now:
//! what is ours, what to undo (and in which order), what is missing.
//!
//! Objects are found by ifindex and link group, never by a name the pod could
//! have changed; names are only a fallback for a TAP made just before a crash,
//! before podtap could group it.

use std::collections::BTreeSet;

use rtnetlink::packet_route::link::InfoKind;

use crate::kernel::links::LinkState;
use crate::plan::{self, Plan};
use crate::state::{Created, CreatedKind};

use super::restore::{is_recorded_pod, restore_pod, PodContext};

pub use super::actions::{Action, Observed};

/// What teardown will do: the pod side of each interface (in order within
/// one interface, interfaces side by side), then podtap's own links.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Undo {
    /// Per pod interface, the changes to it, in order.
    pub(crate) pod_side: Vec<Vec<Action>>,
    /// Then the links podtap made.
    pub(crate) links: Vec<Action>,
    /// Things already gone or left alone on purpose.
    pub(crate) warnings: Vec<String>,
}

/// Undo what a checkpoint records.
///
/// Nothing is touched before it is proven ours: a link must match its
/// recorded ifindex *and* kind *and* carry podtap's marker for this id (or
/// sit in the plan's link group); a pod interface must still be the recorded
/// one (kind, and its original or bridged MAC); a filter must sit at podtap's
/// priority *and* redirect to one of our TAPs; a bridge port is released only
/// from podtap's own bridge. Anything else is skipped with a warning.
/// See [`Proof`] for what proves a link ours. `now.filters` must hold the
/// filters of the plan's tc-wired pod interfaces.
#[cfg(test)]
pub fn undo_recorded(plan: &Plan, created: &[Created], now: &Observed, proof: Proof) -> Undo {
    undo_in(plan, created, now, proof, Scope::Whole)
}

/// Whether a plan is a whole attachment (its link group is its alone) or
/// some NICs of a live one (`podtap watch`): then the other NICs' TAPs and
/// bridges share the plan's link group, so the group proves nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every NIC of the attachment.
    Whole,
    /// Some NICs; the group is shared with the others.
    Part,
}

pub fn undo_in(
    plan: &Plan,
    created: &[Created],
    now: &Observed,
    proof: Proof,
    scope: Scope,
) -> Undo {
    let mut undo = Undo::default();
    let ours = our_links_in(plan, created, now.links.values(), proof, scope);
    for c in created {
        match now.links.get(&c.ifindex) {
            None => undo.warnings.push(format!(
                "{} {} (ifindex {}) was already gone",
                c.kind, c.name, c.ifindex
            )),
            Some(l) if !ours.iter().any(|o| o.ifindex == l.ifindex) => undo.warnings.push(format!(
                "ifindex {} is now {} ({}), not podtap's {} {}; left it untouched",
                c.ifindex,
                l.name,
                l.kind.as_deref().unwrap_or("no kind"),
                c.kind,
                c.name
            )),
            Some(_) => {}
        }
    }
    // Where our filters may point: the links proven ours, and the TAPs the
    // checkpoint recorded (a TAP someone deleted leaves its filter behind).
    let targets: BTreeSet<u32> = ours
        .iter()
        .map(|l| l.ifindex)
        .chain(
            created
                .iter()
                .filter(|c| c.kind == CreatedKind::Tap)
                .map(|c| c.ifindex),
        )
        .collect();
    let our_bridges: BTreeSet<u32> = ours
        .iter()
        .filter(|l| l.is_kind(InfoKind::Bridge))
        .map(|l| l.ifindex)
        .collect();
    for nic in &plan.nics {
        match now.links.get(&nic.pod.ifindex) {
            Some(live) if is_recorded_pod(nic, live) => {
                let ctx = PodContext {
                    targets: &targets,
                    our_bridges: &our_bridges,
                };
                undo.pod_side
                    .push(restore_pod(nic, live, now, &ctx, &mut undo.warnings));
            }
            Some(live) => undo.warnings.push(format!(
                "ifindex {} is now {} ({}, MAC {}), not the recorded pod interface {}; left it untouched",
                nic.pod.ifindex,
                live.name,
                live.kind.as_deref().unwrap_or("physical"),
                live.mac.map_or_else(|| "none".into(), |m| m.to_string()),
                nic.pod.name
            )),
            None => undo.warnings.push(format!(
                "pod interface {} (ifindex {}) is gone",
                nic.pod.name, nic.pod.ifindex
            )),
        }
    }
    undo.links = delete_links(plan.group, &ours, now.links.values());
    undo
}

/// What proves a link is podtap's, by where the record of it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// This process just made the links in `created` (rollback): their
    /// ifindex and kind prove them, marked or not yet.
    MadeNow,
    /// A finished checkpoint: every link it records carries podtap's marker
    /// for the id (or sits in the plan's group).
    Recorded,
    /// The checkpoint of an attach that died: also a TAP or bridge with a
    /// planned name when nothing marks it as someone else's (made just
    /// before the crash, before podtap could record or group it).
    RecordedDead,
}

/// Links podtap made for this plan, each proven (see [`Proof`]): a TAP or
/// bridge found by its recorded ifindex with the recorded kind, or by the
/// plan's group, that carries podtap's marker for this id (or, before its
/// marker is set, sits in the plan's group).
#[cfg(test)]
pub fn our_links<'a>(
    plan: &Plan,
    created: &[Created],
    live: impl Iterator<Item = &'a LinkState>,
    proof: Proof,
) -> Vec<&'a LinkState> {
    our_links_in(plan, created, live, proof, Scope::Whole)
}

pub fn our_links_in<'a>(
    plan: &Plan,
    created: &[Created],
    live: impl Iterator<Item = &'a LinkState>,
    proof: Proof,
    scope: Scope,
) -> Vec<&'a LinkState> {
    let match_names = proof == Proof::RecordedDead;
    let part = scope == Scope::Part;
    let marked = |l: &LinkState| match l.alias.as_deref() {
        Some(a) => plan::is_marker_of(a, &plan.id),
        None => l.group == plan.group,
    };
    let unclaimed = |l: &LinkState| {
        (l.group == 0 || l.group == plan.group)
            && l.alias
                .as_deref()
                .is_none_or(|a| plan::is_marker_of(a, &plan.id))
    };
    let recorded_kind = |l: &LinkState| {
        created.iter().any(|c| {
            c.ifindex == l.ifindex
                && match c.kind {
                    CreatedKind::Tap => {
                        l.is_kind(InfoKind::Tun)
                            && super::link_identity::tap_flags(plan, l, &c.name)
                    }
                    CreatedKind::Bridge => l.is_kind(InfoKind::Bridge),
                    CreatedKind::Macvtap => l.is_kind(InfoKind::MacVtap),
                }
        })
    };
    let planned: BTreeSet<&str> = plan
        .nics
        .iter()
        .flat_map(|n| {
            std::iter::once(n.tap.name.as_str()).chain(n.bridge.as_ref().map(|b| b.name.as_str()))
        })
        .collect();
    let pods: BTreeSet<u32> = plan.nics.iter().map(|n| n.pod.ifindex).collect();
    live.filter(|l| {
        l.is_podtap_kind() && !pods.contains(&l.ifindex) && super::link_identity::tap_like(l)
    })
    .filter(|l| {
        (recorded_kind(l) && (proof == Proof::MadeNow || marked(l)))
            || (!part && l.group == plan.group && marked(l))
            || (match_names && planned.contains(l.name.as_str()) && unclaimed(l))
    })
    .collect()
}

/// Delete `ours`: one group deletion when the group holds exactly them (and
/// some of them), then one by one for the rest; bridges always one by one,
/// last (see `execute`: their deletions finish after teardown returns).
fn delete_links<'a>(
    group: u32,
    ours: &[&LinkState],
    live: impl Iterator<Item = &'a LinkState>,
) -> Vec<Action> {
    let ours_idx: BTreeSet<u32> = ours.iter().map(|l| l.ifindex).collect();
    let foreign_in_group = { live }.any(|l| l.group == group && !ours_idx.contains(&l.ifindex));
    let by_group = !foreign_in_group && ours.iter().any(|l| l.group == group && !is_bridge(l));
    let (bridges, rest): (Vec<&LinkState>, Vec<&LinkState>) =
        ours.iter().copied().partition(|l| is_bridge(l));
    let mut actions = Vec::new();
    if by_group {
        // Each bridge costs an rcu_barrier() under RTNL (br_multicast_dev_del):
        // out of the group first, so the group deletion (one grace period for
        // every TAP) never holds RTNL across a bridge.
        actions.extend(
            bridges
                .iter()
                .filter(|l| l.group == group)
                .map(|l| Action::LeaveGroup {
                    ifindex: l.ifindex,
                    name: l.name.clone(),
                }),
        );
        actions.push(Action::DeleteGroup {
            group,
            members: rest
                .iter()
                .filter(|l| l.group == group)
                .map(|l| l.ifindex)
                .collect(),
        });
    }
    actions.extend(
        rest.iter()
            .filter(|l| !(by_group && l.group == group))
            .map(|l| delete_link(l)),
    );
    actions.extend(bridges.iter().map(|l| delete_link(l)));
    actions
}

fn is_bridge(l: &LinkState) -> bool {
    l.kind.as_deref() == Some("bridge")
}

pub(super) fn delete_link(l: &LinkState) -> Action {
    Action::DeleteLink {
        ifindex: l.ifindex,
        name: l.name.clone(),
        kind: l.kind.clone().unwrap_or_else(|| "link".into()),
    }
}
