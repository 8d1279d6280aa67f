//! Apply: scan, plan, record the plan, build, record the result.
//!
//! The whole plan goes into the checkpoint before the first kernel change, so
//! a crash at any instant leaves something a plain detach can undo.

mod build;
pub(crate) mod l3;
pub(crate) mod late;
mod requests;
mod taps;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use crate::describe;
use crate::error::{Error, Result};
use crate::id::SandboxId;
use crate::kernel::netlink::Netlink;
use crate::kernel::netns::NetNs;
use crate::kernel::netns_worker::Pending;
use crate::kernel::tc;
use crate::model::{Description, Route, RoutesDigest, Rule, Timings};
use crate::plan::{self, AttachOptions, IngressState, Inventory, Plan};
use crate::scan::{self, parse};
use crate::state::{Checkpoint, Created, Stage, StateDir, VERSION};
use crate::teardown::{self, Proof};

/// Attach `opts` in the netns `nl` talks to, with no checkpoint for `id` yet.
pub fn fresh(
    ns: &NetNs,
    nl: &Netlink,
    id: &SandboxId,
    opts: &AttachOptions,
    state: &StateDir,
) -> Result<Description> {
    let start = Instant::now();
    let mut timings = Timings::default();

    let Survey {
        mut desc,
        inventory,
        ..
    } = survey_without_orphans(ns, nl, id)?;
    let mut plan = plan::plan(&desc, &inventory, opts, id)?;
    if resolve_served_gateways(nl, &desc, &plan) {
        // Their MACs are in the pod's neighbour table now: the description
        // (and so the checkpoint) records them for the responder.
        desc = desc.with_live_tables(scan::pod_view(ns, nl.ipv6_enabled, &mut scan::dump(nl)?));
    }
    l3::prepare(nl, &mut plan)?;
    // The netns thread opens what the TAPs are made with while this one
    // records the intent (nothing is made before that record is on disk).
    let prepared_taps = taps::prepare(nl, taps::nics(&plan).count());
    let (mut desc, digesting) = digest_aside(nl, desc);
    timings.scan = micros(start);
    log_plan(&desc, &plan, timings.scan);

    // Record the intent before the first kernel change: a crash from here on
    // leaves a checkpoint that detach can undo by name, group and priority.
    let t = Instant::now();
    let mut cp = Checkpoint {
        version: VERSION,
        id: id.clone(),
        netns: desc.netns.clone(),
        netns_cookie: nl.cookie,
        stage: Stage::Intent,
        tables_digest: None,
        plan: plan.clone(),
        created: Vec::new(),
        only: opts.interfaces.clone(),
        late: Vec::new(),
        adopted: Vec::new(),
        pending: Vec::new(),
    };
    state.save(&cp)?;
    timings.checkpoint = micros(t);
    tracing::debug!(
        phase = "checkpoint",
        us = timings.checkpoint,
        "intent recorded (applying)"
    );

    let mut created = Vec::new();
    let built = build::build(ns, nl, &plan, &mut timings, &mut created, prepared_taps)
        .and_then(|()| l3::install_table(nl, &plan));
    if let Err(e) = built {
        return Err(rollback(nl, state, &plan, &created, e));
    }

    // The description is recorded as printed but for its routes and rules
    // (the tables' digest stands for them; the neighbours stay), so the
    // checkpoint's size does not grow with the pod's routing table; the
    // final checkpoint write is not timed.
    timings.total = micros(start);
    let routes_digest = digesting.restore(&mut desc);
    let mut described = describe::attached(desc, &plan, &created, timings, opts.dns.clone());
    bridged_flushed(&mut described, &plan);
    let recorded = described.without_tables();
    cp.tables_digest = Some(routes_digest.finish(&described.neighbours));
    cp.stage = Stage::Complete(Some(recorded));
    cp.created = created;
    if let Err(e) = state.save(&cp) {
        // The intent record (phase "applying") is still on disk if the rollback cannot finish.
        return Err(rollback(nl, state, &plan, &cp.created, e));
    }
    tracing::info!(phase = "checkpoint", "attachment recorded (complete)");
    Ok(described)
}

