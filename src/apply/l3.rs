//! Routed (`l3`) wiring, built (the layout: `plan::l3`).
//!
//! [`prepare`] reads what the routed NICs will change before anything
//! does (the pod interfaces' settings, their IPv6 addresses and the routes
//! that name them as source, the netns's `proxy_ndp`) into the plan, which
//! the checkpoint records before the first change. [`build`] then makes
//! each change, once the TAPs exist; every one of them is undone from that
//! record (`teardown::l3`), whatever step a kill interrupted.

use std::net::IpAddr;

use rtnetlink::packet_route::address::AddressMessage;
use rtnetlink::packet_route::route::{RouteAttribute, RouteMessage};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};

use super::late::Change;
use crate::error::Result;
use crate::kernel::batch::Request;
use crate::kernel::netlink::Netlink;
use crate::kernel::nft;
use crate::kernel::replay::{self, Recorded};
use crate::kernel::{routing, sysctl};
use crate::plan::l3::{self as plan_l3, L3Plan, ROUTER4, ROUTER6};
use crate::plan::{NicPlan, Plan};
use crate::state::{created_ifindex, Created};
use crate::teardown::l3 as teardown_l3;
use crate::teardown::l3_decide::{drift, Drift};

/// The routed NICs of `plan`.
fn routed(plan: &Plan) -> impl Iterator<Item = &NicPlan> {
    plan.nics.iter().filter(|n| n.l3.is_some())
}

/// Fill in what the routed NICs of `plan` will change, as the netns holds
/// it now. A NIC keeps its IPv6 only where the kernel can forward one
/// interface's IPv6 alone (`force_forwarding`, Linux 6.17).
pub(super) fn prepare(nl: &Netlink, plan: &mut Plan) -> Result<()> {
    if routed(plan).next().is_none() {
        return Ok(());
    }
    let has_force = routed(plan)
        .map(|n| format!("ipv6/conf/{}/force_forwarding", n.pod.name))
        .collect();
    let has_force = sysctl::read(&nl.worker, has_force)?;
    for (nic, have) in plan
        .nics
        .iter_mut()
        .filter(|n| n.l3.is_some())
        .zip(has_force)
    {
        let Some(l3) = nic.l3.as_mut() else { continue };
        if have.is_none() && !l3.v6.is_empty() {
            l3.v6.clear();
            nic.wiring_note = Some(
                "IPv6 not routed: this kernel cannot forward one interface's IPv6 alone \
                 (net.ipv6.conf.*.force_forwarding, Linux 6.17)"
                    .into(),
            );
        }
    }
    record_pod_sides(nl, plan)?;
    let existing = nl
        .nft()?
        .tables()
        .map_err(|e| nl.nft_err("list nftables tables", "", e))?
        .into_iter()
        .filter(|t| t.name.starts_with("podtap_"))
        .map(|t| teardown_l3::marker_of(&t.userdata))
        .find(|m| m.contains("proxy_ndp="));
    let now = sysctl::read(&nl.worker, vec![plan_l3::PROXY_NDP.into()])?
        .pop()
        .flatten();
    // Recorded whenever the netns has the setting, so that a NIC with IPv6
    // added later (by watch) finds it recorded.
    let ipv6 = now.is_some();
    plan.l3 = Some(plan_l3::netns_part(
        &plan.id,
        ipv6,
        existing.as_deref(),
        now.as_deref(),
    ));
    Ok(())
}

/// Record each routed pod interface's settings, and (with IPv6) its
/// addresses and the routes naming them as source, exactly as the kernel
/// holds them: one read of the settings and one dump for every NIC (a dump
/// per NIC made attach grow with the square of the NICs).
fn record_pod_sides(nl: &Netlink, plan: &mut Plan) -> Result<()> {
    let keys: Vec<Vec<String>> = routed(plan)
        .map(|n| {
            let v6 = n.l3.as_ref().is_some_and(|l| !l.v6.is_empty());
            plan_l3::pod_settings(&n.pod.name, v6)
                .into_iter()
                .map(|(k, _)| k)
                .collect()
        })
        .collect();
    let mut values = sysctl::read(&nl.worker, keys.concat())?.into_iter();
    let any6 = routed(plan).any(|n| n.l3.as_ref().is_some_and(|l| !l.v6.is_empty()));
    let dumped = if any6 { Some(dump_v6(nl)?) } else { None };
    let nics = plan.nics.iter_mut().filter(|n| n.l3.is_some());
    for (nic, keys) in nics.zip(keys) {
        let ifindex = nic.pod.ifindex;
        let Some(l3) = nic.l3.as_mut() else { continue };
        l3.pod_sysctls = keys
            .into_iter()
            .zip(values.by_ref())
            .filter_map(|(k, v)| Some((k, v?)))
            .collect();
        if let (false, Some((addresses, routes))) = (l3.v6.is_empty(), dumped.as_ref()) {
            record_v6(ifindex, l3, addresses, routes);
        }
    }
    Ok(())
}

