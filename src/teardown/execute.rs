//! The thin executor of teardown: read what the kernel holds, carry out the
//! decided actions, collect what went wrong.

use std::collections::BTreeSet;

use futures::future::join_all;

use super::decide::{Action, Observed, Undo};
use crate::error::{Error, Result};
use crate::kernel::mac::MacAddr;
use crate::kernel::netlink::{is_gone, Netlink};
use crate::kernel::{bridge, links, replay, tc, unlist};

/// What teardown did not do cleanly.
#[derive(Debug, Default)]
pub struct UndoReport {
    /// Things already gone or left alone on purpose.
    pub warnings: Vec<String>,
    /// Real failures: the checkpoint is kept so detach can be retried.
    pub errors: Vec<Error>,
}

impl UndoReport {
    /// Warnings on success; otherwise the first error, keeping its exit code,
    /// with a count of the others.
    pub fn into_result(self) -> Result<Vec<String>> {
        Error::first_of(self.errors).map_or(Ok(self.warnings), Err)
    }
}

/// Every link, and the ingress filters of the links `with_filters` picks.
pub async fn observe(
    nl: &Netlink,
    with_filters: impl Fn(&links::LinkState) -> bool,
) -> Result<Observed> {
    let links = links::list(&nl.batch).map_err(|e| nl.err("dump links", "", e))?;
    let mut now = Observed {
        links,
        ..Observed::default()
    };
    let wanted: Vec<(u32, String)> = now
        .links
        .values()
        .filter(|l| with_filters(l))
        .map(|l| (l.ifindex, l.name.clone()))
        .collect();
    let indexes: Vec<u32> = wanted.iter().map(|(i, _)| *i).collect();
    let dumped = tc::filters_of(&nl.batch, &indexes);
    for ((idx, name), filters) in wanted.iter().zip(dumped) {
        let filters = filters.map_err(|e| nl.err("dump tc filters", name, e))?;
        now.filters.insert(*idx, filters);
    }
    Ok(now)
}

/// The permanent neighbours of the netns, as `(ifindex, ip, lladdr)`.
pub async fn permanent_neighbours(nl: &Netlink) -> Result<Vec<(u32, String, String)>> {
    use futures::TryStreamExt;
    use rtnetlink::packet_route::neighbour::{
        NeighbourAddress, NeighbourAttribute, NeighbourState,
    };
    let msgs: Vec<_> = nl
        .handle
        .neighbours()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| nl.err("dump neighbours", "", e))?;
    Ok(msgs
        .into_iter()
        .filter(|n| n.header.state == NeighbourState::Permanent)
        .filter_map(|n| {
            let ip = n.attributes.iter().find_map(|a| match a {
                NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => Some(v4.to_string()),
                NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                    Some(v6.to_string())
                }
                _ => None,
            })?;
            let mac = n.attributes.iter().find_map(|a| match a {
                NeighbourAttribute::LinkLayerAddress(b) => {
                    MacAddr::from_bytes(b).map(|m| m.to_string())
                }
                _ => None,
            })?;
            Some((n.header.ifindex, ip, mac))
        })
        .collect())
}

/// Carry out `undo`: each interface's pod side in order (interfaces side by
/// side), then the links. With `announce`, each change made becomes a
/// warning ("removed ..."), for cleanups the user should hear about.
pub async fn execute(nl: &Netlink, undo: Undo, announce: bool) -> UndoReport {
    let mut report = UndoReport {
        warnings: undo.warnings,
        errors: Vec::new(),
    };
    let sides = join_all(undo.pod_side.iter().map(|steps| async move {
        let mut out = Vec::new();
        for step in steps {
            out.push((step, run(nl, step).await));
        }
        out
    }))
    .await;
    let mut outcomes: Vec<(&Action, Result<()>)> = sides.into_iter().flatten().collect();
    let (ungroup, deletes): (Vec<&Action>, Vec<&Action>) = undo
        .links
        .iter()
        .partition(|a| matches!(a, Action::LeaveGroup { .. }));
    let left = join_all(
        ungroup
            .iter()
            .map(|a| async move { (*a, run(nl, a).await) }),
    )
    .await;
    outcomes.extend(left);
    outcomes.extend(unlist_links(nl, &deletes));
    for (action, outcome) in outcomes {
        match outcome {
            Ok(()) if announce => report.warnings.push(format!("removed {action}")),
            Ok(()) => {}
            Err(e) if matches!(action, Action::Restore { .. }) => report
                .warnings
                .push(format!("could not put back {action}: {e}")),
            // The group deletion then takes the bridge too: slower, still undone.
            Err(e) if matches!(action, Action::LeaveGroup { .. }) => report
                .warnings
                .push(format!("could not move {action}: {e}")),
            Err(e) => report.errors.push(e),
        }
    }
    report
}