/// The routes and rules of `desc`, taken out of it and digested on the
/// netns thread while this one records the intent and builds (12 000
/// routes take most of a millisecond); the description is returned
/// without them until [`Digesting::restore`] puts them back.
fn digest_aside(nl: &Netlink, mut desc: Description) -> (Description, Digesting) {
    let tables = Arc::new((
        std::mem::take(&mut desc.routes),
        std::mem::take(&mut desc.rules),
    ));
    let theirs = tables.clone();
    let pending = nl
        .worker
        .start(move || RoutesDigest::of(&theirs.0, &theirs.1))
        .ok();
    (desc, Digesting { tables, pending })
}

/// Routes and rules being digested aside ([`digest_aside`]).
struct Digesting {
    tables: Arc<(Vec<Route>, Vec<Rule>)>,
    pending: Option<Pending<RoutesDigest>>,
}

impl Digesting {
    /// Put the routes and rules back into `desc`, with their digest (made
    /// here if the netns thread could not).
    fn restore(self, desc: &mut Description) -> RoutesDigest {
        let digest = self.pending.and_then(|p| p.wait().ok());
        // The job dropped its reference before it answered.
        let (routes, rules) = Arc::try_unwrap(self.tables).unwrap_or_else(|t| (*t).clone());
        let digest = digest.unwrap_or_else(|| RoutesDigest::of(&routes, &rules));
        desc.routes = routes;
        desc.rules = rules;
        digest
    }
}

/// Leave out the neighbours that building bridge mode flushed: giving a pod
/// interface its bridged MAC flushes its neighbour table, and only the
/// permanent entries are put back (so a repeated attach prints the same).
fn bridged_flushed(desc: &mut Description, plan: &Plan) {
    let bridged: BTreeSet<&str> = plan
        .nics
        .iter()
        .filter(|n| n.wiring == crate::model::Wiring::Bridge)
        .map(|n| n.pod.name.as_str())
        .collect();
    desc.neighbours
        .retain(|n| n.state == "permanent" || !bridged.contains(n.interface.as_str()));
}

/// The description a finished attach recorded (`recorded`: without its
/// routes and rules, with its neighbours), with the pod's tables of the
/// netns `nl` talks to as they are now ([`scan::pod_view`]): what a repeated
/// attach prints. A neighbour that was recorded keeps its recorded state.
pub(crate) fn recorded(ns: &NetNs, nl: &Netlink, recorded: Description) -> Result<Description> {
    let mut dump = scan::dump(nl)?;
    Ok(recorded.with_live_tables(scan::pod_view(ns, nl.ipv6_enabled, &mut dump)))
}

/// The netns surveyed, after removing links of `id` that no checkpoint
/// records (a teardown killed after it removed the checkpoint): they go
/// before anything is built, so the pod interface never gets a second TAP.
fn survey_without_orphans(ns: &NetNs, nl: &Netlink, id: &SandboxId) -> Result<Survey> {
    let surveyed = survey(ns, nl)?;
    if !surveyed.markers.iter().any(|m| plan::is_marker_of(m, id)) {
        return Ok(surveyed);
    }
    tracing::warn!("sandbox {id}: removing podtap's links left without a checkpoint");
    teardown::undo_by_markers(nl, id)?.into_result()?;
    survey(ns, nl)
}

/// How long attach waits for the gateways of served NICs to answer.
const RESOLVE_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// Have the pod resolve the default gateway of each served NIC whose MAC
/// its neighbour table lacks, while the pod interface still receives: once
/// wired (tc redirects its ingress, a bridge takes it), the pod netns
/// cannot learn it, and the responder gives that MAC to the guest as its
/// router's. Returns whether it asked (the tables changed).
fn resolve_served_gateways(nl: &Netlink, desc: &Description, plan: &Plan) -> bool {
    let asks = plan.served_gateways_to_resolve(desc);
    if asks.is_empty() {
        return false;
    }
    if !crate::kernel::resolve::resolve_neighbours(&nl.batch, &asks, RESOLVE_WAIT) {
        tracing::info!(
            "a served NIC's gateway did not answer: the guest's router is the TAP's MAC"
        );
    }
    true
}

/// The scan and plan phases, for `PODTAP_LOG=debug` (one event per NIC).
fn log_plan(desc: &Description, plan: &Plan, us: u64) {
    let interfaces = desc.interfaces.len();
    tracing::info!(phase = "scan", interfaces, us, "netns scanned");
    for n in &plan.nics {
        let (interface, tap, wiring) =
            (n.pod.name.as_str(), n.tap.name.as_str(), n.wiring.as_str());
        tracing::debug!(phase = "plan", interface, tap, wiring, "planned");
    }
    tracing::info!(
        phase = "plan",
        nics = plan.nics.len(),
        mode = plan.mode.as_str(),
        "planned"
    );
}

