use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::kernel::wire::push_raw;

/// One attribute: length, type, value, padding.
fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    let len = u16::try_from(4 + value.len()).expect("short");
    let mut a = [len.to_ne_bytes(), kind.to_ne_bytes()].concat();
    a.extend_from_slice(value);
    a.resize((a.len() + 3) & !3, 0);
    a
}

/// An `RTM_NEWNEXTHOP` with `flags` and `attrs`.
fn object(flags: u32, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut body = vec![2, 0, 0, 0];
    body.extend_from_slice(&flags.to_ne_bytes());
    body.extend(attrs.concat());
    let mut frame = Vec::new();
    push_raw(&mut frame, RTM_NEWNEXTHOP, 0, 1, &body);
    frame
}

fn gw(a: [u8; 4]) -> Option<IpAddr> {
    Some(IpAddr::V4(Ipv4Addr::from(a)))
}

#[test]
fn objects_are_read_from_their_attributes() {
    let single = object(
        RTNH_F_ONLINK,
        &[
            attr(NHA_ID, &5u32.to_ne_bytes()),
            attr(NHA_OIF, &3u32.to_ne_bytes()),
            attr(NHA_GATEWAY, &[198, 18, 0, 1]),
        ],
    );
    assert_eq!(
        parse_new(&single),
        Some(NextHopObject {
            id: 5,
            flags: RTNH_F_ONLINK,
            oif: Some(3),
            gateway: gw([198, 18, 0, 1]),
            ..NextHopObject::default()
        })
    );
    // Members 5 (weight 3) and 6 (weight 300: 299 = 43 + 1 * 256).
    let mut members = [5u32.to_ne_bytes(), [2, 0, 0, 0]].concat();
    members.extend([6u32.to_ne_bytes(), [43, 1, 0, 0]].concat());
    let group = object(
        0,
        &[attr(NHA_ID, &7u32.to_ne_bytes()), attr(NHA_GROUP, &members)],
    );
    assert_eq!(
        parse_new(&group).map(|g| g.group),
        Some(vec![(5, 2), (6, 299)])
    );
    let hole = object(
        0,
        &[attr(NHA_ID, &8u32.to_ne_bytes()), attr(NHA_BLACKHOLE, &[])],
    );
    assert!(parse_new(&hole).is_some_and(|h| h.blackhole));
    // No id, a cut header, another message type: none.
    assert_eq!(parse_new(&object(0, &[])), None);
    assert_eq!(parse_new(&single[..20]), None);
    let mut other = single.clone();
    other[4] = 24;
    assert_eq!(parse_new(&other), None);
}

/// Objects 5 and 6 (single), 7 (a group of both), 8 (a blackhole), 12 (a
/// group of one, weight 300).
fn objects() -> Vec<NextHopObject> {
    vec![
        NextHopObject {
            id: 5,
            flags: RTNH_F_ONLINK,
            oif: Some(3),
            gateway: gw([198, 18, 0, 1]),
            ..NextHopObject::default()
        },
        NextHopObject {
            id: 6,
            oif: Some(4),
            gateway: gw([198, 18, 0, 3]),
            ..NextHopObject::default()
        },
        NextHopObject {
            id: 7,
            group: vec![(5, 2), (6, 1)],
            ..NextHopObject::default()
        },
        NextHopObject {
            id: 8,
            blackhole: true,
            ..NextHopObject::default()
        },
        NextHopObject {
            id: 12,
            group: vec![(6, 299)],
            ..NextHopObject::default()
        },
    ]
}

#[test]
fn routes_that_name_an_object_get_what_compat_mode_shows() {
    let objects = objects();
    let named = |id| RouteState {
        nh_id: Some(id),
        ..RouteState::default()
    };
    let legacy = RouteState {
        nh_id: Some(5),
        gateway: gw([198, 18, 0, 9]),
        oif: Some(9),
        ..RouteState::default()
    };
    let mut routes = vec![named(5), named(7), named(8), named(99), legacy.clone()];
    fill(&mut routes, &objects);
    assert_eq!(
        (routes[0].gateway, routes[0].oif),
        (gw([198, 18, 0, 1]), Some(3))
    );
    assert_eq!(routes[0].flags & RTNH_F_ONLINK, RTNH_F_ONLINK);
    let legs: Vec<(u32, u8, Option<IpAddr>)> = routes[1]
        .nexthops
        .iter()
        .map(|h| (h.ifindex, h.hops, h.gateway))
        .collect();
    assert_eq!(
        legs,
        vec![(3, 2, gw([198, 18, 0, 1])), (4, 1, gw([198, 18, 0, 3]))]
    );
    assert_eq!(routes[2].oif, Some(1), "a blackhole's device is loopback");
    assert_eq!(routes[3], named(99), "an object that is gone: as it was");
    assert_eq!(
        routes[4], legacy,
        "a route that carries its next hop: as it was"
    );
}

#[test]
fn a_group_of_one_reads_as_the_kernel_shows_it() {
    let objects = objects();
    let named = |id| RouteState {
        nh_id: Some(id),
        ..RouteState::default()
    };
    // A group of one: IPv4 shows the member alone, IPv6 one leg (its weight's
    // low byte less one: 300 shows as 44).
    let mut v4 = named(12);
    v4.family = crate::kernel::wire::route::AF_INET;
    let mut v6 = named(12);
    v6.family = crate::kernel::wire::route::AF_INET6;
    let mut ones = vec![v4, v6];
    fill(&mut ones, &objects);
    assert_eq!(
        (ones[0].gateway, ones[0].oif),
        (gw([198, 18, 0, 3]), Some(4))
    );
    assert!(ones[0].nexthops.is_empty());
    let leg: Vec<(u32, u8)> = ones[1]
        .nexthops
        .iter()
        .map(|h| (h.ifindex, h.hops))
        .collect();
    assert_eq!(leg, vec![(4, 43)]);
}
