//! Unit tests: dump messages (links as `kernel::wire::link` reads them) →
//! model, model → JSON.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rtnetlink::packet_core::Emitable;
use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};
use rtnetlink::packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteMessage, RouteMetric, RouteNextHop,
    RouteProtocol, RouteScope,
};
use rtnetlink::packet_route::AddressFamily;

use super::parse::{parse, Dump};
use super::routes::Translator;
use crate::kernel::mac::MacAddr;
use crate::kernel::wire::link::{LinkState, ARPHRD_ETHER, ARPHRD_LOOPBACK};
use crate::kernel::wire::route::RouteState;
use crate::model::{Family, LinkKind};

/// A link as `kernel::wire::link` reads it from a dump: up, MTU 1500,
/// operationally up, with a MAC when it is Ethernet (else a loopback).
fn link(index: u32, name: &str, kind: Option<&str>, ether: bool) -> LinkState {
    LinkState {
        ifindex: index,
        link_type: if ether { ARPHRD_ETHER } else { ARPHRD_LOOPBACK },
        up: true,
        loopback: !ether,
        name: name.into(),
        mtu: 1500,
        // IF_OPER_UP
        oper_state: Some(6),
        mac: ether.then(|| MacAddr([0x0e, 0, 0, 0, 0, u8::try_from(index).unwrap_or(0xff)])),
        kind: kind.map(str::to_string),
        ..LinkState::default()
    }
}

fn addr(index: u32, ip: IpAddr, len: u8, flags: AddressFlags) -> AddressMessage {
    let mut m = AddressMessage::default();
    m.header.index = index;
    m.header.prefix_len = len;
    m.header.family = if ip.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    m.attributes.push(AddressAttribute::Local(ip));
    m.attributes.push(AddressAttribute::Address(ip));
    m.attributes.push(AddressAttribute::Flags(flags));
    m
}

fn route(
    family: AddressFamily,
    dst: Option<(IpAddr, u8)>,
    gw: Option<IpAddr>,
    oif: Option<u32>,
) -> RouteMessage {
    let mut m = RouteMessage::default();
    m.header.address_family = family;
    m.header.table = 254;
    m.header.protocol = RouteProtocol::Static;
    m.header.scope = RouteScope::Universe;
    m.header.kind = rtnetlink::packet_route::route::RouteType::Unicast;
    if let Some((d, len)) = dst {
        m.header.destination_prefix_length = len;
        m.attributes.push(RouteAttribute::Destination(d.into()));
    }
    if let Some(g) = gw {
        m.attributes
            .push(RouteAttribute::Gateway(RouteAddress::from(g)));
    }
    if let Some(o) = oif {
        m.attributes.push(RouteAttribute::Oif(o));
    }
    m
}

/// A typed route message as `kernel::wire::route` reads its bytes.
fn as_read(msg: &RouteMessage) -> RouteState {
    let mut body = vec![0u8; msg.buffer_len()];
    msg.emit(&mut body);
    crate::kernel::wire::route::parse(&body).unwrap_or_default()
}

/// The sample's routes: onlink default, one with an MTU and a metric, a
/// multipath, a device-only IPv6 route, and a default in table 100.
fn sample_routes() -> Vec<RouteMessage> {
    let gw = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
    let mut onlink = route(
        AddressFamily::Inet,
        None,
        Some(IpAddr::V4(Ipv4Addr::new(169, 254, 1, 1))),
        Some(2),
    );
    onlink.header.flags = RouteFlags::Onlink;
    let mut mtu = route(
        AddressFamily::Inet,
        Some(("198.19.0.0".parse().unwrap(), 16)),
        Some(gw),
        Some(2),
    );
    mtu.attributes
        .push(RouteAttribute::Metrics(vec![RouteMetric::Mtu(1400)]));
    mtu.attributes.push(RouteAttribute::Priority(10));
    let mut multipath = route(
        AddressFamily::Inet,
        Some(("198.20.0.0".parse().unwrap(), 24)),
        None,
        None,
    );
    let hop = |idx, g: Ipv4Addr, hops| {
        let mut h = RouteNextHop::default();
        h.interface_index = idx;
        h.hops = hops;
        h.attributes
            .push(RouteAttribute::Gateway(RouteAddress::Inet(g)));
        h
    };
    multipath.attributes.push(RouteAttribute::MultiPath(vec![
        hop(2, Ipv4Addr::new(198, 18, 0, 1), 0),
        hop(3, Ipv4Addr::new(198, 18, 1, 1), 1),
    ]));
    let dev_only6 = route(
        AddressFamily::Inet6,
        Some(("2001:db8:99::".parse().unwrap(), 64)),
        None,
        Some(2),
    );
    let mut other_table = route(AddressFamily::Inet, None, Some(gw), Some(2));
    other_table.header.table = 100;
    vec![dev_only6, multipath, mtu, onlink, other_table]
}