/// The pod interface's IPv6 addresses (newest first, down to the oldest
/// routed one) and the routes naming a routed one as source.
fn record_v6(ifindex: u32, l3: &mut L3Plan, addresses: &[AddressMessage], routes: &[RouteMessage]) {
    let mine: Vec<&AddressMessage> = addresses
        .iter()
        .filter(|a| a.header.index == ifindex)
        .collect();
    let last = mine
        .iter()
        .rposition(|a| v6_of(a).is_some_and(|ip| l3.v6.contains(&ip)))
        .unwrap_or(0);
    l3.v6_addresses = mine[..=last.min(mine.len().saturating_sub(1))]
        .iter()
        .filter(|a| v6_of(a).is_some_and(|ip| !is_link_local(ip)))
        .map(|a| Recorded::of(&RouteNetlinkMessage::NewAddress((*a).clone())))
        .collect();
    l3.v6_src_routes = routes
        .iter()
        .filter(|r| src_of(r).is_some_and(|ip| l3.v6.contains(&ip)))
        .map(|r| Recorded::of(&RouteNetlinkMessage::NewRoute(r.clone())))
        .collect();
}

fn v6_of(a: &AddressMessage) -> Option<std::net::Ipv6Addr> {
    match teardown_l3::address_of(a)? {
        IpAddr::V6(ip) => Some(ip),
        IpAddr::V4(_) => None,
    }
}

fn is_link_local(ip: std::net::Ipv6Addr) -> bool {
    ip.segments()[0] & 0xffc0 == 0xfe80
}

/// Every IPv6 address and route (all tables) of the netns.
fn dump_v6(nl: &Netlink) -> Result<(Vec<AddressMessage>, Vec<RouteMessage>)> {
    let mut addr = AddressMessage::default();
    addr.header.family = AddressFamily::Inet6;
    let mut route = RouteMessage::default();
    route.header.address_family = AddressFamily::Inet6;
    let answers = nl
        .batch
        .dumps(&[
            RouteNetlinkMessage::GetAddress(addr),
            RouteNetlinkMessage::GetRoute(route),
        ])
        .map_err(|e| {
            nl.err(
                "dump IPv6 addresses and routes",
                "",
                crate::kernel::errno::kernel_error(&e),
            )
        })?;
    let mut answers = answers.into_iter();
    let take = |a: Option<std::result::Result<Vec<RouteNetlinkMessage>, nix::errno::Errno>>,
                what| {
        a.unwrap_or(Ok(Vec::new())).map_err(|e| nl.err(what, "", e))
    };
    let addresses = take(answers.next(), "dump IPv6 addresses")?
        .into_iter()
        .filter_map(|m| match m {
            RouteNetlinkMessage::NewAddress(a) => Some(a),
            _ => None,
        })
        .collect();
    let routes = take(answers.next(), "dump IPv6 routes")?
        .into_iter()
        .filter_map(|m| match m {
            RouteNetlinkMessage::NewRoute(r) => Some(r),
            _ => None,
        })
        .collect();
    Ok((addresses, routes))
}

/// A route's preferred source, when it is IPv6.
fn src_of(r: &RouteMessage) -> Option<std::net::Ipv6Addr> {
    use rtnetlink::packet_route::route::RouteAddress;
    r.attributes.iter().find_map(|a| match a {
        RouteAttribute::PrefSource(RouteAddress::Inet6(ip)) => Some(*ip),
        _ => None,
    })
}

