//! Routes the guest must add itself, shared by the guest-side formats.

use std::net::IpAddr;

use ipnetwork::IpNetwork;

use super::nic::is_ipv6_link_local;
use super::RenderError;
use crate::model::{Description, Route};

/// One route (or one leg of a multipath route) leaving through one NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GuestRoute {
    /// Normalised to the network address (`10.0.0.0/8`, `0.0.0.0/0`).
    pub destination: IpNetwork,
    /// Next-hop gateway, same family as `destination`; `None` for a device-only route.
    pub gateway: Option<IpAddr>,
    /// Route priority, from the description.
    pub metric: u32,
    /// The route's (or leg's) `onlink` flag.
    pub onlink: bool,
    /// Per-route MTU in bytes; `None` when the route has none.
    pub mtu: Option<u32>,
    /// This is one leg of a multipath route.
    pub multipath: bool,
    /// The route's scope as the description names it (`global`, `link`, ... or a number).
    pub scope: crate::model::Name,
    /// The route's preferred source address (`src`) as found in the description, unparsed.
    pub source: Option<String>,
    /// The routing table (254: main).
    pub table: u32,
}

impl GuestRoute {
    /// Whether this is a default route (prefix length 0).
    pub fn is_default(&self) -> bool {
        self.destination.prefix() == 0
    }
}

/// The routes of `ifname` the guest has to add, gateway-less routes first
/// (a gateway may depend on them), otherwise in description order.
///
/// Left out: non-unicast routes, kernel-made prefix routes (the guest's own
/// addresses recreate them), link-local (fe80::/10) and multicast
/// destinations. Multipath routes give one route per leg through `ifname`.
pub(crate) fn guest_routes(
    desc: &Description,
    ifname: &str,
) -> Result<Vec<GuestRoute>, RenderError> {
    let mut routes = Vec::new();
    for route in desc.routes_via(ifname) {
        if route.route_type != "unicast" || is_kernel_prefix_route(route) {
            continue;
        }
        let destination = parse_destination(route)?;
        if is_ipv6_link_local(destination.ip()) || destination.ip().is_multicast() {
            continue;
        }
        for (gateway, onlink) in legs(route, ifname) {
            routes.push(GuestRoute {
                destination,
                gateway: parse_gateway(route, destination, gateway)?,
                metric: route.metric,
                onlink,
                mtu: route.mtu,
                multipath: !route.nexthops.is_empty(),
                scope: route.scope.clone(),
                source: route.source.clone(),
                table: route.table,
            });
        }
    }
    if let Some(l3) = desc.interface(ifname).and_then(|i| i.l3.as_ref()) {
        routed(desc, ifname, l3, &mut routes);
    }
    routes.sort_by_key(|route| route.gateway.is_some());
    Ok(routes)
}

/// A routed (`l3`) NIC's routes as the guest needs them. Its link reaches
/// only the pod netns, which answers ARP for everything it routes
/// elsewhere, but IPv6 neighbour solicitations only for its own addresses.
/// So an IPv4 device-only route (an L3-only pod link) goes via the netns's
/// address on the TAP, `onlink` (a host route stays: proxy ARP answers
/// it); every IPv6 route goes via the TAP's `fe80::1`, and so does each
/// IPv6 on-link prefix of the guest's addresses, at metric 1, ahead of the
/// prefix route the guest's kernel makes (metric 256).
fn routed(
    desc: &Description,
    ifname: &str,
    l3: &crate::model::L3Info,
    routes: &mut Vec<GuestRoute>,
) {
    let router4 = l3.router4.as_deref().and_then(|r| r.parse::<IpAddr>().ok());
    let router6 = l3.router6.as_deref().and_then(|r| r.parse::<IpAddr>().ok());
    for r in routes.iter_mut() {
        match r.destination {
            IpNetwork::V4(d) if d.prefix() < 32 && r.gateway.is_none() => {
                r.gateway = router4;
                r.onlink = true;
            }
            IpNetwork::V6(_) => {
                r.gateway = router6;
                r.onlink = false;
            }
            IpNetwork::V4(_) => {}
        }
    }
    // The netns's own address on the TAP: the source of what the netns
    // itself sends the guest (port-forward's SNAT, ICMP errors), which the
    // guest must reach even where the pod has no default route. On one NIC
    // only, the first routed one with IPv4 (the one port-forward reaches):
    // the same /32 on a second NIC is a route the guest already has.
    let first_routed4 = desc
        .interfaces
        .iter()
        .find(|i| i.l3.as_ref().is_some_and(|l| l.router4.is_some()))
        .map(|i| i.name.as_str());
    if let (Some(IpAddr::V4(router)), true) = (router4, first_routed4 == Some(ifname)) {
        if let Ok(host) = ipnetwork::Ipv4Network::new(router, 32) {
            routes.push(GuestRoute {
                destination: IpNetwork::V4(host),
                gateway: None,
                metric: 0,
                onlink: false,
                mtu: None,
                multipath: false,
                scope: crate::model::Name::from("link"),
                source: None,
                table: 254,
            });
        }
    }
    let Some(interface) = desc.interface(ifname) else {
        return;
    };
    for a in &interface.address_details {
        let Ok(IpNetwork::V6(net)) = a.cidr.parse::<IpNetwork>() else {
            continue;
        };
        if a.link_local || net.prefix() >= 128 || is_ipv6_link_local(IpAddr::V6(net.ip())) {
            continue;
        }
        let Ok(prefix) = ipnetwork::Ipv6Network::new(net.network(), net.prefix()) else {
            continue;
        };
        let destination = IpNetwork::V6(prefix);
        if routes
            .iter()
            .any(|r| r.destination == destination && r.table == 254)
        {
            continue;
        }
        routes.push(GuestRoute {
            destination,
            gateway: router6,
            metric: 1,
            onlink: false,
            mtu: None,
            multipath: false,
            scope: crate::model::Name::from("global"),
            source: None,
            table: 254,
        });
    }
}

