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

use std::path::Path;

use futures::TryStreamExt;
use rtnetlink::packet_route::link::LinkExtentMask;
use rtnetlink::packet_route::route::RouteMessage;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::IpVersion;

use crate::error::Result;
use crate::kernel::netlink::Netlink;
use crate::kernel::netns::NetNs;
use crate::model::{Description, NetnsRef, SCHEMA};
pub(crate) use parse::Dump;

/// Scan the netns at `netns` (a pinned file such as `/run/netns/NAME`, or
/// `/proc/PID/ns/net`) into a description, without changing anything.
///
/// The host's own netns is refused unless `allow_host_netns` is set.
/// Blocks the calling thread for the few netlink round trips it takes; it
/// must not be called from inside a tokio runtime (it starts its own).
pub fn scan(netns: &Path, allow_host_netns: bool) -> Result<Description> {
    let ns = NetNs::open(netns, allow_host_netns)?;
    scan_ns(&ns)
}

/// Scan an already opened netns.
pub(crate) fn scan_ns(ns: &NetNs) -> Result<Description> {
    crate::kernel::runtime::block_on(async {
        let nl = Netlink::connect(ns)?;
        let dump = dump(&nl).await?;
        Ok(from_dump(ns, nl.ipv6_enabled, &dump))
    })
}

/// Dump links, addresses, routes (all families, every table) and neighbours.
///
/// The dumps run one after another: the kernel allows one dump in flight per socket.
pub(crate) async fn dump(nl: &Netlink) -> Result<Dump> {
    let h = &nl.handle;
    // No per-link statistics: nothing reads them, and they are most of a dump.
    let links = h
        .link()
        .get()
        .set_filter_mask(AddressFamily::Unspec, vec![LinkExtentMask::SkipStats])
        .execute()
        .try_collect()
        .await
        .map_err(|e| nl.err("dump links", "", e))?;
    let addresses = h
        .address()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| nl.err("dump addresses", "", e))?;
    let routes = h
        .route()
        .get(RouteMessage::default())
        .execute()
        .try_collect()
        .await
        .map_err(|e| nl.err("dump routes", "", e))?;
    let neighbours = h
        .neighbours()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| nl.err("dump neighbours", "", e))?;
    let mut rules: Vec<_> = h
        .rule()
        .get(IpVersion::V4)
        .execute()
        .try_collect()
        .await
        .map_err(|e| nl.err("dump IPv4 rules", "", e))?;
    if nl.ipv6_enabled {
        let v6: Vec<_> = h
            .rule()
            .get(IpVersion::V6)
            .execute()
            .try_collect()
            .await
            .map_err(|e| nl.err("dump IPv6 rules", "", e))?;
        rules.extend(v6);
    }
    Ok(Dump {
        links,
        addresses,
        routes,
        neighbours,
        rules,
    })
}

/// Pure: the description of what a dump of `ns` holds (no attachment yet).
pub(crate) fn from_dump(ns: &NetNs, ipv6_enabled: bool, dump: &Dump) -> Description {
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
