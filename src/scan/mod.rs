//! Read a pod netns into a [`Description`]: one netlink dump per object type.
//!
//! [`scan`] is the read-only entry point. Inside the crate, attach dumps and
//! describes on its own connection, so that it plans from exactly the
//! messages it scanned.

mod names;
pub(crate) mod parse;
#[cfg(test)]
mod parse_tests;
mod routes;
#[cfg(test)]
mod routes_tests;

use std::path::Path;

use nix::errno::Errno;

use rtnetlink::packet_route::address::AddressMessage;
use rtnetlink::packet_route::neighbour::NeighbourMessage;
use rtnetlink::packet_route::route::{RouteHeader, RouteMessage};
use rtnetlink::packet_route::rule::{RuleAction, RuleMessage};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};

use crate::error::Result;
use crate::kernel::dump::Piece;
pub use crate::kernel::dump::TABLE_ANSWER_LIMIT;
use crate::kernel::netlink::Netlink;
use crate::kernel::netns::NetNs;
use crate::kernel::wire::nexthop;
use crate::kernel::{links, wire};
use crate::model::{Description, NetnsRef, Route, SCHEMA};
pub(crate) use parse::Dump;

/// What a scan may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanOptions {
    /// Read the host's own netns too (refused by default).
    pub allow_host_netns: bool,
    /// The most read of one dump of the pod's tables (routes, rules,
    /// neighbours, addresses): [`TABLE_ANSWER_LIMIT`] unless the caller
    /// raises it for a pod with a larger table (a full Internet routing
    /// table is about 60 MiB). Past it the scan fails, naming the dump.
    pub table_answer_limit: usize,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            allow_host_netns: false,
            table_answer_limit: TABLE_ANSWER_LIMIT,
        }
    }
}

/// Scan the netns at `netns` (a pinned file such as `/run/netns/NAME`, or
/// `/proc/PID/ns/net`) into a description, without changing anything.
/// Blocks the calling thread for the few netlink round trips it takes.
pub fn scan(netns: &Path, opts: &ScanOptions) -> Result<Description> {
    let ns = NetNs::open(netns, opts.allow_host_netns)?;
    scan_ns_with(&ns, opts.table_answer_limit, from_dump)
}

/// [`pod_view`] of the netns `ns` (dumped now), reading at most
/// `table_answer_limit` of one table.
pub(crate) fn pod_view_ns(ns: &NetNs, table_answer_limit: usize) -> Result<Description> {
    scan_ns_with(ns, table_answer_limit, pod_view)
}

fn scan_ns_with(
    ns: &NetNs,
    table_answer_limit: usize,
    view: fn(&NetNs, bool, &mut Dump) -> Description,
) -> Result<Description> {
    let mut nl = Netlink::connect(ns)?;
    nl.set_table_answer_limit(table_answer_limit);
    let mut dump = dump(&nl)?;
    Ok(view(ns, nl.ipv6_enabled, &mut dump))
}

/// Dump links, addresses, neighbours, policy rules and routes (all
/// families, every table), one after another on the session's one socket
/// (the kernel allows one dump in flight per socket). Links and routes are
/// read raw, by `kernel::wire::link` and `kernel::wire::route` (the one
/// parsers of those messages), and the routes translated datagram by
/// datagram as the kernel hands them over: a table of 100 000 routes is
/// never held as messages.
pub(crate) fn dump(nl: &Netlink) -> Result<Dump> {
    let mut dump = Dump::default();
    dump_here(nl, &mut dump)?;
    // The rules come first: the routes' tables follow from them.
    let mut rules = vec![("dump IPv4 rules", rules_of(AddressFamily::Inet))];
    if nl.ipv6_enabled {
        rules.push(("dump IPv6 rules", rules_of(AddressFamily::Inet6)));
    }
    let asked: Vec<RouteNetlinkMessage> = rules.iter().map(|(_, m)| m.clone()).collect();
    let answers = nl.batch.dumps(&asked);
    answered(nl, rules.iter().map(|(what, _)| *what), answers, &mut dump)?;
    let mut routes = routes::Translator::new(&dump.links, &dump.rules);
    let done = nl.batch.dump_streamed(
        RouteNetlinkMessage::GetRoute(RouteMessage::default()),
        |piece| match piece {
            Piece::Messages(messages) => routes.add_messages(messages),
            Piece::Again => routes.clear(),
        },
    );
    let routes = routes_read(nl, routes, done)?;
    dump.routes = routes;
    Ok(dump)
}

