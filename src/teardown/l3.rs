//! Routed (`l3`) wiring, read and undone: what the netns holds now
//! ([`observe`]) and the steps `l3_decide` chose, carried out ([`execute`]).
//! What sits on a TAP (its addresses, the routes and proxy entries through
//! it, its settings) goes with the TAP; what is undone here is on the pod
//! interface and in the netns.

use std::net::IpAddr;

use rtnetlink::packet_core::NLM_F_REPLACE;
use rtnetlink::packet_route::address::{AddressAttribute, AddressMessage};
use rtnetlink::packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage,
};
use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute, RouteMessage, RouteType};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};

use super::decide::Observed;
use super::l3_decide::{drift, Drift, L3Now, L3Step};
use super::missing::NicProblems;
use crate::error::{Error, Result};
use crate::kernel::batch::Request;
use crate::kernel::errno::{is_gone, kernel_error};
use crate::kernel::netlink::Netlink;
use crate::kernel::replay::{self, Recorded};
use crate::kernel::{nft, routing, sysctl};
use crate::plan::Plan;
use crate::state::{created_ifindex, Created};

/// Read what routed wiring may have left: addresses, single-address routes
/// of the local and main tables, proxy entries, podtap's nftables tables.
pub fn observe(nl: &Netlink) -> Result<L3Now> {
    let mut route4 = RouteMessage::default();
    route4.header.address_family = AddressFamily::Inet;
    let mut route6 = RouteMessage::default();
    route6.header.address_family = AddressFamily::Inet6;
    let mut proxies = NeighbourMessage::default();
    // A dump request with exactly NTF_PROXY dumps the proxy table.
    proxies.header.flags = NeighbourFlags::Proxy;
    let answers = nl
        .batch
        .dumps(&[
            RouteNetlinkMessage::GetAddress(AddressMessage::default()),
            RouteNetlinkMessage::GetRoute(route4),
            RouteNetlinkMessage::GetRoute(route6),
            RouteNetlinkMessage::GetNeighbour(proxies),
        ])
        .map_err(|e| {
            nl.err(
                "dump addresses, routes and proxy entries",
                "",
                kernel_error(&e),
            )
        })?;
    let mut now = L3Now::default();
    for answer in answers {
        for msg in answer.map_err(|e| nl.err("dump addresses, routes and proxy entries", "", e))? {
            take(&mut now, msg);
        }
    }
    now.tables = nl
        .nft()?
        .tables()
        .map_err(|e| nl.nft_err("list nftables tables", "", e))?
        .into_iter()
        .filter(|t| t.name.starts_with("podtap_"))
        .map(|t| (t.name, marker_of(&t.userdata)))
        .collect();
    Ok(now)
}

fn take(now: &mut L3Now, msg: RouteNetlinkMessage) {
    match msg {
        RouteNetlinkMessage::NewAddress(a) => {
            if let Some(ip) = address_of(&a) {
                now.addresses.insert((a.header.index, ip));
            }
        }
        RouteNetlinkMessage::NewRoute(r) => {
            let (Some(dst), Some(oif)) = (destination(&r), oif(&r)) else {
                return;
            };
            let single = r.header.destination_prefix_length == if dst.is_ipv4() { 32 } else { 128 };
            let table = route_table(&r);
            if single && r.header.kind == RouteType::Local && table == routing::RT_TABLE_LOCAL {
                now.local_routes.insert((oif, dst));
            } else if single && r.header.kind == RouteType::Unicast && table == RT_TABLE_MAIN {
                now.host_routes.insert((oif, dst));
            }
        }
        RouteNetlinkMessage::NewNeighbour(n) if n.header.flags.contains(NeighbourFlags::Proxy) => {
            let ip = n.attributes.iter().find_map(|a| match a {
                NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => {
                    Some(IpAddr::V4(*v4))
                }
                NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                    Some(IpAddr::V6(*v6))
                }
                _ => None,
            });
            if let Some(ip) = ip {
                now.proxies.insert((n.header.ifindex, ip));
            }
        }
        _ => {}
    }
}