fn is_kernel_prefix_route(route: &Route) -> bool {
    route.protocol == "kernel" && route.gateway.is_none() && route.nexthops.is_empty()
}

/// (gateway, onlink) of each way the route leaves through `ifname`.
fn legs<'a>(route: &'a Route, ifname: &str) -> Vec<(Option<&'a str>, bool)> {
    if route.nexthops.is_empty() {
        return vec![(route.gateway.as_deref(), route.onlink)];
    }
    route
        .nexthops
        .iter()
        .filter(|hop| hop.interface == ifname)
        .map(|hop| (hop.gateway.as_deref(), hop.onlink))
        .collect()
}

fn parse_destination(route: &Route) -> Result<IpNetwork, RenderError> {
    let invalid = || RenderError::InvalidRoute {
        destination: route.destination.clone(),
        reason: "the destination is not a CIDR".to_string(),
    };
    let parsed: IpNetwork = route.destination.parse().map_err(|_| invalid())?;
    IpNetwork::new(parsed.network(), parsed.prefix()).map_err(|_| invalid())
}

fn parse_gateway(
    route: &Route,
    destination: IpNetwork,
    gateway: Option<&str>,
) -> Result<Option<IpAddr>, RenderError> {
    let Some(text) = gateway else {
        return Ok(None);
    };
    let invalid = |reason: String| RenderError::InvalidRoute {
        destination: route.destination.clone(),
        reason,
    };
    let address: IpAddr = text
        .parse()
        .map_err(|_| invalid(format!("gateway {text:?} is not an IP address")))?;
    if address.is_ipv4() != destination.is_ipv4() {
        return Err(invalid(format!(
            "gateway {address} is of another address family (not supported in the guest)"
        )));
    }
    Ok(Some(address))
}

/// Refuse, for a `format` that has no words for them, policy rules and routes
/// outside the main table: dropping them would give the guest another network.
pub(crate) fn refuse_policy_routing(
    desc: &Description,
    format: &'static str,
) -> Result<(), RenderError> {
    let tables: std::collections::BTreeSet<u32> = desc
        .routes
        .iter()
        .map(|r| r.table)
        .filter(|t| *t != 254)
        .collect();
    if desc.rules.is_empty() && tables.is_empty() {
        return Ok(());
    }
    Err(RenderError::PolicyRoutingUnsupported {
        format,
        what: format!(
            "{} rule(s), routes in table(s) {:?}",
            desc.rules.len(),
            tables
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::samples;

    fn summary(routes: &[GuestRoute]) -> Vec<String> {
        routes
            .iter()
            .map(|r| match r.gateway {
                Some(gateway) => format!("{} via {gateway}", r.destination),
                None => format!("{} dev", r.destination),
            })
            .collect()
    }

    #[test]
    fn kernel_link_local_and_multicast_routes_are_skipped() {
        let desc = samples::pod();
        let routes = guest_routes(&desc, "eth0").unwrap();
        assert_eq!(
            summary(&routes),
            [
                "10.96.0.0/12 dev",
                "0.0.0.0/0 via 169.254.1.1",
                "10.100.0.0/16 via 10.244.1.1",
                "::/0 via fd00:10:244:1::1",
                "172.16.0.0/16 via 10.244.1.1",
            ]
        );
    }

    #[test]
    fn a_routed_nic_goes_via_the_netns_for_device_routes_and_its_ipv6_prefix() {
        let mut desc = samples::pod();
        samples::interface_mut(&mut desc, "eth0").l3 = Some(crate::model::L3Info {
            router_mac: "02:00:00:00:00:01".into(),
            router4: Some("169.254.0.1".into()),
            router6: Some("fe80::1".into()),
        });
        let routes = guest_routes(&desc, "eth0").unwrap();
        assert_eq!(
            summary(&routes),
            [
                "169.254.0.1/32 dev",
                "0.0.0.0/0 via 169.254.1.1",
                "10.100.0.0/16 via 10.244.1.1",
                "10.96.0.0/12 via 169.254.0.1",
                "::/0 via fe80::1",
                "172.16.0.0/16 via 10.244.1.1",
                "fd00:10:244:1::/64 via fe80::1",
            ]
        );
        assert!(routes[3].onlink);
        assert_eq!(routes[6].metric, 1);
    }

    #[test]
    fn multipath_gives_one_route_per_leg_on_each_nic() {
        let desc = samples::pod();
        let routes = guest_routes(&desc, "net1").unwrap();
        assert_eq!(
            summary(&routes),
            ["192.168.60.0/24 dev", "172.16.0.0/16 via 192.168.50.1"]
        );
        assert!(routes[1].multipath);
        assert_eq!(routes[1].metric, 50);
    }

    #[test]
    fn a_gateway_of_the_other_family_is_refused() {
        let mut desc = samples::pod();
        desc.routes[0].gateway = Some("fe80::1".into());
        let error = guest_routes(&desc, "eth0").unwrap_err();
        assert!(
            error.to_string().contains("another address family"),
            "{error}"
        );
    }
}
