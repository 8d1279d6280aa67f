//! Descriptions built in code for the renderer tests.

use crate::model::{
    Address, Attachment, Description, Family, Interface, LinkKind, Neighbour, NetnsRef, NextHop,
    Route, TapInfo, Timings, Wiring, SCHEMA,
};

/// A dual-stack pod after `attach`:
/// - `lo` (no TAP);
/// - `eth0`: veth, MTU 1400, 10.244.1.5/24 + fd00:10:244:1::5/64 + a
///   link-local, TAP `tap0` with 1 queue, guest MAC in upper case;
/// - `net1`: macvlan, MTU 9000, 192.168.50.10/24, TAP `tap1` with 4 queues,
///   no guest MAC (falls back to `mac`);
/// - `eth9`: veth without a TAP.
///
/// Routes: onlink default via 169.254.1.1, a route with `mtu 1300`, a
/// device-only route per NIC, IPv6 default, a multipath route over both NICs,
/// and the kernel/link-local/multicast routes a renderer must skip.
pub(crate) fn pod() -> Description {
    Description {
        schema: SCHEMA.to_string(),
        netns: NetnsRef {
            path: "/var/run/netns/pod".into(),
            inode: 4026532000,
            dev: 4,
        },
        ipv6_enabled: true,
        interfaces: pod_interfaces(),
        routes: pod_routes(),
        neighbours: pod_neighbours(),
        rules: vec![],
        dns: None,
        attachment: Some(Attachment {
            id: "pod-1".into(),
            mode: Wiring::Tc,
            timings_us: Timings::default(),
            revision: 0,
        }),
    }
}

/// [`pod`]'s interfaces.
fn pod_interfaces() -> Vec<Interface> {
    vec![
        interface("lo", LinkKind::Loopback, 65536, &["127.0.0.1/8"], None),
        Interface {
            mac: Some("02:00:00:00:00:01".into()),
            guest_mac: Some("0A:58:0A:F4:01:05".into()),
            ..interface(
                "eth0",
                LinkKind::Veth,
                1400,
                &[
                    "10.244.1.5/24",
                    "fd00:10:244:1::5/64",
                    "fe80::858:aff:fef4:105/64",
                ],
                Some(tap("tap0", 1)),
            )
        },
        interface(
            "net1",
            LinkKind::Macvlan,
            9000,
            &["192.168.50.10/24"],
            Some(tap("tap1", 4)),
        ),
        interface("eth9", LinkKind::Veth, 1500, &["10.9.0.5/16"], None),
    ]
}

/// [`pod`]'s routes.
fn pod_routes() -> Vec<Route> {
    vec![
        Route {
            onlink: true,
            ..route("0.0.0.0/0", Some("169.254.1.1"), "eth0", 0, "static")
        },
        Route {
            mtu: Some(1300),
            ..route("10.100.0.0/16", Some("10.244.1.1"), "eth0", 100, "static")
        },
        route("10.96.0.0/12", None, "eth0", 0, "static"),
        route("10.244.1.0/24", None, "eth0", 0, "kernel"),
        route("::/0", Some("fd00:10:244:1::1"), "eth0", 1024, "static"),
        route("fd00:10:244:1::/64", None, "eth0", 256, "kernel"),
        route("fe80::/64", None, "eth0", 256, "kernel"),
        Route {
            route_type: "multicast".into(),
            ..route("ff00::/8", None, "eth0", 256, "kernel")
        },
        Route {
            interface: None,
            nexthops: vec![hop("10.244.1.1", "eth0", 1), hop("192.168.50.1", "net1", 2)],
            ..route("172.16.0.0/16", None, "", 50, "static")
        },
        route("192.168.50.0/24", None, "net1", 0, "kernel"),
        route("192.168.60.0/24", None, "net1", 0, "boot"),
        route("10.8.0.0/16", Some("10.9.0.1"), "eth9", 0, "static"),
    ]
}

/// [`pod`]'s neighbours.
fn pod_neighbours() -> Vec<Neighbour> {
    vec![
        neighbour(
            "169.254.1.1",
            "EE:EE:EE:EE:EE:EE",
            "eth0",
            "permanent",
            true,
        ),
        neighbour(
            "192.168.50.1",
            "52:54:00:aa:bb:cc",
            "net1",
            "reachable",
            true,
        ),
        neighbour("10.9.0.1", "52:54:00:00:00:09", "eth9", "reachable", true),
    ]
}