const RT_TABLE_MAIN: u32 = 254;

fn route_table(r: &RouteMessage) -> u32 {
    r.attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(u32::from(r.header.table))
}

fn destination(r: &RouteMessage) -> Option<IpAddr> {
    r.attributes.iter().find_map(|a| match a {
        RouteAttribute::Destination(RouteAddress::Inet(v4)) => Some(IpAddr::V4(*v4)),
        RouteAttribute::Destination(RouteAddress::Inet6(v6)) => Some(IpAddr::V6(*v6)),
        _ => None,
    })
}

fn oif(r: &RouteMessage) -> Option<u32> {
    r.attributes.iter().find_map(|a| match a {
        RouteAttribute::Oif(i) => Some(*i),
        _ => None,
    })
}

/// An address message's address.
pub fn address_of(a: &AddressMessage) -> Option<IpAddr> {
    // IFA_LOCAL is the address itself on point-to-point links; IFA_ADDRESS otherwise.
    let local = a.attributes.iter().find_map(|attr| match attr {
        AddressAttribute::Local(ip) => Some(*ip),
        _ => None,
    });
    local.or_else(|| {
        a.attributes.iter().find_map(|attr| match attr {
            AddressAttribute::Address(ip) => Some(*ip),
            _ => None,
        })
    })
}

/// The marker in a table's `NFTA_TABLE_USERDATA` (nft's comment TLV).
pub fn marker_of(userdata: &[u8]) -> String {
    let text = userdata.get(2..).unwrap_or_default();
    let text = text.split(|b| *b == 0).next().unwrap_or_default();
    String::from_utf8_lossy(text).into_owned()
}

/// The `NFTA_TABLE_USERDATA` that carries `marker`.
pub fn userdata_of(marker: &str) -> Vec<u8> {
    let probe = nft::Table {
        name: String::new(),
        marker: marker.into(),
        chains: Vec::new(),
    };
    probe.userdata().unwrap_or_default()
}

/// Carry out `steps` in order; what was already gone is a warning.
pub fn execute(nl: &Netlink, steps: Vec<L3Step>, warnings: &mut Vec<String>) -> Vec<Error> {
    let mut errors = Vec::new();
    for step in steps {
        if let Err(e) = one(nl, step, warnings) {
            errors.push(e);
        }
    }
    errors
}

fn one(nl: &Netlink, step: L3Step, warnings: &mut Vec<String>) -> Result<()> {
    match step {
        L3Step::DeleteTable { name, marker } => {
            match nl.nft()?.delete(&name, &userdata_of(&marker)) {
                Ok(_) => Ok(()),
                Err(nft::Error::NotOurs { table, .. }) => {
                    warnings.push(format!(
                        "nftables table {table} no longer carries podtap's marker; left it"
                    ));
                    Ok(())
                }
                Err(e) => Err(nl.nft_err("delete nftables table", &name, e)),
            }
        }
        L3Step::ReaddV6 {
            link,
            delete,
            add,
            routes,
        } => readd_v6(nl, link, &delete, &add, &routes),
        L3Step::DeleteProxy { link, ip } => {
            let msg = RouteNetlinkMessage::DelNeighbour(routing::proxy_neighbour(ip, link));
            gone_ok(nl.batch.request(Request::change(msg)))
                .map_err(|e| nl.err("delete proxy neighbour", ip.to_string(), e))
        }
        L3Step::AddLocal4 { link, ip } => {
            let msg = routing::new_route(routing::local_route(IpAddr::V4(ip), link));
            match nl.batch.request(Request::create(msg)) {
                Err(e) if e.errno() == Some(nix::errno::Errno::EEXIST) => Ok(()),
                r => r.map_err(|e| nl.err("add back the local route of", ip.to_string(), e)),
            }
        }
        L3Step::Sysctls(settings) => sysctl::write(&nl.worker, settings, true),
    }
}

