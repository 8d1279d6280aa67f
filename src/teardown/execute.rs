//! The thin executor of teardown: read what the kernel holds, carry out the
//! decided actions, collect what went wrong.

use std::collections::BTreeSet;

use super::decide::{Action, Observed, Undo};
use crate::error::{Error, KernelError, Result};
use crate::kernel::batch::Request;
use crate::kernel::errno::is_gone;
use crate::kernel::mac::MacAddr;
use crate::kernel::netlink::Netlink;
use crate::kernel::{bridge, links, replay, tc, unlist};

/// What teardown did not do cleanly.
#[derive(Debug, Default)]
pub struct UndoReport {
    /// Things already gone or left alone on purpose.
    pub(crate) warnings: Vec<String>,
    /// Real failures: the checkpoint is kept so detach can be retried.
    pub(crate) errors: Vec<Error>,
}

impl UndoReport {
    /// Warnings on success; otherwise the first error (the one to act on),
    /// with a count of the others.
    pub fn into_result(self) -> Result<Vec<String>> {
        Error::first_of(self.errors).map_or(Ok(self.warnings), Err)
    }
}

/// Every link, and the ingress filters of the links `with_filters` picks.
pub fn observe(nl: &Netlink, with_filters: impl Fn(&links::LinkState) -> bool) -> Result<Observed> {
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
pub fn permanent_neighbours(nl: &Netlink) -> Result<Vec<(u32, String, String)>> {
    use rtnetlink::packet_route::neighbour::{
        NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
    };
    use rtnetlink::packet_route::RouteNetlinkMessage;
    // On the batch socket: the one dump reader (whole datagrams, the
    // kernel's answers only, drained to its end).
    let dumped = nl
        .batch
        .dumps(&[RouteNetlinkMessage::GetNeighbour(
            NeighbourMessage::default(),
        )])
        .map_err(|e| {
            nl.err(
                "dump neighbours",
                "",
                crate::kernel::errno::kernel_error(&e),
            )
        })?;
    let msgs: Vec<NeighbourMessage> = match dumped.into_iter().next() {
        Some(Ok(msgs)) => msgs
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewNeighbour(n) => Some(n),
                _ => None,
            })
            .collect(),
        Some(Err(e)) => return Err(nl.err("dump neighbours", "", e)),
        None => Vec::new(),
    };
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
/// `prepared`: the deletion's sockets, opening on the netns thread
/// ([`unlist::Prepared`]); `when`: when the links go.
pub fn execute(
    nl: &Netlink,
    undo: Undo,
    announce: bool,
    prepared: Option<unlist::Prepared>,
    when: unlist::When,
) -> UndoReport {
    let mut report = UndoReport {
        warnings: undo.warnings,
        errors: Vec::new(),
    };
    let mut outcomes = pod_side(nl, &undo.pod_side);
    let (ungroup, deletes): (Vec<&Action>, Vec<&Action>) = undo
        .links
        .iter()
        .partition(|a| matches!(a, Action::LeaveGroup { .. }));
    outcomes.extend(ungroup.iter().map(|a| (*a, run(nl, a))));
    outcomes.extend(unlist_links(nl, &deletes, prepared, when));
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

/// The pod side of every interface. Where each step has a batch request
/// (tc mode), all of them go out as one batch, interface by interface in
/// order, as attach sent them; the rest (bridge mode) step by step.
fn pod_side<'a>(nl: &Netlink, sides: &'a [Vec<Action>]) -> Vec<(&'a Action, Result<()>)> {
    let (batched, stepped): (Vec<&Vec<Action>>, Vec<&Vec<Action>>) = sides
        .iter()
        .partition(|steps| steps.iter().all(|a| batch_request(a).is_some()));
    let batched: Vec<&Action> = batched.into_iter().flatten().collect();
    let mut out = run_batch(nl, &batched);
    out.extend(
        stepped
            .into_iter()
            .flatten()
            .map(|step| (step, run(nl, step))),
    );
    out
}

/// Send the batch requests of `actions` (every one has one) as one batch.
fn run_batch<'a>(nl: &Netlink, actions: &[&'a Action]) -> Vec<(&'a Action, Result<()>)> {
    let planned: Vec<(&Action, Request)> = actions
        .iter()
        .filter_map(|a| Some((*a, batch_request(a)?)))
        .collect();
    let requests: Vec<&Request> = planned.iter().map(|(_, r)| r).collect();
    match nl.batch.run(&requests) {
        Ok(results) => planned
            .iter()
            .zip(results)
            .map(|((a, _), r)| (*a, outcome(nl, a, r.map_err(KernelError::from))))
            .collect(),
        Err(e) => {
            let errno = crate::kernel::errno::of_io(&e);
            planned
                .iter()
                .map(|(a, _)| (*a, outcome(nl, a, Err(errno.into()))))
                .collect()
        }
    }
}

