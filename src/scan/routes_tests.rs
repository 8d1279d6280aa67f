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
    routes.reverse();
    let mut want = routes.clone();
    want.sort_by(super::routes::route_order);
    super::parse::sort_routes(&mut routes);
    assert_eq!(routes, want);
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