/// Build the routing of every routed NIC of `plan` (`taps[i]`: the ifindex
/// of NIC `i`'s TAP); the table follows ([`install_table`]).
pub(super) fn build(nl: &Netlink, plan: &Plan, taps: &[u32]) -> Result<()> {
    let nics: Vec<(&NicPlan, &L3Plan, u32)> = plan
        .nics
        .iter()
        .zip(taps)
        .filter_map(|(n, &tap)| Some((n, n.l3.as_ref()?, tap)))
        .collect();
    if nics.is_empty() {
        return Ok(());
    }
    // Every NIC's settings in one write, then the guards, then every
    // request in one batch: one round trip each, not one per NIC and
    // request (that made a 64-NIC attach four times tc's).
    let (mut settings, mut guards, mut steps) = (Vec::new(), Vec::new(), Vec::new());
    for (nic, l3, tap) in &nics {
        let (v4, v6) = (!l3.v4.is_empty(), !l3.v6.is_empty());
        let tap_name = nic.tap.name.as_str();
        settings.extend(
            plan_l3::tap_settings(tap_name, v4, v6)
                .into_iter()
                .chain(plan_l3::pod_settings(&nic.pod.name, v6))
                .map(|(k, v)| (k, v.to_string())),
        );
        // Router advertisements and redirects from the guest would route
        // the pod netns through it.
        guards.extend(
            plan_l3::tap_guards(tap_name)
                .into_iter()
                .map(|(k, v)| (k, v.to_string())),
        );
        steps.extend(nic_steps(nic, l3, *tap));
    }
    if nics.iter().any(|(_, l3, _)| !l3.v6.is_empty()) {
        settings.push((plan_l3::PROXY_NDP.into(), "1".into()));
    }
    sysctl::write(&nl.worker, settings, false)?;
    sysctl::write(&nl.worker, guards, true)?;
    run_steps(nl, &steps)
}

/// One request of the routed wiring, with what it does and on what (for
/// its error), and whether a missing object is no failure (a local route
/// already gone: a build run again after a kill).
struct Step {
    msg: RouteNetlinkMessage,
    create: bool,
    op: &'static str,
    on: String,
    gone_is_ok: bool,
}

/// One routed NIC's requests: the TAP's address generation and addresses,
/// then each address's host route, proxy entry and local route.
fn nic_steps(nic: &NicPlan, l3: &L3Plan, tap: u32) -> Vec<Step> {
    let (v4, v6) = (!l3.v4.is_empty(), !l3.v6.is_empty());
    let step = |msg, create, op, on: &str| Step {
        msg,
        create,
        op,
        on: on.to_string(),
        gone_is_ok: false,
    };
    let tap_name = nic.tap.name.as_str();
    let mut steps = Vec::new();
    if v6 {
        let msg = RouteNetlinkMessage::SetLink(routing::no_address_generation(tap));
        steps.push(step(msg, false, "set addrgenmode none on TAP", tap_name));
    }
    for (on, ip, prefix) in [(v4, IpAddr::V4(ROUTER4), 32), (v6, IpAddr::V6(ROUTER6), 64)] {
        if on {
            let a = RouteNetlinkMessage::NewAddress(routing::tap_address(ip, prefix, tap));
            steps.push(step(a, true, "add address to TAP", tap_name));
        }
    }
    let addresses = l3
        .v4
        .iter()
        .map(|a| IpAddr::V4(*a))
        .chain(l3.v6.iter().map(|a| IpAddr::V6(*a)));
    for ip in addresses {
        let what = ip.to_string();
        let host = routing::new_route(routing::host_route(ip, tap));
        steps.push(step(host, true, "add host route to TAP", &what));
        let proxy =
            RouteNetlinkMessage::NewNeighbour(routing::proxy_neighbour(ip, nic.pod.ifindex));
        steps.push(step(proxy, true, "add proxy neighbour on", &nic.pod.name));
        let local = routing::del_route(routing::local_route(ip, nic.pod.ifindex));
        steps.push(Step {
            gone_is_ok: true,
            ..step(local, false, "delete local route of", &what)
        });
    }
    steps
}

/// Send `steps` as one batch; the first that failed (but for a missing
/// object where that is fine) is the error.
fn run_steps(nl: &Netlink, steps: &[Step]) -> Result<()> {
    let requests: Vec<Request> = steps
        .iter()
        .map(|s| match s.create {
            true => Request::create(s.msg.clone()),
            false => Request::change(s.msg.clone()),
        })
        .collect();
    let results = nl.batch.run(&requests).map_err(|e| {
        nl.err(
            "send request batch",
            "",
            crate::kernel::errno::kernel_error(&e),
        )
    })?;
    for (s, r) in steps.iter().zip(results) {
        match r {
            Err(nix::errno::Errno::ESRCH | nix::errno::Errno::ENOENT) if s.gone_is_ok => {}
            Err(e) => return Err(nl.err(s.op, &s.on, e)),
            Ok(()) => {}
        }
    }
    Ok(())
}