/// The batch request of a pod-side step, for the steps that have one.
fn batch_request(action: &Action) -> Option<Request> {
    let message = match action {
        Action::DeleteFilter { ifindex, prio, .. } => tc::del_filter(*ifindex, *prio),
        Action::DeleteIngressQdisc { ifindex, .. } => tc::del_ingress_qdisc(*ifindex),
        Action::SetTxqlen {
            ifindex, txqlen, ..
        } => links::set_txqlen(*ifindex, *txqlen),
        _ => return None,
    };
    Some(Request::change(message))
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
fn unlist_links<'a>(
    nl: &Netlink,
    links: &[&'a Action],
    prepared: Option<unlist::Prepared>,
    when: unlist::When,
) -> Vec<(&'a Action, Result<()>)> {
    let deferred = matches!(when, unlist::When::AfterPodLinks { .. });
    let mut deletes = Vec::new();
    let mut expect = BTreeSet::new();
    let mut actions = Vec::new();
    for &a in links {
        match a {
            // Deferred, the child deletes up to half a second later: by
            // ifindex, the links proved ours now, not whatever the link
            // group holds by then. (One barrier each, off the caller's way.)
            Action::DeleteGroup { members, .. } if deferred => {
                for m in members {
                    deletes.push(unlist::Delete::Link(*m));
                    actions.push(a);
                }
                continue;
            }
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
    match unlist::delete(&nl.worker, prepared, &deletes, &expect, when) {
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
            let errno = crate::kernel::errno::of_io(&e);
            actions
                .into_iter()
                .map(|a| (a, Err(nl.err("delete", a.to_string(), errno))))
                .collect()
        }
    }
}

/// One action through the connection (a step with a batch request goes
/// out as a batch of one).
fn run(nl: &Netlink, action: &Action) -> Result<()> {
    if batch_request(action).is_some() {
        return run_batch(nl, &[action])
            .pop()
            .map_or(Ok(()), |(_, outcome)| outcome);
    }
    let h = &nl.batch;
    let result = match action {
        Action::ReleaseFromBridge { ifindex, mac, .. } => bridge::release(h, *ifindex, *mac),
        Action::Restore { record, .. } => replay::restore(h, record),
        Action::LeaveGroup { ifindex, .. } => links::set_group(h, *ifindex, 0),
        Action::DeleteGroup { group, .. } => links::delete_group(h, *group),
        Action::DeleteLink { ifindex, .. } => links::delete(h, *ifindex),
        // They have batch requests.
        Action::DeleteFilter { .. }
        | Action::DeleteIngressQdisc { .. }
        | Action::SetTxqlen { .. } => Ok(()),
    };
    outcome(nl, action, result)
}

/// What `result` of `action` means. Deleting what is already gone counts as done.
fn outcome(
    nl: &Netlink,
    action: &Action,
    result: std::result::Result<(), KernelError>,
) -> Result<()> {
    let (op, on, deletes) = match action {
        Action::DeleteFilter { name, .. } => ("delete tc filter", name.clone(), true),
        Action::DeleteIngressQdisc { name, .. } => ("delete ingress qdisc", name.clone(), true),
        Action::SetTxqlen { name, .. } => ("restore txqueuelen", name.clone(), false),
        Action::ReleaseFromBridge { name, .. } => {
            ("release pod interface from bridge", name.clone(), false)
        }
        Action::Restore { name, .. } => ("restore permanent neighbour", name.clone(), false),
        Action::LeaveGroup { name, .. } => {
            ("move bridge out of its link group", name.clone(), true)
        }
        Action::DeleteGroup { group, .. } => ("delete link group", group.to_string(), true),
        Action::DeleteLink { name, .. } => ("delete link", name.clone(), true),
    };
    match result {
        Ok(()) => Ok(()),
        Err(e) if deletes && is_gone(&e) => Ok(()),
        Err(e) if absent_after_einval(nl, action, &e) => Ok(()),
        Err(e) => Err(nl.err(op, on, e)),
    }
}

/// Whether `e`, the answer to a filter or ingress qdisc deletion, is
/// EINVAL and the object is not there now. The kernel answers EINVAL when
/// a filter's parent qdisc is gone (`__tcf_qdisc_find`: "Parent Qdisc
/// doesn't exists": the filters went with it), and to the deletion of an
/// ingress qdisc that is gone (`tc_get_qdisc`: the hook then holds the noop
/// qdisc, handle 0, not the handle asked for: "Invalid handle"). But EINVAL
/// also means a request it refused, so only a fresh look says which.
fn absent_after_einval(nl: &Netlink, action: &Action, e: &KernelError) -> bool {
    if e.errno() != Some(nix::errno::Errno::EINVAL) {
        return false;
    }
    match action {
        Action::DeleteFilter { ifindex, prio, .. } => {
            match tc::filters_of(&nl.batch, &[*ifindex]).pop() {
                Some(Ok(filters)) => !filters.iter().any(|f| f.prio == *prio),
                _ => false,
            }
        }
        Action::DeleteIngressQdisc { ifindex, .. } => {
            let hooked = tc::dump_qdiscs(&nl.batch).and_then(|q| {
                tc::ingress_hooks(&nl.batch, q, &std::iter::once(*ifindex).collect())
            });
            hooked.is_ok_and(|h| !h.contains_key(ifindex))
        }
        _ => false,
    }
}
