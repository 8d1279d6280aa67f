use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;
use rtnetlink::packet_core::{Emitable, NetlinkMessage};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteMessage, RouteMetric, RouteNextHop,
    RouteNextHopFlags, RouteProtocol, RouteScope, RouteType, RouteVia,
};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};

/// What the raw reader makes of a typed message's bytes (its payload), as
/// rtnetlink's own serializer writes them.
fn read(msg: &RouteMessage) -> RouteState {
    let mut body = vec![0u8; msg.buffer_len()];
    msg.emit(&mut body);
    parse(&body).unwrap_or_default()
}

fn v4(a: u8, b: u8, c: u8, d: u8) -> Ipv4Addr {
    Ipv4Addr::new(a, b, c, d)
}

fn base(family: AddressFamily) -> RouteMessage {
    let mut m = RouteMessage::default();
    m.header.address_family = family;
    m.header.table = 254;
    m.header.protocol = RouteProtocol::Static;
    m.header.scope = RouteScope::Link;
    m.header.kind = RouteType::Unicast;
    m
}

#[test]
fn header_and_plain_attributes_are_read() {
    let mut m = base(AddressFamily::Inet);
    m.header.destination_prefix_length = 24;
    m.header.flags = RouteFlags::Onlink;
    m.attributes = vec![
        RouteAttribute::Destination(RouteAddress::Inet(v4(198, 18, 3, 0))),
        RouteAttribute::Gateway(RouteAddress::Inet(v4(198, 18, 0, 1))),
        RouteAttribute::Oif(7),
        RouteAttribute::Priority(42),
        RouteAttribute::PrefSource(RouteAddress::Inet(v4(198, 18, 0, 2))),
        RouteAttribute::Table(1000),
        RouteAttribute::Metrics(vec![RouteMetric::Hoplimit(9), RouteMetric::Mtu(1400)]),
        RouteAttribute::NhId(5),
    ];
    let r = read(&m);
    assert_eq!(
        r,
        RouteState {
            family: AF_INET,
            destination_len: 24,
            table: 1000,
            protocol: 4,
            scope: 253,
            kind: 1,
            flags: RTNH_F_ONLINK,
            destination: Some(IpAddr::V4(v4(198, 18, 3, 0))),
            gateway: Some(IpAddr::V4(v4(198, 18, 0, 1))),
            oif: Some(7),
            priority: 42,
            source: Some(IpAddr::V4(v4(198, 18, 0, 2))),
            mtu: Some(1400),
            nexthops: Vec::new(),
            nh_id: Some(5),
        }
    );
}

#[test]
fn ipv6_defaults_via_and_the_header_table_are_read() {
    let mut m = base(AddressFamily::Inet6);
    m.header.table = 100;
    m.attributes = vec![RouteAttribute::Via(RouteVia::Inet6(
        "2001:db8::1".parse::<Ipv6Addr>().unwrap(),
    ))];
    let r = read(&m);
    assert_eq!(r.family, AF_INET6);
    assert_eq!(r.table, 100);
    assert_eq!(r.destination, None);
    assert_eq!(r.gateway, Some("2001:db8::1".parse().unwrap()));
    assert_eq!((r.oif, r.priority, r.mtu), (None, 0, None));
}

#[test]
fn multipath_legs_are_read_in_order() {
    let hop = |index, hops, flags, gateway| {
        let mut h = RouteNextHop::default();
        h.interface_index = index;
        h.hops = hops;
        h.flags = flags;
        h.attributes.push(gateway);
        h
    };
    let mut m = base(AddressFamily::Inet);
    m.attributes = vec![RouteAttribute::MultiPath(vec![
        hop(
            2,
            0,
            RouteNextHopFlags::Onlink,
            RouteAttribute::Gateway(RouteAddress::Inet(v4(198, 18, 0, 1))),
        ),
        hop(
            3,
            4,
            RouteNextHopFlags::empty(),
            RouteAttribute::Via(RouteVia::Inet6("2001:db8::9".parse().unwrap())),
        ),
    ])];
    let r = read(&m);
    assert_eq!(
        r.nexthops,
        vec![
            NextHopState {
                ifindex: 2,
                flags: 4,
                hops: 0,
                gateway: Some(IpAddr::V4(v4(198, 18, 0, 1))),
            },
            NextHopState {
                ifindex: 3,
                flags: 0,
                hops: 4,
                gateway: Some("2001:db8::9".parse().unwrap()),
            },
        ]
    );
}

#[test]
fn only_whole_new_route_messages_are_read() {
    let mut nl = NetlinkMessage::from(RouteNetlinkMessage::NewRoute(base(AddressFamily::Inet)));
    nl.finalize();
    let mut frame = vec![0u8; nl.buffer_len()];
    nl.serialize(&mut frame);
    assert_eq!(parse_new(&frame).map(|r| r.family), Some(AF_INET));
    // Another type, a header cut short, a truncated multipath: no panic.
    let mut other = frame.clone();
    other[4] = 16;
    assert_eq!(parse_new(&other), None);
    assert_eq!(parse(&[0u8; RTMSG_LEN - 1]), None);
    let mut cut = base(AddressFamily::Inet);
    cut.attributes = vec![RouteAttribute::Oif(1)];
    let mut body = vec![0u8; cut.buffer_len()];
    cut.emit(&mut body);
    let multipath = RTA_MULTIPATH.to_ne_bytes();
    body.extend_from_slice(&[12, 0, multipath[0], multipath[1], 200, 0, 0, 0, 1, 0, 0, 0]);
    let r = parse(&body).unwrap_or_default();
    assert_eq!((r.oif, r.nexthops.len()), (Some(1), 0));
}
