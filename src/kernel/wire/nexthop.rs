//! Next-hop objects (`RTM_NEWNEXTHOP`, Linux 5.3): a route may name one by
//! id (`RTA_NH_ID`) instead of carrying its gateway and device. With the
//! netns's `net.ipv4.nexthop_compat_mode` at 1 (the default) the kernel
//! puts the gateway, device and legs of the object in the route as well; at
//! 0 only the id, and a route read alone says nothing of where it leads.
//! [`fill`] puts in what compat mode would show, from a dump of the objects.
//! rtnetlink's types do not cover these messages: they are read here.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::route::{address, NextHopState, RouteState, AF_INET, RTNH_F_ONLINK};
use super::{attributes, payload, u32_at};

/// `RTM_NEWNEXTHOP`, the type of every message of a next-hop dump.
pub const RTM_NEWNEXTHOP: u16 = 104;
/// `RTM_GETNEXTHOP`, the dump request.
pub const RTM_GETNEXTHOP: u16 = 106;
/// `sizeof(struct nhmsg)`: family, scope, protocol, a pad byte, flags.
const NHMSG_LEN: usize = 8;
/// `sizeof(struct nexthop_grp)`: id, weight, weight_high, a pad.
const NEXTHOP_GRP_LEN: usize = 8;
const NHA_ID: u16 = 1;
const NHA_GROUP: u16 = 2;
const NHA_BLACKHOLE: u16 = 4;
const NHA_OIF: u16 = 5;
const NHA_GATEWAY: u16 = 6;
/// Every netns's loopback device: a blackhole next hop's device.
const LOOPBACK_IFINDEX: u32 = 1;

/// The body of the dump request: a `struct nhmsg` of family `AF_UNSPEC`
/// (every object).
pub const DUMP_REQUEST: [u8; NHMSG_LEN] = [0; NHMSG_LEN];

/// One next-hop object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NextHopObject {
    pub id: u32,
    /// `nh_flags` (`RTNH_F_ONLINK`, ...).
    pub flags: u32,
    pub oif: Option<u32>,
    pub gateway: Option<IpAddr>,
    pub blackhole: bool,
    /// A group's members: their ids and weights less one.
    pub group: Vec<(u32, u16)>,
}

/// The object in one whole message, `None` unless it is an
/// `RTM_NEWNEXTHOP` long enough to be one, with an id.
pub fn parse_new(frame: &[u8]) -> Option<NextHopObject> {
    if super::kind(frame) != RTM_NEWNEXTHOP {
        return None;
    }
    let body = payload(frame);
    let mut nh = NextHopObject {
        flags: u32_at(body.get(..NHMSG_LEN)?, 4)?,
        ..NextHopObject::default()
    };
    for (kind, value, _) in attributes(&body[NHMSG_LEN..]) {
        match kind {
            NHA_ID => nh.id = u32_at(value, 0)?,
            NHA_GROUP => nh.group = members(value),
            NHA_BLACKHOLE => nh.blackhole = true,
            NHA_OIF => nh.oif = u32_at(value, 0),
            NHA_GATEWAY => nh.gateway = address(value),
            _ => {}
        }
    }
    (nh.id != 0).then_some(nh)
}

/// The `struct nexthop_grp` entries of `NHA_GROUP`: the weight less one is
/// `weight`, with `weight_high` above it on kernels that have 16-bit weights
/// (0 before).
fn members(value: &[u8]) -> Vec<(u32, u16)> {
    value
        .chunks_exact(NEXTHOP_GRP_LEN)
        .filter_map(|g| Some((u32_at(g, 0)?, u16::from_le_bytes([g[4], g[5]]))))
        .collect()
}

/// Whether `route` names a next-hop object and carries nothing of it (the
/// netns's compat mode is off).
pub fn needs_object(route: &RouteState) -> bool {
    route.nh_id.is_some()
        && route.gateway.is_none()
        && route.oif.is_none()
        && route.nexthops.is_empty()
}

/// Fill in each route of `routes` that [`needs_object`] as compat mode
/// shows it: a single next hop's gateway, device and onlink flag; a
/// blackhole's device, loopback; a group's members as the legs of a
/// multipath route. A route whose object is gone stays as it was.
pub fn fill(routes: &mut [RouteState], objects: &[NextHopObject]) {
    let by_id: BTreeMap<u32, &NextHopObject> = objects.iter().map(|o| (o.id, o)).collect();
    for route in routes.iter_mut().filter(|r| needs_object(r)) {
        let Some(nh) = route.nh_id.and_then(|id| by_id.get(&id)) else {
            continue;
        };
        // An IPv4 route through a group of one is shown as that member alone
        // (`fib_dump_info` takes its single-path branch); IPv6 shows one leg.
        let single = match nh.group.as_slice() {
            [(id, _)] if route.family == AF_INET => by_id.get(id).copied(),
            [] => Some(*nh),
            _ => None,
        };
        match single {
            Some(one) if one.blackhole => route.oif = Some(LOOPBACK_IFINDEX),
            Some(one) => {
                route.gateway = one.gateway;
                route.oif = one.oif;
                route.flags |= one.flags & RTNH_F_ONLINK;
            }
            None => {
                route.nexthops = nh
                    .group
                    .iter()
                    .filter_map(|(id, weight)| Some(leg(by_id.get(id)?, *weight)))
                    .collect();
            }
        }
    }
}

/// A group member as a multipath leg (`rtnh_hops` holds the low byte of
/// the weight less one, as the kernel writes it for compat mode).
fn leg(member: &NextHopObject, weight: u16) -> NextHopState {
    NextHopState {
        ifindex: member.oif.unwrap_or_default(),
        flags: u8::try_from(member.flags & 0xff).unwrap_or_default(),
        hops: weight.to_le_bytes()[0],
        gateway: member.gateway,
    }
}

#[cfg(test)]
#[path = "nexthop_tests.rs"]
mod tests;
