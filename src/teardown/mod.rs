//! Teardown: the one way podtap undoes what it built, for detach, rollback,
//! crash recovery, `detach --force`, CNI DEL/GC and OCI poststop, and the
//! one way `check` finds what is missing.
//!
//! [`decide`] holds the decisions as pure functions of what the kernel holds
//! now; [`execute`] reads the kernel and carries them out. Anything already
//! gone is a warning, not an error, so teardown never blocks pod deletion.

pub mod actions;
pub mod decide;
#[cfg(test)]
mod decide_tests;
pub mod execute;
pub mod l3;
pub mod l3_decide;
mod link_identity;
pub mod markers;
#[cfg(test)]
mod markers_tests;
pub mod missing;
mod restore;
#[cfg(test)]
mod restore_tests;
#[cfg(test)]
mod test_states;

pub use decide::{Proof, Scope};
pub use execute::UndoReport;

use std::path::Path;

use crate::error::{Error, Result};
use crate::id::SandboxId;
use crate::kernel::netlink::Netlink;
use crate::kernel::netns::{is_host_identity, NetNs};
use crate::kernel::netns_search;
use crate::kernel::unlist;
use crate::plan::Plan;
use crate::state::{Checkpoint, Created};

/// Undo everything `plan` may have built in the netns `nl` talks to, touching
/// only what `proof` shows is ours.
pub fn undo_recorded(nl: &Netlink, plan: &Plan, created: &[Created], proof: Proof) -> UndoReport {
    undo_in(nl, plan, created, proof, Scope::Whole, None)
}

/// [`undo_recorded`], with podtap's links deleted only once one of the
/// pod's own interfaces is (the next plugin of a CNI chain deletes it), by
/// a child process that keeps the attach lock on the netns until then:
/// `netns_lock` is the fd of the netns it is held on
/// ([`crate::kernel::netns_lock::NetnsLock::hand_over`]). What is undone
/// on the pod's interfaces (filters, qdiscs) is undone before this returns.
pub fn undo_recorded_after_pod(
    nl: &Netlink,
    plan: &Plan,
    created: &[Created],
    proof: Proof,
    (netns_lock, after): (std::os::fd::RawFd, unlist::AfterPodLinks),
) -> UndoReport {
    undo_in(
        nl,
        plan,
        created,
        proof,
        Scope::Whole,
        Some((netns_lock, after)),
    )
}

/// [`undo_recorded`] for some NICs of a live attachment (`podtap watch`):
/// the other NICs' links share the link group, so it proves nothing.
pub fn undo_part(nl: &Netlink, plan: &Plan, created: &[Created], proof: Proof) -> UndoReport {
    undo_in(nl, plan, created, proof, Scope::Part, None)
}

fn undo_in(
    nl: &Netlink,
    plan: &Plan,
    created: &[Created],
    proof: Proof,
    scope: Scope,
    deferred: Option<(std::os::fd::RawFd, unlist::AfterPodLinks)>,
) -> UndoReport {
    let tc_pods: Vec<u32> = plan
        .nics
        .iter()
        .filter(|n| n.tc.is_some())
        .map(|n| n.pod.ifindex)
        .collect();
    // The netns thread opens the deletion's sockets while this one reads.
    let prepared = unlist::Prepared::start(&nl.worker);
    match execute::observe(nl, |l| tc_pods.contains(&l.ifindex)) {
        Ok(now) => {
            let undo = decide::undo_in(plan, created, &now, proof, scope);
            // Deferred, the child waits for a pod interface that is still
            // there; with none left, it need not wait at all.
            let when = match deferred {
                Some((netns_lock, after)) => unlist::When::AfterPodLinks {
                    pod_links: plan
                        .nics
                        .iter()
                        .map(|n| n.pod.ifindex)
                        .filter(|i| now.links.contains_key(i))
                        .collect(),
                    netns_lock,
                    after,
                },
                None => unlist::When::Now,
            };
            let routed = undo_routed(nl, plan, &now, scope);
            let mut report = execute::execute(nl, undo, false, prepared, when);
            report.warnings.extend(routed.warnings);
            report.errors.extend(routed.errors);
            report
        }
        Err(e) => UndoReport {
            warnings: Vec::new(),
            errors: vec![e],
        },
    }
}

/// Undo the routed wiring of `plan`'s NICs whose pod interface is still
/// there, before their TAPs go (what is on a TAP goes with it); with the
/// whole attachment, its nftables table and, when it was the netns's last
/// routed attachment, the netns's `proxy_ndp`.
fn undo_routed(nl: &Netlink, plan: &Plan, now: &decide::Observed, scope: Scope) -> UndoReport {
    let nics: Vec<&crate::plan::NicPlan> = plan
        .nics
        .iter()
        .filter(|n| n.l3.is_some() && now.links.contains_key(&n.pod.ifindex))
        .collect();
    let whole = scope == Scope::Whole;
    let mut report = UndoReport::default();
    if nics.is_empty() && !(whole && plan.l3.is_some()) {
        return report;
    }
    let l3_now = match l3::observe(nl) {
        Ok(n) => n,
        Err(e) => {
            report.errors.push(e);
            return report;
        }
    };
    let steps = l3_decide::undo(plan, &nics, &l3_now, whole);
    report.errors = l3::execute(nl, steps, &mut report.warnings);
    if let Some(value) = whole
        .then(|| l3_decide::proxy_ndp_back(plan, &l3_now.tables))
        .flatten()
    {
        if let Err(e) = l3::restore_proxy_ndp(nl, value) {
            report.errors.push(e);
        }
    }
    report
}

