//! Late interfaces: bring a finished attachment up to date with its netns
//! (`podtap watch`). A pod interface that appeared is built exactly as
//! attach would build it; one that disappeared has its objects undone.
//!
//! Crash safety follows attach: a new NIC goes into the checkpoint's plan,
//! and its TAP name into `pending`, before the first kernel change; once
//! built, `pending` is cleared. A watch that died in between leaves a
//! checkpoint whose `pending` NICs [`recover`] (or detach) undo by name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{build, survey};
use crate::describe;
use crate::error::Result;
use crate::kernel::netlink::Netlink;
use crate::kernel::netns::NetNs;
use crate::model::{Description, Interface, Timings};
use crate::plan::{self, NicPlan, Plan};
use crate::state::{Checkpoint, Created, Stage, StateDir};
use crate::teardown::{self, Proof};

/// One thing [`reconcile`] changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A pod interface appeared and was built (the NIC as planned).
    Added(NicPlan),
    /// A pod interface disappeared and its objects were undone.
    Removed(NicPlan),
    /// A pod interface that appeared could not be attached (it is not
    /// tried again until it changes name).
    Refused {
        /// Its name.
        interface: String,
        /// Its ifindex.
        ifindex: u32,
        /// Why.
        why: String,
    },
    /// These interfaces (or the routes, neighbours, rules) changed in the description.
    Revised(Vec<String>),
    /// Routed wiring the kernel undid on this pod interface was built again.
    Repaired {
        /// The pod interface.
        interface: String,
        /// What was wrong.
        problems: Vec<String>,
    },
}

/// Undo the NICs an earlier watch was still building when it stopped (their
/// TAP names are in `cp.pending`), matching them by planned name too.
pub fn recover(nl: &Netlink, state: &StateDir, cp: &mut Checkpoint) -> Result<Vec<NicPlan>> {
    if cp.pending.is_empty() {
        return Ok(Vec::new());
    }
    let pending: BTreeSet<String> = cp.pending.iter().cloned().collect();
    let (sub, created) = split_off(cp, |n| pending.contains(&n.tap.name));
    tracing::warn!(
        "sandbox {}: an earlier watch did not finish adding {}; undoing it first",
        cp.id,
        sub.nics
            .iter()
            .map(|n| n.pod.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    teardown::undo_part(nl, &sub, &created, Proof::RecordedDead).into_result()?;
    remove_nodes(&sub);
    cp.pending.clear();
    state.save(cp)?;
    Ok(sub.nics)
}

/// The NICs of `plan` whose pod interface is no longer in `desc`.
pub fn gone<'a>(plan: &'a Plan, desc: &Description) -> Vec<&'a NicPlan> {
    plan.nics
        .iter()
        .filter(|n| desc.interfaces.iter().all(|i| i.ifindex != n.pod.ifindex))
        .collect()
}

/// The interfaces of `desc` a watch should attach now: eligible (or named
/// in `cp.only`, for a kind attached only by name), not in `cp`'s plan,
/// among `cp.only` when attach was limited, and not refused before under
/// the same name (`refused`: ifindex to name).
pub fn arrived<'a>(
    cp: &Checkpoint,
    desc: &'a Description,
    refused: &BTreeMap<u32, String>,
) -> Vec<&'a Interface> {
    desc.interfaces
        .iter()
        .filter(|i| i.eligible || (i.named_only && cp.only.is_some()))
        .filter(|i| cp.plan.nics.iter().all(|n| n.pod.ifindex != i.ifindex))
        .filter(|i| cp.only.as_ref().is_none_or(|only| only.contains(&i.name)))
        .filter(|i| refused.get(&i.ifindex) != Some(&i.name))
        .collect()
}