/// Install the nftables table of `plan` (every routed NIC of the
/// attachment), replacing the one an earlier build of it made.
pub(crate) fn install_table(nl: &Netlink, plan: &Plan) -> Result<()> {
    let Some(netns) = plan.l3.as_ref() else {
        return Ok(());
    };
    let table = plan_l3::table(plan, netns)?;
    nl.nft()?
        .replace(&table)
        .map_err(|e| nl.nft_err("install nftables table", &table.name, e))
}

/// Build again what the kernel undid of `plan`'s routed wiring (a pod
/// interface that went down and up has its local routes back and its proxy
/// entries gone; a TAP that went down lost its addresses and routes), and
/// the nftables table if it is missing or was changed. One change per NIC
/// repaired.
pub(crate) fn repair(nl: &Netlink, plan: &Plan, created: &[Created]) -> Result<Vec<Change>> {
    if plan.nics.iter().all(|n| n.l3.is_none()) {
        return Ok(Vec::new());
    }
    let now = teardown_l3::observe(nl)?;
    let mut changes = Vec::new();
    for nic in plan.nics.iter() {
        let Some(l3) = &nic.l3 else { continue };
        let Some(tap) = created_ifindex(created, &nic.tap.name) else {
            continue;
        };
        let drifts = drift(l3, nic.pod.ifindex, tap, &now);
        if drifts.is_empty() {
            continue;
        }
        for d in &drifts {
            repair_one(nl, nic.pod.ifindex, tap, d)?;
        }
        tracing::info!(interface = nic.pod.name.as_str(), "routed wiring repaired");
        changes.push(Change::Repaired {
            interface: nic.pod.name.clone(),
            problems: drifts.iter().map(ToString::to_string).collect(),
        });
    }
    if let Some(netns) = &plan.l3 {
        let table = plan_l3::table(plan, netns)?;
        let nft = nl.nft()?;
        let state = nft
            .check(&table)
            .map_err(|e| nl.nft_err("read nftables table", &table.name, e))?;
        let problem = match state {
            nft::State::Missing => "missing",
            nft::State::Altered(..) => "changed",
            nft::State::Unchanged(_) | nft::State::Foreign(_) => return Ok(changes),
        };
        nft.replace(&table)
            .map_err(|e| nl.nft_err("build nftables table again", &table.name, e))?;
        changes.push(Change::Repaired {
            interface: String::new(),
            problems: vec![format!("nftables table inet {} was {problem}", table.name)],
        });
    }
    Ok(changes)
}

fn repair_one(nl: &Netlink, pod: u32, tap: u32, d: &Drift) -> Result<()> {
    if let Drift::PodAddressLost(ip, rec) = d {
        // Back as recorded; the kernel makes its local route again (at
        // once, or once duplicate address detection is done: the next
        // round deletes it then).
        replay::restore(&nl.batch, rec)
            .map_err(|e| nl.err("add back pod address", ip.to_string(), e))?;
        return repair_one(nl, pod, tap, &Drift::LocalRouteBack(IpAddr::V6(*ip)));
    }
    let (msg, op, create) = match *d {
        Drift::PodAddressLost(..) => return Ok(()),
        Drift::LocalRouteBack(ip) => (
            routing::del_route(routing::local_route(ip, pod)),
            "delete local route of",
            false,
        ),
        Drift::HostRouteMissing(ip) => (
            routing::new_route(routing::host_route(ip, tap)),
            "add host route to TAP",
            true,
        ),
        Drift::ProxyMissing(ip) => (
            RouteNetlinkMessage::NewNeighbour(routing::proxy_neighbour(ip, pod)),
            "add proxy neighbour for",
            true,
        ),
        Drift::TapAddressMissing(ip) => {
            let prefix = if ip.is_ipv4() { 32 } else { 64 };
            (
                RouteNetlinkMessage::NewAddress(routing::tap_address(ip, prefix, tap)),
                "add address to TAP",
                true,
            )
        }
    };
    let request = if create {
        Request::create(msg)
    } else {
        Request::change(msg)
    };
    match nl.batch.request(request) {
        // Someone (a watch round before this one) did it meanwhile.
        Err(e)
            if matches!(
                e.errno(),
                Some(nix::errno::Errno::EEXIST | nix::errno::Errno::ESRCH)
            ) =>
        {
            Ok(())
        }
        r => r.map_err(|e| nl.err(op, d.to_string(), e)),
    }
}
