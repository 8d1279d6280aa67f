//! Undo a plan: the one teardown path for detach, rollback and crash recovery.
//!
//! Objects are found by ifindex and link group, never by a name the pod could
//! have changed; names are only a fallback for a TAP made just before a crash,
//! before podtap could group it. Anything already gone is a warning, not an
//! error, so teardown never blocks pod deletion.

use std::collections::BTreeSet;

use futures::future::join_all;

use crate::error::{Error, Result};
use crate::kernel::links::{self, LinkState};
use crate::kernel::netlink::is_gone;
use crate::kernel::{bridge, tc};
use crate::plan::{NicPlan, Plan};
use crate::scan::Netlink;
use crate::state::Created;

/// What teardown did not do cleanly.
#[derive(Debug, Default)]
pub struct UndoReport {
    /// Things already gone or left alone on purpose.
    pub warnings: Vec<String>,
    /// Real failures: the checkpoint is kept so detach can be retried.
    pub errors: Vec<Error>,
}

impl UndoReport {
    /// Warnings on success; the first error (with a count of the rest) otherwise.
    pub fn into_result(self, id: &str) -> Result<Vec<String>> {
        let mut errors = self.errors.into_iter();
        match errors.next() {
            None => Ok(self.warnings),
            Some(first) => {
                let rest = errors.count();
                if rest == 0 {
                    Err(first)
                } else {
                    Err(Error::Invalid(format!(
                        "sandbox {id}: teardown failed: {first} (and {rest} more)"
                    )))
                }
            }
        }
    }
}

/// Undo everything `plan` may have built in the netns `nl` talks to.
///
/// Links are podtap's when their ifindex is in `created` or they are in the
/// plan's group. `match_names` also takes a TAP or bridge with a planned name:
/// only for an attach that died before it could record or group what it made.
pub async fn undo(nl: &Netlink, plan: &Plan, created: &[Created], match_names: bool) -> UndoReport {
    let mut report = UndoReport::default();
    let live = match links::list(&nl.handle).await {
        Ok(l) => l,
        Err(e) => {
            report.errors.push(nl.err("dump links", "", e));
            return report;
        }
    };

    let pod_results = join_all(
        plan.nics
            .iter()
            .map(|nic| restore_pod_side(nl, nic, live.get(&nic.pod.ifindex))),
    )
    .await;
    for r in pod_results {
        report.warnings.extend(r.warnings);
        report.errors.extend(r.errors);
    }

    let ours = our_links(plan, created, live.values(), match_names);
    for c in created {
        if !live.contains_key(&c.ifindex) {
            report.warnings.push(format!(
                "{} {} (ifindex {}) was already gone",
                c.kind, c.name, c.ifindex
            ));
        }
    }
    if let Err(e) = delete_links(nl, plan.group, &ours, live.values()).await {
        report.errors.push(e);
    }
    report
}

/// Remove podtap's filter (and its qdisc if podtap made it), or unbridge and restore the MAC.
async fn restore_pod_side(nl: &Netlink, nic: &NicPlan, live: Option<&LinkState>) -> UndoReport {
    let mut report = UndoReport::default();
    let pod = &nic.pod;
    let Some(live) = live else {
        report.warnings.push(format!(
            "pod interface {} (ifindex {}) is gone",
            pod.name, pod.ifindex
        ));
        return report;
    };
    let h = &nl.handle;
    if let Some(tcp) = &nic.tc {
        match tc::del_filter(h, pod.ifindex, tcp.prio).await {
            Ok(()) => {}
            Err(e) if is_gone(&e) => {}
            Err(e) => report
                .errors
                .push(nl.err("delete tc filter", &live.name, e)),
        }
        if tcp.create_pod_qdisc {
            match tc::filters(h, pod.ifindex).await {
                Ok(rest) if rest.is_empty() => match tc::del_ingress_qdisc(h, pod.ifindex).await {
                    Ok(()) => {}
                    Err(e) if is_gone(&e) => {}
                    Err(e) => report
                        .errors
                        .push(nl.err("delete ingress qdisc", &live.name, e)),
                },
                Ok(rest) => report.warnings.push(format!(
                    "kept the ingress qdisc on {}: it now holds {} filter(s) that are not podtap's",
                    live.name,
                    rest.len()
                )),
                Err(e) => report.errors.push(nl.err("dump tc filters", &live.name, e)),
            }
        }
    }
    // Adding an ingress qdisc to a link with txqueuelen 0 (as CNI plugins make
    // veths) makes the kernel raise it to 1000, and deleting the qdisc does not
    // lower it again: put the recorded value back.
    if let Some(q) = pod.txqlen.filter(|q| live.txqlen != Some(*q)) {
        if let Err(e) = links::set_txqlen(h, pod.ifindex, q).await {
            report
                .errors
                .push(nl.err("restore txqueuelen", &live.name, e));
        }
    }
    if nic.bridge.is_some() {
        let bridged = live.controller.is_some() || live.mac.as_deref() != Some(pod.mac.as_str());
        if bridged {
            if let Err(e) = bridge::release_pod(h, pod.ifindex, &pod.mac).await {
                report
                    .errors
                    .push(nl.err("release pod interface from bridge", &live.name, e));
            }
        }
    }
    report
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
    let marker = links::marker(&plan.id);
    let unclaimed = |l: &LinkState| {
        (l.group == 0 || l.group == plan.group)
            && l.alias
                .as_deref()
                .is_none_or(|a| a.split(' ').next() == Some(marker.as_str()))
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
    live.filter(|l| links::is_tap_or_bridge(l.kind.as_deref()) && !pods.contains(&l.ifindex))
        .filter(|l| {
            recorded.contains(&l.ifindex)
                || l.group == plan.group
                || (match_names && planned.contains(l.name.as_str()) && unclaimed(l))
        })
        .collect()
}

/// Delete `ours`: one group deletion when the group holds exactly them, else one by one.
async fn delete_links<'a>(
    nl: &Netlink,
    group: u32,
    ours: &[&LinkState],
    live: impl Iterator<Item = &'a LinkState>,
) -> Result<()> {
    if ours.is_empty() {
        return Ok(());
    }
    let ours_idx: BTreeSet<u32> = ours.iter().map(|l| l.ifindex).collect();
    let foreign_in_group = live
        .filter(|l| l.group == group && !ours_idx.contains(&l.ifindex))
        .count();
    let mut singles: Vec<&LinkState> = ours.to_vec();
    if foreign_in_group == 0 && ours.iter().any(|l| l.group == group) {
        // Each RTM_DELLINK waits for an RCU grace period; a group deletion waits once for all.
        match links::delete_group(&nl.handle, group).await {
            Ok(()) => singles.retain(|l| l.group != group),
            Err(e) if is_gone(&e) => singles.retain(|l| l.group != group),
            Err(e) => return Err(nl.err("delete link group", group.to_string(), e)),
        }
    }
    let results = join_all(singles.iter().map(|l| async move {
        match links::delete(&nl.handle, l.ifindex).await {
            Ok(()) => Ok(()),
            Err(e) if is_gone(&e) => Ok(()),
            Err(e) => Err(nl.err("delete link", &l.name, e)),
        }
    }))
    .await;
    results.into_iter().collect::<Result<Vec<()>>>().map(|_| ())
}
