//! Unit tests of the route helpers: the sort order, the address text.

use std::net::{IpAddr, Ipv4Addr};

#[test]
fn routes_sort_stably_by_family_destination_metric_interface_gateway() {
    let mut routes = crate::render::fixture::pod().routes;
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
    super::routes::sort_routes(&mut routes);
    assert_eq!(routes, want);
}

#[test]
fn routes_sort_as_their_full_destinations_do_past_sixteen_bytes() {
    let mut routes = crate::render::fixture::pod().routes;
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