/// Delete `delete`, add `add` back in order, give `routes` their `src` back.
fn readd_v6(
    nl: &Netlink,
    link: u32,
    delete: &[Recorded],
    add: &[Recorded],
    routes: &[Recorded],
) -> Result<()> {
    let on = link.to_string();
    for rec in delete {
        let Some(RouteNetlinkMessage::NewAddress(a)) = rec.message() else {
            continue;
        };
        let msg = RouteNetlinkMessage::DelAddress(a);
        gone_ok(nl.batch.request(Request::change(msg)))
            .map_err(|e| nl.err("delete IPv6 address to restore its local route", &on, e))?;
    }
    for rec in add {
        match replay::restore(&nl.batch, rec) {
            Err(e) if e.errno() == Some(nix::errno::Errno::EEXIST) => {}
            r => r.map_err(|e| nl.err("add back IPv6 address", &on, e))?,
        }
    }
    for rec in routes {
        let Some(RouteNetlinkMessage::NewRoute(r)) = rec.message() else {
            continue;
        };
        // Replace only: a route deleted since attach stays deleted.
        let msg = RouteNetlinkMessage::NewRoute(replay::requestable(r));
        gone_ok(nl.batch.request(Request::with_flags(msg, NLM_F_REPLACE)))
            .map_err(|e| nl.err("give a route its source address back", &on, e))?;
    }
    Ok(())
}

/// `r`, with "already gone" (ENOENT, ENODEV, ESRCH, EADDRNOTAVAIL) as success.
fn gone_ok(
    r: std::result::Result<(), crate::error::KernelError>,
) -> std::result::Result<(), crate::error::KernelError> {
    match r {
        Err(e)
            if is_gone(&e)
                || matches!(
                    e.errno(),
                    Some(nix::errno::Errno::ESRCH | nix::errno::Errno::EADDRNOTAVAIL)
                ) =>
        {
            Ok(())
        }
        r => r,
    }
}

/// Write `value` back to the netns's `proxy_ndp`.
pub fn restore_proxy_ndp(nl: &Netlink, value: String) -> Result<()> {
    sysctl::write(
        &nl.worker,
        vec![(crate::plan::l3::PROXY_NDP.into(), value)],
        true,
    )
}

/// Add what differs in routed wiring to each NIC's problems (`per_nic`, in
/// `plan.nics` order); the nftables table's to the first routed NIC's.
pub fn drift_into(
    nl: &Netlink,
    plan: &Plan,
    created: &[Created],
    links: &Observed,
    per_nic: &mut [NicProblems],
) -> Result<()> {
    let now = observe(nl)?;
    for (nic, found) in plan.nics.iter().zip(per_nic.iter_mut()) {
        let (Some(l3), None) = (&nic.l3, &found.missing) else {
            continue;
        };
        let Some(tap) =
            created_ifindex(created, &nic.tap.name).filter(|i| links.links.contains_key(i))
        else {
            continue;
        };
        let on = |d: Drift| format!("{} (routed, {}): {d}", nic.pod.name, nic.tap.name);
        found
            .drifted
            .extend(drift(l3, nic.pod.ifindex, tap, &now).into_iter().map(on));
    }
    let (Some(netns), Some(first)) = (&plan.l3, plan.nics.iter().position(|n| n.l3.is_some()))
    else {
        return Ok(());
    };
    let table = crate::plan::l3::table(plan, netns)?;
    let state = nl
        .nft()?
        .check(&table)
        .map_err(|e| nl.nft_err("read nftables table", &table.name, e))?;
    let problems = match state {
        nft::State::Unchanged(_) => Vec::new(),
        nft::State::Missing => vec![format!(
            "nftables table inet {} is missing: the guest's source addresses go unchecked",
            table.name
        )],
        nft::State::Foreign(_) => vec![format!(
            "nftables table inet {} no longer carries podtap's marker",
            table.name
        )],
        nft::State::Altered(_, diffs) => diffs
            .into_iter()
            .map(|d| format!("nftables table inet {} was changed: {d}", table.name))
            .collect(),
    };
    if let Some(found) = per_nic.get_mut(first) {
        found.drifted.extend(problems);
    }
    Ok(())
}
