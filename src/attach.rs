//! `attach`: scan, plan, record the plan, build TAPs and wiring, record the result.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::future::join_all;

use crate::error::{Error, Result};
use crate::kernel::netns::NetNs;
use crate::kernel::tap::{self, TapFlags, TapSpec};
use crate::kernel::{bridge, links, tc};
use crate::model::{Attachment, BridgeInfo, Description, TapInfo, Timings};
use crate::plan::{self, AttachOptions, Inventory, Plan};
use crate::scan::{parse, Netlink};
use crate::state::{created_ifindex, validate_id, Checkpoint, Created, Phase, StateDir, VERSION};
use crate::teardown;

/// How long a command waits for another podtap working on the same id.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(30);

/// Attach `opts` to the netns at `netns_path` under sandbox `id`, and return the description.
///
/// Idempotent: a second attach of the same id and netns returns the recorded
/// description. An attach that crashed half-way is undone first.
pub fn attach(
    netns_path: &Path,
    allow_host: bool,
    id: &str,
    opts: &AttachOptions,
    state: &StateDir,
) -> Result<Description> {
    validate_id(id)?;
    let ns = NetNs::open(netns_path, allow_host)?;
    state.locked(id, LOCK_TIMEOUT, || {
        let netns_lock = state.lock_netns(ns.identity(), LOCK_TIMEOUT)?;
        let result = attach_locked(&ns, id, opts, state);
        netns_lock.release();
        result
    })
}

fn attach_locked(
    ns: &NetNs,
    id: &str,
    opts: &AttachOptions,
    state: &StateDir,
) -> Result<Description> {
    crate::kernel::runtime::block_on(async {
        let nl = Netlink::connect(ns)?;
        if let Some(cp) = state.load(id)? {
            if (cp.netns.dev, cp.netns.inode) == ns.identity()
                && !cp.is_netns(ns.identity(), nl.cookie)
            {
                // Same inode number, other cookie: the recorded netns died and its
                // inode was reused. Nothing of it is left to undo.
                tracing::warn!(
                    "sandbox {id}: dropping a checkpoint of a netns that no longer exists"
                );
                state.remove(id)?;
                return attach_fresh(ns, &nl, id, opts, state).await;
            }
            if !cp.is_netns(ns.identity(), nl.cookie) {
                return Err(Error::Conflict {
                    id: id.into(),
                    existing: cp.netns.path.clone(),
                    existing_inode: cp.netns.inode,
                    requested: ns.display(),
                });
            }
            if let (Phase::Complete, Some(desc)) = (cp.phase, cp.description.clone()) {
                return Ok(desc);
            }
            tracing::warn!("sandbox {id}: an earlier attach did not finish; undoing it first");
            // A dead attach: match by planned name too, for a TAP made just
            // before the kill and not yet grouped.
            teardown::undo(&nl, &cp.plan, &cp.created, true)
                .await
                .into_result(id)?;
            state.remove(id)?;
        }
        attach_fresh(ns, &nl, id, opts, state).await
    })
}

async fn attach_fresh(
    ns: &NetNs,
    nl: &Netlink,
    id: &str,
    opts: &AttachOptions,
    state: &StateDir,
) -> Result<Description> {
    let start = Instant::now();
    let mut timings = Timings::default();

    let dump = nl.dump().await?;
    let desc = crate::scan::describe(ns, nl.ipv6_enabled, &dump);
    let groups = parse::link_groups(&dump.links);
    let lower_of_stacked = parse::stacked_lowers(&dump.links);
    let eligible: BTreeSet<u32> = desc
        .interfaces
        .iter()
        .filter(|i| i.eligible)
        .map(|i| i.ifindex)
        .collect();
    let ingress = tc::ingress_inventory(&nl.handle, &eligible)
        .await
        .map_err(|e| nl.err("dump qdiscs", "", e))?;
    let mut plan = plan::plan(
        &desc,
        &Inventory {
            ingress,
            groups,
            lower_of_stacked,
        },
        opts,
        id,
    )?;
    for nic in &mut plan.nics {
        let live = dump
            .links
            .iter()
            .find(|l| l.header.index == nic.pod.ifindex);
        nic.pod.txqlen = live.and_then(|l| links::link_state(l).txqlen);
    }
    timings.scan = micros(start);

    // Record the intent before the first kernel change: a crash from here on
    // leaves a checkpoint that detach can undo by name, group and priority.
    let t = Instant::now();
    let mut cp = Checkpoint {
        version: VERSION,
        id: id.into(),
        netns: desc.netns.clone(),
        netns_cookie: nl.cookie,
        phase: Phase::Applying,
        plan: plan.clone(),
        created: Vec::new(),
        description: None,
    };
    state.save(&cp)?;
    timings.checkpoint = micros(t);

    let mut created = Vec::new();
    match apply(ns, nl, &plan, &mut timings, &mut created).await {
        Ok(()) => {}
        Err(e) => {
            // Undo only what this attach made: by ifindex and group, never by name.
            let report = teardown::undo(nl, &plan, &created, false).await;
            for w in &report.warnings {
                tracing::warn!("rollback: {w}");
            }
            if report.errors.is_empty() {
                state.remove(id)?;
            } else {
                tracing::warn!(
                    "rollback incomplete; checkpoint kept for `podtap detach --id {id}`"
                );
            }
            return Err(e);
        }
    }

    let t = Instant::now();
    let mut described = describe_attached(desc, &plan, &created);
    cp.phase = Phase::Complete;
    cp.created = created;
    // The description is recorded exactly as printed, so a repeated attach
    // prints the same bytes; the final checkpoint write is therefore not timed.
    timings.checkpoint += micros(t);
    timings.total = micros(start);
    described.attachment = Some(Attachment {
        id: id.into(),
        mode: opts.mode,
        timings_us: timings,
    });
    cp.description = Some(described.clone());
    state.save(&cp)?;
    Ok(described)
}