/// Bring `cp` (a finished attachment, loaded under the id and netns locks)
/// up to date with the netns `nl` talks to, saving the checkpoint as it goes.
/// `foreign`: ifindexes of other attachments' links in the netns.
pub fn reconcile(
    ns: &NetNs,
    nl: &Netlink,
    state: &StateDir,
    cp: &mut Checkpoint,
    refused: &BTreeMap<u32, String>,
    foreign: &BTreeSet<u32>,
) -> Result<Vec<Change>> {
    let mut survey = survey(ns, nl)?;
    // Links left out of the description: those undone in this round (in the
    // survey still, but gone now) and other attachments' TAPs and bridges
    // (`foreign`: their state flips as a VMM opens them).
    let mut undone = foreign.clone();
    let mut changes = remove_gone(nl, state, cp, &survey.desc, &mut undone)?;

    for iface in arrived(cp, &survey.desc, refused) {
        match add_one(ns, nl, state, cp, &survey, iface) {
            Ok(nic) => changes.push(Change::Added(nic)),
            Err(e) => changes.push(Change::Refused {
                interface: iface.name.clone(),
                ifindex: iface.ifindex,
                why: e.to_string(),
            }),
        }
    }

    changes.extend(super::l3::repair(nl, &cp.plan, &cp.created)?);
    leave_out(&mut survey.desc, &undone);
    if let Stage::Complete(Some(prev)) = &cp.stage {
        let (next, digest) =
            describe::revised(prev, cp.tables_digest, survey.desc, &cp.plan, &cp.created);
        if next != *prev || cp.tables_digest != Some(digest) {
            let differ = differing(prev, &next);
            cp.stage = Stage::Complete(Some(next));
            cp.tables_digest = Some(digest);
            state.save(cp)?;
            if !changes
                .iter()
                .any(|c| matches!(c, Change::Added(_) | Change::Removed(_)))
            {
                changes.push(Change::Revised(differ));
            }
        }
    }
    Ok(changes)
}

/// Undo the NICs of `cp` whose pod interface is gone from `desc`, and drop
/// them from the checkpoint; their links' ifindexes go into `undone`.
fn remove_gone(
    nl: &Netlink,
    state: &StateDir,
    cp: &mut Checkpoint,
    desc: &Description,
    undone: &mut BTreeSet<u32>,
) -> Result<Vec<Change>> {
    let removed: BTreeSet<u32> = gone(&cp.plan, desc).iter().map(|n| n.pod.ifindex).collect();
    if removed.is_empty() {
        return Ok(Vec::new());
    }
    let (sub, created) = split_off(cp, |n| removed.contains(&n.pod.ifindex));
    undone.extend(created.iter().map(|c| c.ifindex));
    // The pod interface is gone (and with it its filters, or the
    // macvtap on it); what is left is the TAP or the bridge.
    let report = teardown::undo_part(nl, &sub, &created, Proof::Recorded);
    remove_nodes(&sub);
    for w in &report.warnings {
        tracing::info!("watch: {w}");
    }
    if let Err(e) = report.into_result() {
        // Keep them recorded, so detach can retry.
        cp.plan.nics.extend(sub.nics);
        cp.created.extend(created);
        return Err(e);
    }
    state.save(cp)?;
    if sub.nics.iter().any(|n| n.l3.is_some()) {
        super::l3::install_table(nl, &cp.plan)?;
    }
    Ok(sub.nics.into_iter().map(Change::Removed).collect())
}

/// Leave the links in `undone` out of `desc` (a [`crate::scan::pod_view`],
/// which already left out their routes and neighbours: they are podtap's).
fn leave_out(desc: &mut Description, undone: &BTreeSet<u32>) {
    desc.interfaces.retain(|i| !undone.contains(&i.ifindex));
}