/// The routes `routes` translated, once the route dump ended as `done`:
/// the answer is refused as unreadable (EBADMSG) if one of its route
/// messages was too short to be one. A route that names a next-hop object
/// and carries nothing of it (the netns's `nexthop_compat_mode` is 0) was
/// held back: it gets the object's gateway, device or legs, from a dump of
/// the objects.
fn routes_read(
    nl: &Netlink,
    mut routes: routes::Translator,
    done: RoutesRead,
) -> Result<Vec<Route>> {
    let io_error =
        |e: std::io::Error| nl.err("dump the netns", "", crate::kernel::errno::kernel_error(&e));
    let done = done.map_err(io_error)?;
    let done = if routes.unreadable() {
        done.and(Err(Errno::EBADMSG))
    } else {
        done
    };
    done.map_err(|e| nl.err("dump routes", "", e))?;
    let mut held = routes.take_held();
    if !held.is_empty() {
        let mut objects = Vec::new();
        nl.batch
            .dump_raw_bytes(
                "next-hop",
                nexthop::RTM_GETNEXTHOP,
                &nexthop::DUMP_REQUEST,
                |frame| objects.extend(nexthop::parse_new(frame)),
            )
            .map_err(io_error)?
            .map_err(|e| nl.err("dump routes", "", e))?;
        nexthop::fill(&mut held, &objects);
        routes.add(&held);
    }
    Ok(routes.into_routes())
}

/// Links, then addresses and neighbours, one after another on the batch
/// socket, into `dump`: a socket error stops them all; a refused dump is
/// reported (before the ones after it) once they have all run.
fn dump_here(nl: &Netlink, dump: &mut Dump) -> Result<()> {
    let here = [
        (
            "dump addresses",
            RouteNetlinkMessage::GetAddress(AddressMessage::default()),
        ),
        (
            "dump neighbours",
            RouteNetlinkMessage::GetNeighbour(NeighbourMessage::default()),
        ),
    ];
    let links = nl.batch.dump_raw(links::dump_request(), |frame| {
        dump.links.extend(wire::link::parse_new(frame));
    });
    let asked: Vec<RouteNetlinkMessage> = here.iter().map(|(_, m)| m.clone()).collect();
    let answers = links.and_then(|links| {
        let rest = nl.batch.dumps(&asked)?;
        Ok(std::iter::once(links.map(|()| Vec::new()))
            .chain(rest)
            .collect())
    });
    let named = std::iter::once("dump links").chain(here.iter().map(|(what, _)| *what));
    answered(nl, named, answers, dump)
}

/// The answers of several dumps (`Batch::dumps`).
type Answers = std::io::Result<Vec<std::result::Result<Vec<RouteNetlinkMessage>, Errno>>>;

/// How the route dump ended.
type RoutesRead = std::io::Result<std::result::Result<(), Errno>>;

/// The messages of the dumps `named` into `dump`, or the first failure
/// (named by its dump).
fn answered(
    nl: &Netlink,
    named: impl Iterator<Item = &'static str>,
    answers: Answers,
    dump: &mut Dump,
) -> Result<()> {
    let answers = answers
        .map_err(|e| nl.err("dump the netns", "", crate::kernel::errno::kernel_error(&e)))?;
    for (what, answer) in named.zip(answers) {
        dump.take(answer.map_err(|e| nl.err(what, "", e))?);
    }
    Ok(())
}

/// The rule dump request of one family, as rtnetlink's `RuleGetRequest` makes it.
fn rules_of(family: AddressFamily) -> RouteNetlinkMessage {
    let mut msg = RuleMessage::default();
    msg.header.family = family;
    msg.header.action = RuleAction::Unspec;
    msg.header.table = RouteHeader::RT_TABLE_UNSPEC;
    RouteNetlinkMessage::GetRule(msg)
}

/// Pure: [`from_dump`] with the pod's tables: the live routes, neighbours
/// and rules minus the routes and neighbours on every podtap attachment's
/// links (TAPs, bridges and macvtaps, each marked `podtap:<id>`: this
/// attachment's and the other attachments' in the netns alike). The one
/// notion of "the pod's tables": what a first attach, a repeated attach,
/// `render --id` and `watch` print and digest.
pub(crate) fn pod_view(ns: &NetNs, ipv6_enabled: bool, dump: &mut Dump) -> Description {
    let mut desc = from_dump(ns, ipv6_enabled, dump);
    let podtap: Vec<&str> = dump
        .links
        .iter()
        .filter(|l| l.alias.as_deref().is_some_and(|a| a.starts_with("podtap:")))
        .map(|l| l.name.as_str())
        .collect();
    let tables = desc.take_tables().without_links(&podtap);
    desc.set_tables(tables);
    desc
}

/// Pure: the description of what a dump of `ns` holds (no attachment yet).
pub(crate) fn from_dump(ns: &NetNs, ipv6_enabled: bool, dump: &mut Dump) -> Description {
    let parsed = parse::parse(dump);
    Description {
        schema: SCHEMA.to_string(),
        netns: NetnsRef {
            path: ns.display(),
            inode: ns.inode(),
            dev: ns.dev(),
        },
        ipv6_enabled,
        interfaces: parsed.interfaces,
        routes: parsed.routes,
        neighbours: parsed.neighbours,
        rules: parsed.rules,
        dns: None,
        attachment: None,
    }
}