/// Build every TAP, bridge and filter of `plan`, adding each link made to
/// `created` as soon as it exists (so a failure can undo exactly those).
async fn apply(
    ns: &NetNs,
    nl: &Netlink,
    plan: &Plan,
    timings: &mut Timings,
    created: &mut Vec<Created>,
) -> Result<()> {
    let t = Instant::now();
    let specs: Vec<TapSpec> = plan
        .nics
        .iter()
        .map(|n| TapSpec {
            name: n.tap.name.clone(),
            flags: TapFlags {
                vnet_hdr: n.tap.vnet_hdr,
                multi_queue: n.tap.multi_queue,
            },
            owner: n.tap.owner,
            group: n.tap.group,
        })
        .collect();
    let (tap_indexes, failed) = create_taps(ns, &specs);
    created.extend(specs.iter().zip(&tap_indexes).map(|(s, i)| Created {
        name: s.name.clone(),
        ifindex: *i,
        kind: "tap".into(),
    }));
    if let Some(e) = failed {
        return Err(e);
    }
    timings.tap = micros(t);

    let t = Instant::now();
    let marker = links::marker(&plan.id);
    let marker = marker.as_str();
    let bridges = create_bridges(nl, plan).await?;
    created.extend(bridges.iter().flatten().cloned());

    let configured = join_all(plan.nics.iter().zip(&tap_indexes).zip(&bridges).map(
        |((n, tap), br)| async move {
            let controller = br.as_ref().map(|b| b.ifindex);
            links::configure_tap(&nl.handle, *tap, n.tap.mtu, plan.group, marker, controller)
                .await
                .map_err(|e| nl.err("configure TAP", &n.tap.name, e))?;
            if let (Some(b), Some(bp)) = (br, &n.bridge) {
                bridge::enslave_pod(&nl.handle, n.pod.ifindex, b.ifindex, &bp.pod_mac)
                    .await
                    .map_err(|e| {
                        nl.err(
                            "enslave pod interface to bridge",
                            format!("{} -> {}", n.pod.name, b.name),
                            e,
                        )
                    })?;
            }
            Ok::<(), Error>(())
        },
    ))
    .await;
    configured.into_iter().collect::<Result<Vec<()>>>()?;
    timings.tap += micros(t);

    let t = Instant::now();
    wire_tc(nl, plan, &tap_indexes).await?;
    timings.wiring = micros(t);
    Ok(())
}

/// Create the persistent TAPs on one netns thread and learn their ifindexes.
/// Returns the ifindexes of those made, and the error that stopped it, if any.
fn create_taps(ns: &NetNs, specs: &[TapSpec]) -> (Vec<u32>, Option<Error>) {
    let outcome = ns.run(|| {
        let mut indexes = Vec::with_capacity(specs.len());
        for spec in specs {
            if let Err(e) = tap::create_persistent(spec) {
                return Ok((indexes, Some((spec.name.clone(), e))));
            }
            // The thread is inside the netns, so this resolves the name there.
            match nix::net::if_::if_nametoindex(spec.name.as_str()) {
                Ok(i) => indexes.push(i),
                Err(e) => return Ok((indexes, Some((spec.name.clone(), e.into())))),
            }
        }
        Ok((indexes, None))
    });
    match outcome {
        Ok((indexes, failed)) => {
            let err = failed.map(|(name, e)| {
                Error::kernel(
                    &ns.display(),
                    "create TAP (TUNSETIFF/TUNSETPERSIST)",
                    name,
                    e,
                )
            });
            (indexes, err)
        }
        Err(e) => (Vec::new(), Some(e)),
    }
}

