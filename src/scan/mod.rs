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
use std::sync::mpsc;

use nix::errno::Errno;

use rtnetlink::packet_route::address::AddressMessage;
use rtnetlink::packet_route::neighbour::NeighbourMessage;
use rtnetlink::packet_route::route::{RouteHeader, RouteMessage};
use rtnetlink::packet_route::rule::{RuleAction, RuleMessage};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};

use crate::error::Result;
use crate::kernel::batch::Batch;
use crate::kernel::dump::Piece;
/// The bound on one dump of a pod's tables (routes, rules, neighbours,
/// addresses, next-hop objects), for the whole process: a scan or attach
/// whose dump is larger fails, naming the dump and the bound, before
/// anything is built. The CLI, the CNI plugin and the OCI hook take it
/// from `PODTAP_TABLE_LIMIT_MIB`; a program that calls the library sets it
/// here.
///
/// ```no_run
/// // A pod with a full Internet routing table (about 60 MiB of netlink).
/// podtap::scan::set_table_answer_limit(128 << 20);
/// assert_eq!(podtap::scan::table_answer_limit(), 128 << 20);
/// ```
pub use crate::kernel::dump::{set_table_answer_limit, table_answer_limit, TABLE_ANSWER_LIMIT};
use crate::kernel::netlink::Netlink;
use crate::kernel::netns::NetNs;
use crate::kernel::wire::nexthop;
use crate::kernel::{links, wire};
use crate::model::{Description, NetnsRef, Route, SCHEMA};
pub(crate) use parse::Dump;

/// Scan the netns at `netns` (a pinned file such as `/run/netns/NAME`, or
/// `/proc/PID/ns/net`) into a description, without changing anything.
///
/// The host's own netns is refused unless `allow_host_netns` is set.
/// Blocks the calling thread for the few netlink round trips it takes.
pub fn scan(netns: &Path, allow_host_netns: bool) -> Result<Description> {
    let ns = NetNs::open(netns, allow_host_netns)?;
    scan_ns(&ns)
}

/// Scan an already opened netns.
pub(crate) fn scan_ns(ns: &NetNs) -> Result<Description> {
    scan_ns_with(ns, from_dump)
}

/// [`pod_view`] of the netns `ns` (dumped now).
pub(crate) fn pod_view_ns(ns: &NetNs) -> Result<Description> {
    scan_ns_with(ns, pod_view)
}

fn scan_ns_with(
    ns: &NetNs,
    view: fn(&NetNs, bool, &mut Dump) -> Description,
) -> Result<Description> {
    let nl = Netlink::connect(ns)?;
    let mut dump = dump(&nl)?;
    Ok(view(ns, nl.ipv6_enabled, &mut dump))
}

/// Dump links, addresses, routes (all families, every table), neighbours
/// and policy rules.
///
/// The kernel allows one dump in flight per socket, and a dump on the batch
/// socket costs a few system calls (`kernel::dump`). Rules and routes (most of the work) are
/// dumped by the netns thread on a socket of its own while this thread dumps
/// the rest, and then translates the routes as that thread hands them
/// over, datagram by datagram: two CPUs share the kernel's work and the
/// parse. Links and routes are read raw, by `kernel::wire::link` and
/// `kernel::wire::route` (the one parsers of those messages).
pub(crate) fn dump(nl: &Netlink) -> Result<Dump> {
    let mut beside = vec![("dump IPv4 rules", rules_of(AddressFamily::Inet))];
    if nl.ipv6_enabled {
        beside.push(("dump IPv6 rules", rules_of(AddressFamily::Inet6)));
    }
    let side = nl.side.clone();
    let asked: Vec<RouteNetlinkMessage> = beside.iter().map(|(_, m)| m.clone()).collect();
    let (to_here, handed) = mpsc::channel();
    let (give_back, back) = mpsc::channel();
    let pending = nl
        .worker
        .start(move || dump_beside(&side, &asked, &to_here, &back))?;
    let mut dump = Dump::default();
    dump_here(nl, &mut dump)?;
    // The rules come first: the routes' tables follow from them.
    let rules = match handed.recv() {
        Ok(Handed::Rules(rules)) => rules,
        _ => return Err(gone(nl, pending.wait()?)),
    };
    answered(nl, beside.iter().map(|(what, _)| *what), rules, &mut dump)?;
    let mut routes = routes::Translator::new(&dump.links, &dump.rules);
    for piece in handed {
        match piece {
            Handed::Routes(messages) => {
                routes.add_messages(&messages);
                let _ = give_back.send(messages);
            }
            Handed::Again => routes.clear(),
            Handed::Rules(_) => {}
        }
    }
    dump.routes = routes_read(nl, routes, pending.wait()?)?;
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

/// The error of a netns thread that handed over no rules: its route dump's
/// failure (it is sent the rules before it dumps the routes, so only a
/// thread that ended can fail to).
fn gone(nl: &Netlink, routes: RoutesRead) -> crate::error::Error {
    let failure = match routes {
        Err(e) => crate::kernel::errno::kernel_error(&e),
        Ok(Err(e)) => e.into(),
        Ok(Ok(())) => Errno::EPIPE.into(),
    };
    nl.err("dump routes", "", failure)
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

/// What the netns thread hands the scanning thread while it dumps.
enum Handed {
    /// The answers of the rule dumps, first.
    Rules(Answers),
    /// The messages one datagram of the route dump held (whole, as
    /// `kernel::dump` hands them), in a buffer to give back.
    Routes(Vec<u8>),
    /// The route dump is asked again: the routes handed so far are void.
    Again,
}

/// The answers of several dumps (`Batch::dumps`).
type Answers = std::io::Result<Vec<std::result::Result<Vec<RouteNetlinkMessage>, Errno>>>;

/// How the route dump ended.
type RoutesRead = std::io::Result<std::result::Result<(), Errno>>;

/// On the netns thread: the rule dumps `rules`, then the route dump, all
/// handed to `to` as they are read, each datagram's messages copied into a
/// buffer that came `back` (or a new one). Nothing else runs here while
/// the kernel dumps: its work, in each `recvmsg`, is most of a big scan.
fn dump_beside(
    side: &Batch,
    rules: &[RouteNetlinkMessage],
    to: &mpsc::Sender<Handed>,
    back: &mpsc::Receiver<Vec<u8>>,
) -> RoutesRead {
    // A scan that has gone (its own dumps failed) leaves the sends unheard.
    let _ = to.send(Handed::Rules(side.dumps(rules)));
    side.dump_streamed(
        RouteNetlinkMessage::GetRoute(RouteMessage::default()),
        |piece| match piece {
            Piece::Messages(messages) => {
                let mut buffer = back.try_recv().unwrap_or_default();
                buffer.clear();
                buffer.extend_from_slice(messages);
                let _ = to.send(Handed::Routes(buffer));
            }
            Piece::Again => {
                let _ = to.send(Handed::Again);
            }
        },
    )
}

/// The messages of the dumps `named` into `dump`, or the first failure
/// (named by its dump).
fn answered<'a>(
    nl: &Netlink,
    named: impl Iterator<Item = &'a str>,
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