/// Plan, record and build one late interface; on failure undo what was made
/// and drop it from the checkpoint again.
fn add_one(
    ns: &NetNs,
    nl: &Netlink,
    state: &StateDir,
    cp: &mut Checkpoint,
    survey: &super::Survey,
    iface: &Interface,
) -> Result<NicPlan> {
    let nic = plan::plan_late(&survey.desc, &survey.inventory, &cp.plan, iface)?;
    let mut sub = Plan {
        id: cp.plan.id.clone(),
        mode: cp.plan.mode,
        group: cp.plan.group,
        nics: vec![nic],
        taps: None,
        tc_redirect: cp.plan.tc_redirect.clone(),
        l3: cp.plan.l3.clone(),
    };
    // A routed NIC records what it changes before anything does; the
    // netns part stays the attachment's (or is this NIC's, the first).
    super::l3::prepare(nl, &mut sub)?;
    match &cp.plan.l3 {
        Some(netns) => sub.l3 = Some(netns.clone()),
        None => cp.plan.l3 = sub.l3.clone(),
    }
    let nic = sub.nics[0].clone();
    // Intent first: a crash from here on leaves a NIC detach can undo by name.
    cp.plan.nics.push(nic.clone());
    cp.pending.push(nic.tap.name.clone());
    state.save(cp)?;

    let mut created = Vec::new();
    let built = build::build(ns, nl, &sub, &mut Timings::default(), &mut created, None);
    let done = |cp: &mut Checkpoint| cp.pending.retain(|t| *t != nic.tap.name);
    if let Err(e) = built {
        // Also by planned name: a link made but not yet read back (a bridge
        // whose lookup failed) is not in `created`.
        let report = teardown::undo_part(nl, &sub, &created, Proof::RecordedDead);
        remove_nodes(&sub);
        if let Err(undo) = report.into_result() {
            // Keep it recorded and pending: the next watch or detach undoes it.
            tracing::warn!(
                "watch: could not undo the failed attach of {}: {undo}",
                iface.name
            );
            cp.created.extend(created);
            state.save(cp)?;
            return Err(e);
        }
        cp.plan.nics.retain(|n| n.tap.name != nic.tap.name);
        done(cp);
        state.save(cp)?;
        return Err(e);
    }
    cp.created.extend(created);
    cp.late.push(nic.tap.name.clone());
    done(cp);
    state.save(cp)?;
    if nic.l3.is_some() {
        // The table guards every routed TAP of the attachment.
        super::l3::install_table(nl, &cp.plan)?;
    }
    Ok(nic)
}

/// Take the NICs `pick` chooses (and the links recorded for them) out of
/// `cp`, as a plan of their own.
fn split_off(cp: &mut Checkpoint, pick: impl Fn(&NicPlan) -> bool) -> (Plan, Vec<Created>) {
    let (taken, kept): (Vec<NicPlan>, Vec<NicPlan>) = std::mem::take(&mut cp.plan.nics)
        .into_iter()
        .partition(|n| pick(n));
    cp.plan.nics = kept;
    let names: BTreeSet<&str> = taken
        .iter()
        .flat_map(|n| {
            std::iter::once(n.tap.name.as_str()).chain(n.bridge.as_ref().map(|b| b.name.as_str()))
        })
        .collect();
    let (created, left): (Vec<Created>, Vec<Created>) = std::mem::take(&mut cp.created)
        .into_iter()
        .partition(|c| names.contains(c.name.as_str()));
    cp.created = left;
    cp.late.retain(|t| !names.contains(t.as_str()));
    cp.pending.retain(|t| !names.contains(t.as_str()));
    let sub = Plan {
        id: cp.plan.id.clone(),
        mode: cp.plan.mode,
        group: cp.plan.group,
        nics: taken,
        taps: None,
        tc_redirect: cp.plan.tc_redirect.clone(),
        l3: cp.plan.l3.clone(),
    };
    (sub, created)
}

/// Remove the macvtap device nodes of `plan`'s NICs (they live in the host's /dev).
fn remove_nodes(plan: &Plan) {
    for m in plan.nics.iter().filter_map(|n| n.macvtap.as_ref()) {
        let path = Path::new(&m.device);
        if crate::kernel::macvtap::is_node(path) {
            if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!("watch: could not remove {}: {e}", path.display());
            }
        }
    }
}