async fn create_bridges(nl: &Netlink, plan: &Plan) -> Result<Vec<Option<Created>>> {
    if plan.nics.iter().all(|n| n.bridge.is_none()) {
        return Ok(vec![None; plan.nics.len()]);
    }
    let made = join_all(
        plan.nics
            .iter()
            .filter_map(|n| n.bridge.as_ref().map(|b| (n, b)))
            .map(|(n, b)| async move {
                let marker = crate::detach::bridge_marker(&plan.id, n.pod.ifindex, &n.pod.mac);
                bridge::create(&nl.handle, &b.name, n.pod.mtu, plan.group, &marker)
                    .await
                    .map_err(|e| nl.err("create bridge", &b.name, e))
            }),
    )
    .await;
    made.into_iter().collect::<Result<Vec<()>>>()?;
    let live = links::list(&nl.handle)
        .await
        .map_err(|e| nl.err("dump links", "", e))?;
    plan.nics
        .iter()
        .map(|n| match &n.bridge {
            None => Ok(None),
            Some(b) => live
                .values()
                .find(|l| l.name == b.name && l.group == plan.group)
                .map(|l| {
                    Some(Created {
                        name: b.name.clone(),
                        ifindex: l.ifindex,
                        kind: "bridge".into(),
                    })
                })
                .ok_or_else(|| {
                    Error::Invalid(format!("bridge {} vanished right after creation", b.name))
                }),
        })
        .collect()
}

/// Ingress qdiscs first (one wave), then the redirect filters both ways (a second wave).
async fn wire_tc(nl: &Netlink, plan: &Plan, taps: &[u32]) -> Result<()> {
    let tc_nics: Vec<_> = plan
        .nics
        .iter()
        .zip(taps)
        .filter_map(|(n, t)| n.tc.as_ref().map(|tc| (n, tc, *t)))
        .collect();
    let qdiscs = join_all(tc_nics.iter().map(|(n, tcp, tap)| async move {
        if tcp.create_pod_qdisc {
            tc::add_ingress_qdisc(&nl.handle, n.pod.ifindex)
                .await
                .map_err(|e| nl.err("add ingress qdisc", &n.pod.name, e))?;
        }
        tc::add_ingress_qdisc(&nl.handle, *tap)
            .await
            .map_err(|e| nl.err("add ingress qdisc", &n.tap.name, e))
    }))
    .await;
    qdiscs.into_iter().collect::<Result<Vec<()>>>()?;
    let filters = join_all(tc_nics.iter().map(|(n, tcp, tap)| async move {
        tc::add_redirect(&nl.handle, n.pod.ifindex, *tap, tcp.prio)
            .await
            .map_err(|e| {
                nl.err(
                    "add tc redirect filter",
                    format!("{} -> {}", n.pod.name, n.tap.name),
                    e,
                )
            })?;
        tc::add_redirect(&nl.handle, *tap, n.pod.ifindex, tcp.prio)
            .await
            .map_err(|e| {
                nl.err(
                    "add tc redirect filter",
                    format!("{} -> {}", n.tap.name, n.pod.name),
                    e,
                )
            })
    }))
    .await;
    filters.into_iter().collect::<Result<Vec<()>>>()?;
    Ok(())
}

/// The scanned description plus what attach built.
pub fn describe_attached(mut desc: Description, plan: &Plan, created: &[Created]) -> Description {
    let index_of = |name: &str| created_ifindex(created, name);
    for nic in &plan.nics {
        let Some(iface) = desc
            .interfaces
            .iter_mut()
            .find(|i| i.ifindex == nic.pod.ifindex)
        else {
            continue;
        };
        iface.tap = Some(TapInfo {
            name: nic.tap.name.clone(),
            ifindex: index_of(&nic.tap.name),
            queues: nic.tap.queues,
            vnet_hdr: nic.tap.vnet_hdr,
            multi_queue: nic.tap.multi_queue,
            owner: nic.tap.owner,
            group: nic.tap.group,
        });
        iface.wiring = Some(nic.wiring);
        iface.wiring_note = nic.wiring_note.clone();
        iface.bridge = nic.bridge.as_ref().map(|b| BridgeInfo {
            name: b.name.clone(),
            ifindex: index_of(&b.name),
            pod_interface_mac: b.pod_mac.clone(),
        });
    }
    desc
}

fn micros(since: Instant) -> u64 {
    since.elapsed().as_micros() as u64
}
