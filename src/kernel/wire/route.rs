//! Route messages (`RTM_NEWROUTE`) as a scan reads them: the header and the
//! attributes a description holds, straight from the bytes.
//!
//! A routing table can hold 100 000 routes. rtnetlink's typed parse made a
//! vector of attributes for each of them (and freed it again), which cost
//! more than the kernel's dump of the table; this reader allocates only for
//! the next hops of a multipath route.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{attributes, payload, u32_at};

/// `RTM_NEWROUTE`, the type of every message of a route dump.
pub const RTM_NEWROUTE: u16 = 24;
/// `RTM_F_CLONED` in `rtm_flags`: a cached clone, not a route of a table.
pub const RTM_F_CLONED: u32 = 0x200;
/// `RTNH_F_ONLINK`, in `rtm_flags` and in a next hop's `rtnh_flags`.
pub const RTNH_F_ONLINK: u32 = 4;
/// `AF_INET`, `AF_INET6` as `rtm_family` holds them.
pub const AF_INET: u8 = 2;
pub const AF_INET6: u8 = 10;

/// `sizeof(struct rtmsg)`.
const RTMSG_LEN: usize = 12;
/// `sizeof(struct rtnexthop)`.
const RTNEXTHOP_LEN: usize = 8;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_PREFSRC: u16 = 7;
const RTA_METRICS: u16 = 8;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
const RTA_VIA: u16 = 18;
const RTA_NH_ID: u16 = 30;
/// `RTAX_MTU`, inside `RTA_METRICS`.
const RTAX_MTU: u16 = 2;

/// One route of a dump, as far as a description needs it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteState {
    /// `rtm_family` ([`AF_INET`], [`AF_INET6`], or another).
    pub family: u8,
    /// `rtm_dst_len`.
    pub destination_len: u8,
    /// `RTA_TABLE`, else `rtm_table`.
    pub table: u32,
    /// `rtm_protocol`, `rtm_scope`, `rtm_type` and `rtm_flags`.
    pub protocol: u8,
    pub scope: u8,
    pub kind: u8,
    pub flags: u32,
    /// `RTA_DST`; `None` for a default route.
    pub destination: Option<IpAddr>,
    /// `RTA_GATEWAY` or `RTA_VIA`, whichever comes last.
    pub gateway: Option<IpAddr>,
    /// `RTA_OIF`.
    pub oif: Option<u32>,
    /// `RTA_PRIORITY` (0 without one).
    pub priority: u32,
    /// `RTA_PREFSRC`.
    pub source: Option<IpAddr>,
    /// `RTAX_MTU` of `RTA_METRICS`.
    pub mtu: Option<u32>,
    /// The legs of `RTA_MULTIPATH`, else empty.
    pub nexthops: Vec<NextHopState>,
    /// `RTA_NH_ID`: the next-hop object the route uses (`super::nexthop`).
    pub nh_id: Option<u32>,
}

/// One leg of a multipath route (`struct rtnexthop` and its gateway).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NextHopState {
    pub ifindex: u32,
    /// `rtnh_flags`.
    pub flags: u8,
    /// `rtnh_hops`: the weight less one.
    pub hops: u8,
    /// `RTA_GATEWAY` or `RTA_VIA` of the leg.
    pub gateway: Option<IpAddr>,
}

/// The [`RouteState`] of one whole message, `None` unless it is an
/// `RTM_NEWROUTE` long enough to be one.
pub fn parse_new(frame: &[u8]) -> Option<RouteState> {
    (super::kind(frame) == RTM_NEWROUTE)
        .then(|| parse(payload(frame)))
        .flatten()
}

/// The [`RouteState`] of one `RTM_NEWROUTE` payload (`struct rtmsg` and its
/// attributes); `None` when it is too short to be one.
pub fn parse(body: &[u8]) -> Option<RouteState> {
    let header = body.get(..RTMSG_LEN)?;
    let mut r = RouteState {
        family: header[0],
        destination_len: header[1],
        table: u32::from(header[4]),
        protocol: header[5],
        scope: header[6],
        kind: header[7],
        flags: u32_at(header, 8)?,
        ..RouteState::default()
    };
    for (kind, value, _) in attributes(&body[RTMSG_LEN..]) {
        match kind {
            RTA_DST => r.destination = address(value),
            RTA_GATEWAY => r.gateway = address(value),
            RTA_VIA => r.gateway = via(value),
            RTA_OIF => r.oif = u32_at(value, 0),
            RTA_PRIORITY => r.priority = u32_at(value, 0).unwrap_or_default(),
            RTA_PREFSRC => r.source = address(value),
            RTA_TABLE => r.table = u32_at(value, 0).unwrap_or(r.table),
            RTA_METRICS => r.mtu = metric_mtu(value),
            RTA_MULTIPATH => r.nexthops = next_hops(value),
            RTA_NH_ID => r.nh_id = u32_at(value, 0),
            _ => {}
        }
    }
    Some(r)
}

/// An address attribute's value: 4 bytes are IPv4, 16 IPv6.
pub(super) fn address(value: &[u8]) -> Option<IpAddr> {
    if let Ok(v4) = <[u8; 4]>::try_from(value) {
        return Some(IpAddr::V4(Ipv4Addr::from(v4)));
    }
    <[u8; 16]>::try_from(value)
        .ok()
        .map(|v6| IpAddr::V6(Ipv6Addr::from(v6)))
}

/// `struct rtvia`: a 2-byte family, then the address.
fn via(value: &[u8]) -> Option<IpAddr> {
    address(value.get(2..)?)
}

fn metric_mtu(nested: &[u8]) -> Option<u32> {
    attributes(nested).find_map(|(kind, value, _)| match kind {
        RTAX_MTU => u32_at(value, 0),
        _ => None,
    })
}

/// The `struct rtnexthop`s of `RTA_MULTIPATH`, each followed by its own
/// attributes, up to the first that does not fit.
fn next_hops(mut rest: &[u8]) -> Vec<NextHopState> {
    let mut hops = Vec::new();
    while let Some(head) = rest.get(..RTNEXTHOP_LEN) {
        let len = usize::from(u16::from_ne_bytes([head[0], head[1]]));
        let Some(attrs) = rest.get(RTNEXTHOP_LEN..len) else {
            break;
        };
        let mut hop = NextHopState {
            ifindex: u32_at(head, 4).unwrap_or_default(),
            flags: head[2],
            hops: head[3],
            gateway: None,
        };
        for (kind, value, _) in attributes(attrs) {
            match kind {
                RTA_GATEWAY => hop.gateway = address(value),
                RTA_VIA => hop.gateway = via(value),
                _ => {}
            }
        }
        hops.push(hop);
        rest = rest
            .get(((len + 3) & !3).min(rest.len())..)
            .unwrap_or_default();
    }
    hops
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;
