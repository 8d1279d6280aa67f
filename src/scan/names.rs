//! iproute2's names for the kernel's numbers (link operational states, scopes,
//! protocols, route types, neighbour states).

use rtnetlink::packet_route::neighbour::NeighbourState;

use crate::model::Name;

/// The name of a link's `IFLA_OPERSTATE` (RFC 2863 `IF_OPER_*`, as
/// iproute2 shows it); "UNKNOWN" when the kernel sent none, the number when
/// it is one this table does not know.
pub fn oper_state_name(state: Option<u8>) -> String {
    let name = match state.unwrap_or(0) {
        0 => "UNKNOWN",
        1 => "NOTPRESENT",
        2 => "DOWN",
        3 => "LOWERLAYERDOWN",
        4 => "TESTING",
        5 => "DORMANT",
        6 => "UP",
        n => return n.to_string(),
    };
    name.into()
}

/// iproute2's names for `rtm_scope` / `ifa_scope`.
pub fn scope_name(scope: u8) -> Name {
    let name = match scope {
        0 => "global",
        200 => "site",
        253 => "link",
        254 => "host",
        255 => "nowhere",
        n => return Name::Owned(n.to_string()),
    };
    Name::Borrowed(name)
}

/// iproute2's names for `rtm_protocol` (rt_protos).
pub fn protocol_name(proto: u8) -> Name {
    let name = match proto {
        0 => "unspec",
        1 => "redirect",
        2 => "kernel",
        3 => "boot",
        4 => "static",
        8 => "gated",
        9 => "ra",
        10 => "mrt",
        11 => "zebra",
        12 => "bird",
        13 => "dnrouted",
        14 => "xorp",
        15 => "ntk",
        16 => "dhcp",
        17 => "keepalived",
        42 => "babel",
        99 => "openr",
        186 => "bgp",
        187 => "isis",
        188 => "ospf",
        189 => "rip",
        192 => "eigrp",
        n => return Name::Owned(n.to_string()),
    };
    name.into()
}

/// iproute2's names for `rtm_type`.
pub fn type_name(kind: u8) -> Name {
    let name = match kind {
        0 => "none",
        1 => "unicast",
        2 => "local",
        3 => "broadcast",
        4 => "anycast",
        5 => "multicast",
        6 => "blackhole",
        7 => "unreachable",
        8 => "prohibit",
        9 => "throw",
        10 => "nat",
        11 => "xresolve",
        n => return Name::Owned(n.to_string()),
    };
    name.into()
}

pub fn neighbour_state(state: NeighbourState) -> String {
    match state {
        NeighbourState::Incomplete => "incomplete".into(),
        NeighbourState::Reachable => "reachable".into(),
        NeighbourState::Stale => "stale".into(),
        NeighbourState::Delay => "delay".into(),
        NeighbourState::Probe => "probe".into(),
        NeighbourState::Failed => "failed".into(),
        NeighbourState::Noarp => "noarp".into(),
        NeighbourState::Permanent => "permanent".into(),
        NeighbourState::None => "none".into(),
        NeighbourState::Other(n) => n.to_string(),
        _ => "unknown".into(),
    }
}