/// The netns as planning needs it: the description made from its dump, and
/// what the plan needs beyond the description.
pub(crate) struct Survey {
    pub(crate) desc: Description,
    pub(crate) inventory: Inventory,
    /// The markers (`IFLA_IFALIAS`) of podtap's own links in the netns.
    pub(crate) markers: Vec<String>,
}

/// Dump the netns `nl` talks to and read what a plan needs.
pub(crate) fn survey(ns: &NetNs, nl: &Netlink) -> Result<Survey> {
    let mut dump = scan::dump(nl)?;
    let desc = scan::pod_view(ns, nl.ipv6_enabled, &mut dump);
    let eligible: BTreeSet<u32> = desc
        .interfaces
        .iter()
        .filter(|i| i.eligible || i.named_only)
        .map(|i| i.ifindex)
        .collect();
    let qdiscs = tc::dump_qdiscs(&nl.batch).map_err(|e| nl.err("dump qdiscs", "", e))?;
    let hooks = tc::ingress_hooks(&nl.batch, qdiscs, &eligible)
        .map_err(|e| nl.err("dump ingress filters", "", e))?;
    // Bridge mode changes the pod interface's MAC, which flushes its
    // neighbours: record the permanent ones to put back.
    let restore = eligible
        .iter()
        .map(|i| (*i, permanent_neighbours(&dump, *i)))
        .collect();
    let inventory = Inventory {
        restore,
        ingress: hooks
            .iter()
            .map(|(i, h)| (*i, IngressState::from(h)))
            .collect(),
        groups: parse::link_groups(&dump.links),
        lower_of_stacked: parse::stacked_lowers(&dump.links),
        txqlen: txqlens(&dump),
    };
    let markers = dump
        .links
        .iter()
        .filter(|l| l.is_podtap_kind())
        .filter_map(|l| l.alias.clone())
        .filter(|alias| plan::marked_id(alias).is_some())
        .collect();
    Ok(Survey {
        desc,
        inventory,
        markers,
    })
}

/// Each link's transmit queue length, by ifindex (the plan records the pod
/// interfaces', and detach puts them back).
fn txqlens(dump: &parse::Dump) -> BTreeMap<u32, u32> {
    dump.links
        .iter()
        .filter_map(|l| Some((l.ifindex, l.txqlen?)))
        .collect()
}

/// Undo what this attach made (by ifindex and group, never by name), drop
/// its checkpoint, and return `failure` saying so.
fn rollback(
    nl: &Netlink,
    state: &StateDir,
    plan: &Plan,
    created: &[Created],
    failure: Error,
) -> Error {
    let mut report = teardown::undo_recorded(nl, plan, created, Proof::MadeNow);
    if let Err(e) = crate::kernel::macvtap::remove_nodes(plan.id.as_str()) {
        report
            .warnings
            .push(format!("could not remove macvtap device nodes: {e}"));
    }
    for w in &report.warnings {
        tracing::warn!("rollback: {w}");
    }
    let id = &plan.id;
    if report.errors.is_empty() && state.remove(id).is_ok() {
        // The caller's error says the attach failed; that nothing is left
        // is detail.
        tracing::info!("sandbox {id}: attach failed; everything it built was removed");
    } else {
        tracing::warn!(
            "sandbox {id}: rollback incomplete; its checkpoint is kept, and a detach removes the rest"
        );
    }
    failure
}

/// What bridge mode must put back on pod interface `ifindex`, read from the
/// scan's dump: its permanent neighbours (a new MAC flushes them).
fn permanent_neighbours(dump: &scan::Dump, ifindex: u32) -> plan::PodRestore {
    use crate::kernel::replay::Recorded;
    use rtnetlink::packet_route::neighbour::NeighbourState;
    use rtnetlink::packet_route::RouteNetlinkMessage;
    let neighbours = dump
        .neighbours
        .iter()
        .filter(|n| n.header.ifindex == ifindex && n.header.state == NeighbourState::Permanent)
        .map(|n| Recorded::of(&RouteNetlinkMessage::NewNeighbour(n.clone())))
        .collect();
    plan::PodRestore { neighbours }
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}