/// Without a checkpoint: undo what podtap's markers for `id` show (`detach --force`).
pub fn undo_by_markers(nl: &Netlink, id: &SandboxId) -> Result<UndoReport> {
    // Filters sit on the pod interfaces, which carry no marker: read them all,
    // except on podtap's own TAPs and bridges (their filters go with them).
    let prepared = unlist::Prepared::start(&nl.worker);
    let now = execute::observe(nl, |l| !l.is_podtap_kind())?;
    let undo = markers::undo_by_markers(id, &now);
    Ok(execute::execute(
        nl,
        undo,
        true,
        prepared,
        unlist::When::Now,
    ))
}

/// What is not as `plan` recorded it, per NIC (in `plan.nics` order), with
/// what was observed; every `problems` empty when all is well.
pub fn missing_per_nic(
    nl: &Netlink,
    plan: &Plan,
    created: &[Created],
) -> Result<(decide::Observed, Vec<missing::NicProblems>)> {
    let wired: Vec<u32> = plan
        .nics
        .iter()
        .filter(|n| n.tc.is_some() || n.serve)
        .flat_map(|n| {
            std::iter::once(n.pod.ifindex)
                .chain(crate::state::created_ifindex(created, &n.tap.name))
        })
        .collect();
    let mut now = execute::observe(nl, |l| wired.contains(&l.ifindex))?;
    if plan.nics.iter().any(|n| !n.pod.neighbours.is_empty()) {
        now.neighbours = execute::permanent_neighbours(nl)?;
    }
    let mut per_nic = missing::per_nic(plan, created, &now);
    for (nic, found) in plan.nics.iter().zip(per_nic.iter_mut()) {
        let Some(m) = &nic.macvtap else { continue };
        if !crate::kernel::macvtap::is_node(Path::new(&m.device)) {
            found.drifted.push(format!(
                "macvtap device node {} is missing (or not a character device)",
                m.device
            ));
        }
    }
    if plan.nics.iter().any(|n| n.l3.is_some()) {
        l3::drift_into(nl, plan, created, &now, &mut per_nic)?;
    }
    Ok((now, per_nic))
}

/// Open the netns a checkpoint recorded, found by identity (`Ok(Ok(ns))`),
/// or say why there is nothing to undo because it is gone (`Ok(Err(why))`).
///
/// The recorded path comes first; when it is dead or names another netns
/// now, the caller's `hints` (CNI_NETNS, the hook's path, `--netns`) and then
/// everything that can hold a netns are searched for the recorded
/// identity (cookie included). A path that names the same `(dev, inode)`
/// with another cookie is a newer netns; the caller compares the cookie on
/// its connection before it acts. A checkpoint that names the host's netns is corrupt: podtap
/// never records it. Any other failure (permission, fd limit, ...) is an
/// error and the checkpoint stays, since podtap's objects may still be there.
pub fn open_recorded<D>(
    cp: &Checkpoint<D>,
    file: &Path,
    hints: &[&Path],
) -> Result<std::result::Result<NetNs, String>> {
    let identity = (cp.netns.dev, cp.netns.inode);
    if is_host_identity(identity)? {
        return Err(Error::CorruptState {
            path: file.into(),
            id: cp.id.to_string(),
            why: "it names the host's own netns, which podtap never attaches to".into(),
        });
    }
    let path = Path::new(&cp.netns.path);
    let replaced = match NetNs::open(path, false) {
        Ok(ns) if ns.identity() == identity => return Ok(Ok(ns)),
        Ok(ns) => Some(ns.inode()),
        Err(Error::NetnsMissing { .. } | Error::NotNetns { .. } | Error::HostNetns { .. }) => None,
        Err(e) => return Err(e),
    };
    if let Some(ns) = netns_search::find(&cp.netns_id(), hints) {
        tracing::info!(
            "netns {} is no longer reachable there; found it at {}",
            cp.netns.path,
            ns.display()
        );
        return Ok(Ok(ns));
    }
    Ok(Err(match replaced {
        Some(inode) => format!(
            "netns {} is now a different namespace (inode {inode} != recorded {}) and the recorded one is gone; left it untouched",
            cp.netns.path, cp.netns.inode
        ),
        None => format!(
            "netns {} is gone; its virtual links went with it",
            cp.netns.path
        ),
    }))
}