/// Delete podtap's links in order, and return once the kernel has unlisted
/// every one but the bridges: the rest of the kernel's work (an
/// rcu_barrier() and the wait for the last references) finishes in a child,
/// out of the caller's way (see `kernel::unlist`).
///
/// Bridges come last and are not waited for. Every bridge deletion holds
/// RTNL for one rcu_barrier() (`br_multicast_dev_del`, 15-35 ms here), so
/// they are deleted one request each, and waiting for N of them would be N
/// barriers. By the time they are deleted their ports are gone (the pod
/// interface was released, the TAP unlisted): they are inert, and the child
/// deletes them within N barriers of teardown returning.
fn unlist_links<'a>(nl: &Netlink, links: &[&'a Action]) -> Vec<(&'a Action, Result<()>)> {
    let mut deletes = Vec::new();
    let mut expect = BTreeSet::new();
    let mut actions = Vec::new();
    for &a in links {
        match a {
            Action::DeleteGroup { group, members } => {
                deletes.push(unlist::Delete::Group(*group));
                expect.extend(members.iter().copied());
            }
            Action::DeleteLink { ifindex, kind, .. } if kind == "bridge" => {
                deletes.push(unlist::Delete::Drained(*ifindex));
            }
            Action::DeleteLink { ifindex, .. } => {
                deletes.push(unlist::Delete::Link(*ifindex));
                expect.insert(*ifindex);
            }
            // Only link deletions come here (see `decide::Undo::links`).
            _ => continue,
        }
        actions.push(a);
    }
    match unlist::delete(&nl.worker, &deletes, &expect) {
        Ok(results) => actions
            .into_iter()
            .zip(results)
            .map(|(a, r)| {
                let outcome = match r {
                    Ok(()) => Ok(()),
                    Err(e) if is_gone(&e.into()) => Ok(()),
                    Err(e) => Err(nl.err("delete", a.to_string(), e)),
                };
                (a, outcome)
            })
            .collect(),
        Err(e) => {
            let errno = crate::kernel::netlink::errno(&e);
            actions
                .into_iter()
                .map(|a| (a, Err(nl.err("delete", a.to_string(), errno))))
                .collect()
        }
    }
}

/// One action. Deleting what is already gone counts as done.
async fn run(nl: &Netlink, action: &Action) -> Result<()> {
    let h = &nl.handle;
    let (op, on, outcome, deletes) = match action {
        Action::DeleteFilter {
            ifindex,
            name,
            prio,
        } => (
            "delete tc filter",
            name.clone(),
            tc::del_filter(h, *ifindex, *prio).await,
            true,
        ),
        Action::DeleteIngressQdisc { ifindex, name } => (
            "delete ingress qdisc",
            name.clone(),
            tc::del_ingress_qdisc(h, *ifindex).await,
            true,
        ),
        Action::SetTxqlen {
            ifindex,
            name,
            txqlen,
        } => (
            "restore txqueuelen",
            name.clone(),
            links::set_txqlen(h, *ifindex, *txqlen).await,
            false,
        ),
        Action::ReleaseFromBridge { ifindex, name, mac } => (
            "release pod interface from bridge",
            name.clone(),
            bridge::release(h, *ifindex, *mac).await,
            false,
        ),
        Action::Restore { name, record, .. } => (
            "restore permanent neighbour",
            name.clone(),
            replay::restore(h, record).await,
            false,
        ),
        Action::LeaveGroup { ifindex, name } => (
            "move bridge out of its link group",
            name.clone(),
            links::set_group(h, *ifindex, 0).await,
            true,
        ),
        Action::DeleteGroup { group, .. } => (
            "delete link group",
            group.to_string(),
            links::delete_group(h, *group).await,
            true,
        ),
        Action::DeleteLink { ifindex, name, .. } => (
            "delete link",
            name.clone(),
            links::delete(h, *ifindex).await,
            true,
        ),
    };
    match outcome {
        Ok(()) => Ok(()),
        Err(e) if deletes && is_gone(&e) => Ok(()),
        Err(e) => Err(nl.err(op, on, e)),
    }
}