/// Names of the interfaces whose entries differ between two descriptions
/// (added, removed or changed); empty when only routes, neighbours or rules did.
fn differing(prev: &Description, next: &Description) -> Vec<String> {
    let mut names = BTreeSet::new();
    for i in &next.interfaces {
        if prev.interfaces.iter().all(|p| p != i) {
            names.insert(i.name.clone());
        }
    }
    for p in &prev.interfaces {
        if next.interfaces.iter().all(|i| i.ifindex != p.ifindex) {
            names.insert(p.name.clone());
        }
    }
    names.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::samples;

    fn checkpoint(desc: &Description) -> Checkpoint {
        let id: crate::id::SandboxId = "pod-1".parse().unwrap();
        let plan = plan::plan(
            desc,
            &plan::Inventory::default(),
            &plan::AttachOptions {
                interfaces: Some(vec!["eth0".into()]),
                ..Default::default()
            },
            &id,
        )
        .unwrap();
        Checkpoint {
            version: crate::state::VERSION,
            id,
            netns: desc.netns.clone(),
            netns_cookie: None,
            stage: Stage::Complete(Some(desc.clone())),
            tables_digest: None,
            plan,
            created: vec![],
            only: None,
            late: vec![],
            adopted: vec![],
            pending: vec![],
        }
    }

    #[test]
    fn a_new_eligible_interface_arrives_once_and_a_refused_one_stays_out() {
        let desc = samples::pod();
        let mut cp = checkpoint(&desc);
        let names = |v: Vec<&Interface>| v.iter().map(|i| i.name.clone()).collect::<Vec<_>>();
        let eligible_others: Vec<String> = desc
            .interfaces
            .iter()
            .filter(|i| i.eligible && i.name != "eth0")
            .map(|i| i.name.clone())
            .collect();
        assert!(
            !eligible_others.is_empty(),
            "the fixture has more than one NIC"
        );
        assert_eq!(
            names(arrived(&cp, &desc, &BTreeMap::new())),
            eligible_others
        );

        let first = desc.interface(&eligible_others[0]).unwrap();
        let refused = BTreeMap::from([(first.ifindex, first.name.clone())]);
        assert!(!names(arrived(&cp, &desc, &refused)).contains(&first.name));

        // Renamed: tried again.
        let mut renamed = desc.clone();
        samples::interface_mut(&mut renamed, &first.name.clone()).name = "net7".into();
        assert!(names(arrived(&cp, &renamed, &refused)).contains(&"net7".to_string()));

        // An attach limited to some interfaces: watch wires only those.
        cp.only = Some(vec!["eth0".into()]);
        assert!(arrived(&cp, &desc, &BTreeMap::new()).is_empty());
    }

    #[test]
    fn a_nic_whose_pod_interface_left_is_gone() {
        let desc = samples::pod();
        let cp = checkpoint(&desc);
        assert!(gone(&cp.plan, &desc).is_empty());
        let mut without = desc.clone();
        without.interfaces.retain(|i| i.name != "eth0");
        let g = gone(&cp.plan, &without);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].pod.name, "eth0");
    }

    #[test]
    fn split_off_takes_the_nic_its_links_and_its_late_entry() {
        let desc = samples::pod();
        let mut cp = checkpoint(&desc);
        let tap = cp.plan.nics[0].tap.name.clone();
        cp.created = vec![
            Created {
                name: tap.clone(),
                ifindex: 40,
                kind: crate::state::CreatedKind::Tap,
                mac: None,
            },
            Created {
                name: "tap_other".into(),
                ifindex: 41,
                kind: crate::state::CreatedKind::Tap,
                mac: None,
            },
        ];
        cp.late = vec![tap.clone()];
        let (sub, created) = split_off(&mut cp, |n| n.tap.name == tap);
        assert_eq!(sub.nics.len(), 1);
        assert_eq!(sub.group, cp.plan.group);
        assert_eq!(created.len(), 1);
        assert_eq!(created[0].ifindex, 40);
        assert!(cp.plan.nics.is_empty());
        assert_eq!(cp.created.len(), 1);
        assert!(cp.late.is_empty());
    }
}