/// The sample's neighbours: a permanent one and a stale one on ifindex 2.
fn sample_neighbours() -> Vec<NeighbourMessage> {
    let mut neigh = NeighbourMessage::default();
    neigh.header.family = AddressFamily::Inet;
    neigh.header.ifindex = 2;
    neigh.header.state = NeighbourState::Permanent;
    neigh
        .attributes
        .push(NeighbourAttribute::Destination(NeighbourAddress::Inet(
            Ipv4Addr::new(198, 18, 0, 9),
        )));
    neigh
        .attributes
        .push(NeighbourAttribute::LinkLayerAddress(vec![2, 0, 0, 0, 0, 9]));
    let mut stale = neigh.clone();
    stale.header.state = NeighbourState::Stale;
    stale.attributes[0] =
        NeighbourAttribute::Destination(NeighbourAddress::Inet(Ipv4Addr::new(198, 18, 0, 7)));
    vec![neigh, stale]
}

fn sample() -> Dump {
    let v4 = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2));
    let v4b = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 3));
    let ll: IpAddr = "fe80::1".parse().unwrap();
    let links = vec![
        link(3, "net1", Some("macvlan"), true),
        link(1, "lo", None, false),
        link(2, "eth0", Some("veth"), true),
        link(4, "tap0", Some("tun"), true),
        link(5, "nk0", Some("netkit"), true),
    ];
    // As a scan hands them over: one datagram's routes at a time.
    let mut routes = Translator::new(&links, &[]);
    for route in sample_routes() {
        routes.add(&[as_read(&route)]);
    }
    Dump {
        links,
        addresses: vec![
            addr(2, v4, 24, AddressFlags::Permanent),
            addr(
                2,
                v4b,
                24,
                AddressFlags::Permanent | AddressFlags::Secondary,
            ),
            addr(2, ll, 64, AddressFlags::Permanent | AddressFlags::Tentative),
        ],
        routes: routes.into_routes(),
        neighbours: sample_neighbours(),
        rules: vec![],
    }
}

#[test]
fn links_are_classified_sorted_and_marked_eligible() {
    let p = parse(&mut sample());
    let names: Vec<_> = p
        .interfaces
        .iter()
        .map(|i| (i.name.as_str(), i.kind, i.eligible))
        .collect();
    assert_eq!(
        names,
        [
            ("lo", LinkKind::Loopback, false),
            ("eth0", LinkKind::Veth, true),
            ("net1", LinkKind::Macvlan, true),
            ("tap0", LinkKind::Tap, false),
            ("nk0", LinkKind::Other, true),
        ]
    );
    let nk = &p.interfaces[4];
    assert_eq!(nk.kind_raw.as_deref(), Some("netkit"));
    let eth0 = &p.interfaces[1];
    assert_eq!(eth0.guest_mac, eth0.mac);
    assert_eq!(eth0.oper_state, "UP");
}

