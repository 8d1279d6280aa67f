//! Have the kernel resolve neighbours now (`NTF_USE`: an ARP request or a
//! neighbour solicitation, as traffic would send) and wait until it has.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use rtnetlink::packet_core::NLM_F_CREATE;
use rtnetlink::packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage};
use rtnetlink::packet_route::RouteNetlinkMessage;

use super::batch::{Batch, Request};
use super::routing::resolve_neighbour;

/// How often the neighbour table is read while waiting.
const POLL: Duration = Duration::from_millis(2);

/// Ask for each `(ip, link)` to be resolved, then wait until the
/// neighbour table has a MAC for every one, or `wait` has passed (a
/// neighbour that does not answer is simply left unresolved). Returns
/// whether all were resolved.
pub fn resolve_neighbours(batch: &Batch, asks: &[(IpAddr, u32)], wait: Duration) -> bool {
    for (ip, link) in asks {
        let msg = RouteNetlinkMessage::NewNeighbour(resolve_neighbour(*ip, *link));
        if let Err(e) = batch.request(Request::with_flags(msg, NLM_F_CREATE)) {
            tracing::debug!("resolving {ip}: {e}");
        }
    }
    let deadline = Instant::now() + wait;
    loop {
        if resolved(batch, asks) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// Whether the neighbour table has a MAC for every `(ip, link)`.
fn resolved(batch: &Batch, asks: &[(IpAddr, u32)]) -> bool {
    let dump = RouteNetlinkMessage::GetNeighbour(NeighbourMessage::default());
    let Ok(mut answers) = batch.dumps(&[dump]) else {
        return false;
    };
    let Some(Ok(entries)) = answers.pop() else {
        return false;
    };
    let known: Vec<(IpAddr, u32)> = entries
        .iter()
        .filter_map(|m| match m {
            RouteNetlinkMessage::NewNeighbour(n) => Some(n),
            _ => None,
        })
        .filter_map(|n| Some((with_mac(n)?, n.header.ifindex)))
        .collect();
    asks.iter().all(|a| known.contains(a))
}

/// The entry's address, when it has a MAC.
fn with_mac(n: &NeighbourMessage) -> Option<IpAddr> {
    let has_mac = n
        .attributes
        .iter()
        .any(|a| matches!(a, NeighbourAttribute::LinkLayerAddress(l) if l.len() == 6));
    has_mac.then_some(())?;
    n.attributes.iter().find_map(|a| match a {
        NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => Some(IpAddr::V4(*v4)),
        NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => Some(IpAddr::V6(*v6)),
        _ => None,
    })
}
