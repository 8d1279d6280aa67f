//! What bridge mode must put back on a pod interface, read from the scan's dump.

use rtnetlink::packet_route::neighbour::NeighbourState;
use rtnetlink::packet_route::RouteNetlinkMessage;

use crate::kernel::replay::Recorded;
use crate::plan::PodRestore;
use crate::scan::Dump;

/// Pure: the permanent neighbours of `ifindex` in `dump`.
pub fn from_dump(dump: &Dump, ifindex: u32) -> PodRestore {
    let neighbours = dump
        .neighbours
        .iter()
        .filter(|n| n.header.ifindex == ifindex && n.header.state == NeighbourState::Permanent)
        .map(|n| Recorded::of(&RouteNetlinkMessage::NewNeighbour(n.clone())))
        .collect();
    PodRestore { neighbours }
}