#[test]
fn addresses_keep_order_and_flags() {
    let p = parse(&mut sample());
    let eth0 = &p.interfaces[1];
    assert_eq!(
        eth0.addresses,
        ["198.18.0.2/24", "198.18.0.3/24", "fe80::1/64"]
    );
    let ll = &eth0.address_details[2];
    assert!(ll.link_local && ll.tentative && !ll.deprecated);
    assert_eq!(ll.family, Family::Inet6);
}

#[test]
fn routes_keep_onlink_mtu_metric_multipath_and_device_only_v6() {
    let p = parse(&mut sample());
    assert_eq!(p.routes.len(), 4, "the table-100 route is not in main");
    let default = p
        .routes
        .iter()
        .find(|r| r.destination == "0.0.0.0/0")
        .unwrap();
    assert!(default.onlink);
    assert_eq!(default.gateway.as_deref(), Some("169.254.1.1"));
    let mtu = p
        .routes
        .iter()
        .find(|r| r.destination == "198.19.0.0/16")
        .unwrap();
    assert_eq!(
        (mtu.mtu, mtu.metric, mtu.protocol.as_ref()),
        (Some(1400), 10, "static")
    );
    let mp = p
        .routes
        .iter()
        .find(|r| r.destination == "198.20.0.0/24")
        .unwrap();
    assert_eq!(mp.interface, None);
    assert_eq!(mp.nexthops.len(), 2);
    assert_eq!(
        (mp.nexthops[1].interface.as_str(), mp.nexthops[1].weight),
        ("net1", 2)
    );
    let v6 = p.routes.iter().find(|r| r.family == Family::Inet6).unwrap();
    assert_eq!(
        (v6.destination.as_str(), v6.gateway.as_deref()),
        ("2001:db8:99::/64", None)
    );
    assert_eq!(v6.interface.as_deref(), Some("eth0"));
    let families: Vec<_> = p.routes.iter().map(|r| r.family).collect();
    assert!(families.windows(2).all(|w| w[0] <= w[1]), "IPv4 first");
}

#[test]
fn neighbours_are_static_or_gateway_only() {
    let p = parse(&mut sample());
    assert_eq!(p.neighbours.len(), 1);
    assert_eq!(p.neighbours[0].state, "permanent");
    assert_eq!(p.neighbours[0].mac, "02:00:00:00:00:09");
}

#[test]
fn model_serialises_with_contract_names_and_round_trips() {
    let p = parse(&mut sample());
    let json = serde_json::to_value(&p.routes[0]).unwrap();
    for key in [
        "destination",
        "interface",
        "metric",
        "onlink",
        "scope",
        "protocol",
        "family",
        "type",
    ] {
        assert!(json.get(key).is_some(), "route lacks {key}: {json}");
    }
    let iface = serde_json::to_value(&p.interfaces[1]).unwrap();
    for key in [
        "name",
        "ifindex",
        "kind",
        "mac",
        "mtu",
        "addresses",
        "eligible",
        "guest_mac",
    ] {
        assert!(iface.get(key).is_some(), "interface lacks {key}");
    }
    assert_eq!(iface["kind"], "veth");
    let back: crate::model::Interface = serde_json::from_value(iface).unwrap();
    assert_eq!(back, p.interfaces[1]);
    let v6: IpAddr = Ipv6Addr::UNSPECIFIED.into();
    assert!(v6.is_ipv6());
}

#[test]
fn stacked_links_mark_their_lower_and_groups_are_collected() {
    let mut mv = link(5, "mv0", Some("macvlan"), true);
    mv.lower = Some(2);
    (mv.group, mv.has_group) = (7, true);
    // A macvlan whose parent is in another netns names no lower here.
    let mut remote = link(6, "mv1", Some("macvlan"), true);
    remote.lower = Some(2);
    remote.link_netnsid = Some(0);
    let mut lower = remote.clone();
    lower.ifindex = 7;
    (lower.lower, lower.link_netnsid) = (None, None);
    // A veth peer in the same netns is not a stacked link.
    let mut veth = link(3, "v1", Some("veth"), true);
    veth.lower = Some(4);
    let links = [mv, remote, lower, veth];
    assert_eq!(
        super::parse::stacked_lowers(&links)
            .into_iter()
            .collect::<Vec<_>>(),
        [2]
    );
    assert_eq!(
        super::parse::link_groups(&links)
            .into_iter()
            .collect::<Vec<_>>(),
        [7]
    );
}

