//! Unit tests of the route helpers: the sort order, the address text.

use std::net::{IpAddr, Ipv4Addr};

#[test]
fn routes_sort_stably_by_family_destination_metric_interface_gateway() {
    let mut routes = crate::render::samples::pod().routes;
    let mut tied = routes.clone();
    for r in &mut tied {
        r.protocol = "boot".into(); // not part of the order: ties keep their input order
    }
    routes.extend(tied);
    assert_sorted_as_sort_by_sorts(routes);
}

/// `sort_routes` of `routes`, reversed, is what `sort_by(route_order)` makes.
fn assert_sorted_as_sort_by_sorts(mut routes: Vec<crate::model::Route>) {
    routes.reverse();
    let mut want = routes.clone();
    want.sort_by(super::routes::route_order);
    assert_eq!(super::routes::sort_routes(routes), want);
}

#[test]
fn routes_sort_as_their_full_destinations_do_past_sixteen_bytes() {
    let mut routes = crate::render::samples::pod().routes;
    let base = routes[0].clone();
    for dest in [
        "255.255.255.254/32",
        "255.255.255.255/31",
        "255.255.255.25/32",
        "255.255.255.255/32",
        "2001:db8:0:0:1::/80",
        "2001:db8:0:0:1::/8",
        "10.0.0.0/8",
        "10.0.0.0/8",
    ] {
        let mut r = base.clone();
        r.destination = dest.into();
        r.metric = u32::try_from(routes.len()).unwrap() % 3;
        routes.push(r);
    }
    assert_sorted_as_sort_by_sorts(routes);
}

#[test]
fn a_permutation_is_applied_in_place() {
    let mut items = vec!['a', 'b', 'c', 'd', 'e', 'f'];
    let mut order = vec![3, 0, 4, 1, 2, 5];
    super::routes::permute(&mut items, &mut order);
    assert_eq!(items, vec!['d', 'a', 'e', 'b', 'c', 'f']);
    assert_eq!(order, vec![0, 1, 2, 3, 4, 5]);
}

#[test]
fn addresses_are_written_as_display_writes_them() {
    for ip in [
        "0.0.0.0",
        "9.10.99.100",
        "255.255.255.255",
        "198.18.0.1",
        "2001:db8::1",
    ] {
        let ip: IpAddr = ip.parse().unwrap();
        assert_eq!(super::routes::ip_text(ip), ip.to_string());
    }
    for o in 0..=255u8 {
        let ip = IpAddr::V4(Ipv4Addr::new(o, 0, o, 7));
        assert_eq!(super::routes::ip_text(ip), ip.to_string());
    }
}

/// A route of `table` to `dest` (IPv4) via 198.18.0.1 on ifindex 2, as a
/// dump reads it.
fn read(
    dest: [u8; 4],
    len: u8,
    table: u32,
    priority: u32,
) -> crate::kernel::wire::route::RouteState {
    use crate::kernel::wire::route::{RouteState, AF_INET};
    RouteState {
        family: AF_INET,
        destination_len: len,
        table,
        kind: 1,
        destination: Some(IpAddr::V4(Ipv4Addr::from(dest))),
        gateway: Some(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1))),
        oif: Some(2),
        priority,
        ..RouteState::default()
    }
}

/// Translated a datagram at a time, the routes come out of the pod's
/// tables only, sorted across datagrams as one sort of them all would
/// sort them (ties in the order they came), and what a dump asked again
/// voided is gone.
#[test]
fn translated_routes_are_the_pod_tables_sorted_across_datagrams() {
    use rtnetlink::packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};
    let links = vec![crate::kernel::wire::link::LinkState {
        ifindex: 2,
        name: "eth0".into(),
        ..Default::default()
    }];
    let mut to_100 = RuleMessage::default();
    to_100.header.family = rtnetlink::packet_route::AddressFamily::Inet;
    to_100.header.action = RuleAction::ToTable;
    to_100.attributes.push(RuleAttribute::Priority(100));
    to_100.attributes.push(RuleAttribute::Table(100));
    let mut t = super::routes::Translator::new(&links, &[to_100]);
    t.add(&[read([10, 0, 0, 9], 32, 254, 0)]);
    t.clear();
    let datagrams = [
        vec![
            read([10, 0, 0, 1], 32, 254, 0),
            read([10, 0, 0, 10], 32, 254, 5),
        ],
        vec![
            read([10, 0, 0, 2], 32, 100, 0),
            read([10, 0, 0, 3], 32, 101, 0),
        ],
        vec![
            read([10, 0, 0, 10], 32, 100, 5),
            read([9, 0, 0, 0], 8, 254, 0),
        ],
    ];
    for d in &datagrams {
        t.add(d);
    }
    let got: Vec<(String, u32)> = t
        .into_routes()
        .into_iter()
        .map(|r| (r.destination, r.table))
        .collect();
    let want = [
        ("10.0.0.1/32", 254),
        ("10.0.0.10/32", 254),
        ("10.0.0.10/32", 100),
        ("10.0.0.2/32", 100),
        ("9.0.0.0/8", 254),
    ];
    let want: Vec<(String, u32)> = want.iter().map(|(d, t)| (d.to_string(), *t)).collect();
    assert_eq!(got, want, "table 101 has no rule; 10.0.0.9 was voided");
}