/// One attached veth `eth0` (10.0.2.15/24, MTU 1500) with a default route via
/// 10.0.2.2: the one shape the kernel `ip=` parameter can describe.
pub(crate) fn single_ipv4() -> Description {
    Description {
        interfaces: vec![
            interface("lo", LinkKind::Loopback, 65536, &["127.0.0.1/8"], None),
            Interface {
                mac: Some("52:54:00:12:34:01".into()),
                ..interface(
                    "eth0",
                    LinkKind::Veth,
                    1500,
                    &["10.0.2.15/24", "fe80::5054:ff:fe12:3401/64"],
                    Some(tap("tap0", 1)),
                )
            },
        ],
        routes: vec![
            route("0.0.0.0/0", Some("10.0.2.2"), "eth0", 0, "static"),
            route("10.0.2.0/24", None, "eth0", 0, "kernel"),
            route("fe80::/64", None, "eth0", 256, "kernel"),
        ],
        neighbours: Vec::new(),
        ..pod()
    }
}

pub(crate) fn interface_mut<'a>(desc: &'a mut Description, name: &str) -> &'a mut Interface {
    desc.interfaces
        .iter_mut()
        .find(|i| i.name == name)
        .expect("fixture interface")
}

pub(crate) fn tap_mut<'a>(desc: &'a mut Description, name: &str) -> &'a mut TapInfo {
    interface_mut(desc, name)
        .tap
        .as_mut()
        .expect("fixture interface with a TAP")
}

/// Remove every multipath route (the ones the kata-agent format refuses).
pub(crate) fn drop_multipath_routes(desc: &mut Description) {
    desc.routes.retain(|route| route.nexthops.is_empty());
}

/// Give the TAP of `name` a queue count, keeping multi_queue in agreement.
pub(crate) fn set_queues(desc: &mut Description, name: &str, queues: u32) {
    let tap = tap_mut(desc, name);
    tap.queues = queues;
    tap.multi_queue = queues > 1;
}

fn interface(
    name: &str,
    kind: LinkKind,
    mtu: u32,
    addresses: &[&str],
    tap: Option<TapInfo>,
) -> Interface {
    let ifindex = match name {
        "lo" => 1,
        "eth0" => 3,
        "net1" => 4,
        _ => 9,
    };
    Interface {
        name: name.into(),
        ifindex,
        kind,
        kind_raw: None,
        mac: Some(format!("52:54:00:12:34:{ifindex:02x}")).filter(|_| name != "lo"),
        mtu,
        oper_state: "up".into(),
        flags: Vec::new(),
        controller: None,
        eligible: kind.eligible(),
        named_only: false,
        ineligible_reason: None,
        guest_mac: None,
        addresses: addresses.iter().map(|a| a.to_string()).collect(),
        address_details: addresses.iter().map(|a| address(a)).collect(),
        wiring: tap.as_ref().map(|_| Wiring::Tc),
        tap,
        wiring_note: None,
        bridge: None,
        l3: None,
    }
}

fn address(cidr: &str) -> Address {
    let v6 = cidr.contains(':');
    let link_local = cidr.starts_with("fe80:");
    Address {
        cidr: cidr.into(),
        family: if v6 { Family::Inet6 } else { Family::Inet },
        scope: if link_local { "link" } else { "global" }.into(),
        link_local,
        tentative: false,
        deprecated: false,
        permanent: true,
    }
}

fn tap(name: &str, queues: u32) -> TapInfo {
    TapInfo {
        name: name.into(),
        ifindex: 100,
        queues,
        vnet_hdr: true,
        multi_queue: queues > 1,
        owner: Some(107),
        group: None,
        mac: None,
        device: None,
        served: false,
    }
}

fn route(
    destination: &str,
    gateway: Option<&str>,
    interface: &str,
    metric: u32,
    protocol: &str,
) -> Route {
    Route {
        family: if destination.contains(':') {
            Family::Inet6
        } else {
            Family::Inet
        },
        destination: destination.into(),
        gateway: gateway.map(Into::into),
        interface: Some(interface.into()),
        metric,
        onlink: false,
        mtu: None,
        scope: if gateway.is_some() {
            "universe"
        } else {
            "link"
        }
        .into(),
        protocol: protocol.to_string().into(),
        route_type: "unicast".into(),
        source: None,
        nexthops: Vec::new(),
        table: 254,
    }
}

fn hop(gateway: &str, interface: &str, weight: u16) -> NextHop {
    NextHop {
        gateway: Some(gateway.into()),
        interface: interface.into(),
        weight,
        onlink: false,
    }
}

fn neighbour(ip: &str, mac: &str, interface: &str, state: &str, gateway: bool) -> Neighbour {
    Neighbour {
        ip: ip.into(),
        mac: mac.into(),
        interface: interface.into(),
        state: state.into(),
        gateway,
    }
}