#[test]
fn an_administratively_down_interface_is_not_attached() {
    let mut down = link(3, "net9", Some("veth"), true);
    down.up = false;
    let mut dump = Dump {
        links: vec![link(2, "eth0", Some("veth"), true), down],
        ..Dump::default()
    };
    let parsed = parse(&mut dump);
    let net9 = parsed.interfaces.iter().find(|i| i.name == "net9").unwrap();
    assert!(!net9.eligible);
    assert!(net9
        .ineligible_reason
        .as_deref()
        .unwrap()
        .contains("administratively down"));
    assert!(net9.guest_mac.is_none());
    assert!(parsed
        .interfaces
        .iter()
        .any(|i| i.name == "eth0" && i.eligible));
}

#[test]
fn the_kernels_default_rules_are_left_out_and_rule_tables_kept() {
    use rtnetlink::packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};
    let rule = |prio: u32, table: u32, from: Option<&str>| {
        let mut r = RuleMessage::default();
        r.header.family = AddressFamily::Inet;
        r.header.action = RuleAction::ToTable;
        r.attributes.push(RuleAttribute::Priority(prio));
        r.attributes.push(RuleAttribute::Table(table));
        if let Some(f) = from {
            r.header.src_len = 24;
            r.attributes.push(RuleAttribute::Source(f.parse().unwrap()));
        }
        r
    };
    let mut dump = Dump {
        links: vec![link(2, "eth0", Some("veth"), true)],
        rules: vec![
            rule(0, 255, None),
            rule(32766, 254, None),
            rule(32767, 253, None),
            rule(100, 100, Some("198.18.0.0")),
        ],
        ..Dump::default()
    };
    let parsed = parse(&mut dump);
    assert_eq!(parsed.rules.len(), 1, "{:?}", parsed.rules);
    assert_eq!(parsed.rules[0].from.as_deref(), Some("198.18.0.0/24"));
    assert_eq!(parsed.rules[0].table, Some(100));
    assert_eq!(parsed.rules[0].action, "table");
}

#[test]
fn kinds_operstates_ports_and_markers_read_from_the_link_view() {
    use super::names::oper_state_name;
    use super::parse::classify;
    assert_eq!(classify(Some("tun"), true, false), LinkKind::Tap);
    assert_eq!(classify(Some("tun"), false, false), LinkKind::Tun);
    assert_eq!(classify(None, false, true), LinkKind::Loopback);
    assert_eq!(classify(None, true, false), LinkKind::Physical);
    assert_eq!(
        [None, Some(2), Some(6), Some(9)].map(oper_state_name),
        ["UNKNOWN", "DOWN", "UP", "9"]
    );
    // A port of podtap's bridge, and podtap's own macvtap.
    let mut bridge = link(4, "br0", Some("bridge"), true);
    bridge.alias = Some("podtap:pod-1 bridge".into());
    let mut port = link(2, "eth0", Some("veth"), true);
    port.controller = Some(4);
    let mut mvt = link(5, "mvt0", Some("macvtap"), true);
    mvt.alias = Some("podtap:pod-1 nic 0".into());
    let p = parse(&mut Dump {
        links: vec![bridge, port, mvt],
        ..Dump::default()
    });
    let eth0 = &p.interfaces[0];
    assert_eq!(eth0.controller.as_deref(), Some("br0"));
    assert_eq!(
        eth0.ineligible_reason.as_deref(),
        Some("enslaved to br0, the bridge of podtap sandbox pod-1 (detach it first)")
    );
    assert_eq!(
        p.interfaces[2].ineligible_reason.as_deref(),
        Some("podtap's own link for sandbox pod-1")
    );
}
