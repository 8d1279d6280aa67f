//! A NIC's configuration from an attachment's description: what the guest
//! behind the TAP of `iface` should end up with.
//!
//! The routes are the ones the guest-side renderers emit
//! (`render::route::guest_routes`), so a guest configured by DHCP ends as
//! one configured by cloud-init would. The MAC the guest uses for its
//! routers (the replies' source, the RA's link-layer option): routed, the
//! TAP's (the netns routes everything and answers ARP for it); otherwise
//! the MAC of the pod's gateway as the pod's neighbour table has it, since
//! the guest's frames then go out on the pod's own link; the TAP's when the
//! pod has not resolved its gateway (IPv4 is unaffected: the guest resolves
//! the gateway itself).

use std::net::{IpAddr, Ipv4Addr};

use ipnetwork::IpNetwork;

use super::config::{NicConfig, Route4, Route6, DEFAULT_LEASE_SECS};
use crate::kernel::mac::MacAddr;
use crate::model::{Description, Interface};
use crate::plan::l3::{ROUTER4, ROUTER6};
use crate::render::route::guest_routes;

/// The configuration the guest behind the TAP of `iface` (an interface of
/// `desc` with a TAP) should get; `None` when it has no TAP, no MAC, or
/// routes the renderers refuse.
pub fn config_for(desc: &Description, iface: &Interface) -> Option<NicConfig> {
    let tap = iface.tap.as_ref()?;
    let guest: MacAddr = iface
        .guest_mac
        .as_deref()
        .or(iface.mac.as_deref())?
        .parse()
        .ok()?;
    let tap_mac: Option<MacAddr> = tap.mac.as_deref().and_then(|m| m.parse().ok());
    let routed = iface.l3.is_some();
    let server = match &iface.l3 {
        Some(l3) => l3.router_mac.parse().ok(),
        None => gateway_mac(desc, iface).or(tap_mac),
    }?;
    let mut cfg = NicConfig::new(guest.0, server.0);
    let routes = guest_routes(desc, &iface.name).ok()?;
    main_table_routes(&routes, &mut cfg);
    addresses(iface, routed, &mut cfg);
    if routed {
        // The netns answers for its own addresses on the TAP.
        cfg.router_ll = Some(ROUTER6);
        cfg.server_id4 = Some(ROUTER4);
        cfg.gateway6 = cfg.gateway6.or(Some(ROUTER6));
    } else if cfg.gateway4.is_none() {
        cfg.server_id4 = cfg
            .routes4
            .iter()
            .find_map(|r| r.gateway)
            .or_else(|| subnet_first(&cfg));
    }
    cfg.mtu = routes
        .iter()
        .filter_map(|r| r.mtu)
        .chain([iface.mtu])
        .min()
        .unwrap_or(iface.mtu);
    if let Some(dns) = &desc.dns {
        for ns in dns
            .nameservers
            .iter()
            .filter_map(|n| n.parse::<IpAddr>().ok())
        {
            match ns {
                IpAddr::V4(a) => cfg.dns4.push(a),
                IpAddr::V6(a) => cfg.dns6.push(a),
            }
        }
        cfg.search.clone_from(&dns.search);
        cfg.domain.clone_from(&dns.domain);
    }
    cfg.lease_secs = DEFAULT_LEASE_SECS;
    Some(cfg)
}

/// The guest's main-table routes into `cfg`: IPv4 ones as routes (the
/// first default's gateway as the router), IPv6 defaults as the router
/// (the NIC holds the default route), other IPv6 ones as routes.
fn main_table_routes(routes: &[crate::render::route::GuestRoute], cfg: &mut NicConfig) {
    for r in routes.iter().filter(|r| r.table == 254) {
        match (r.destination, r.gateway) {
            (IpNetwork::V4(d), gw) => {
                let gateway = gw.and_then(|g| match g {
                    IpAddr::V4(g) => Some(g),
                    IpAddr::V6(_) => None,
                });
                if d.prefix() == 0 && cfg.gateway4.is_none() {
                    cfg.gateway4 = gateway;
                }
                cfg.routes4.push(Route4 {
                    dest: d.network(),
                    prefix: d.prefix(),
                    gateway,
                });
            }
            (IpNetwork::V6(d), gw) => {
                let gateway = gw.and_then(|g| match g {
                    IpAddr::V6(g) => Some(g),
                    IpAddr::V4(_) => None,
                });
                if d.prefix() == 0 {
                    cfg.holds_default_v6 = true;
                    cfg.gateway6 = cfg.gateway6.or(gateway);
                } else {
                    cfg.routes6.push(Route6 {
                        dest: d.network(),
                        prefix: d.prefix(),
                        gateway,
                    });
                }
            }
        }
    }
}

/// The pod's addresses on `iface` (not link-local). Routed, an IPv6 address
/// is leased as a /128 and no prefix is announced on-link: the guest's link
/// reaches only the netns, so every IPv6 destination goes via its router.
fn addresses(iface: &Interface, routed: bool, cfg: &mut NicConfig) {
    for a in iface.address_details.iter().filter(|a| !a.link_local) {
        match a.cidr.parse::<IpNetwork>() {
            Ok(IpNetwork::V4(n)) if cfg.ipv4.is_none() => cfg.ipv4 = Some((n.ip(), n.prefix())),
            Ok(IpNetwork::V6(n)) => {
                let prefix = if routed { 128 } else { n.prefix() };
                cfg.ipv6.push((n.ip(), prefix));
            }
            _ => {}
        }
    }
}

/// The pod's gateway's MAC on `iface`: the IPv6 default gateway's, else
/// the IPv4 one's, as the pod's neighbour table has them.
fn gateway_mac(desc: &Description, iface: &Interface) -> Option<MacAddr> {
    desc.default_gateways(&iface.name)
        .into_iter()
        .find_map(|gw| desc.neighbour_mac(&iface.name, gw)?.parse().ok())
}

/// The subnet's first address, as the server identifier of a NIC with no
/// gateway (unless it is the pod's own).
fn subnet_first(cfg: &NicConfig) -> Option<Ipv4Addr> {
    let (ip, prefix) = cfg.ipv4?;
    let net = ipnetwork::Ipv4Network::new(ip, prefix).ok()?;
    let first = Ipv4Addr::from(u32::from(net.network()).checked_add(1)?);
    (first != ip && prefix < 31).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::samples;

    #[test]
    fn a_tc_nic_gets_the_pods_addresses_routes_and_dns() {
        let desc = samples::pod();
        let eth0 = desc.interface("eth0").unwrap();
        let cfg = config_for(&desc, eth0).unwrap();
        assert_eq!(cfg.ipv4, Some(("10.244.1.5".parse().unwrap(), 24)));
        assert_eq!(cfg.gateway4, Some("169.254.1.1".parse().unwrap()));
        assert!(cfg.holds_default_v6);
        assert!(cfg
            .routes4
            .iter()
            .any(|r| r.prefix == 12 && r.gateway.is_none()));
        assert!(cfg.ipv6.iter().all(|(ip, _)| !ip.is_unicast_link_local()));
        assert!(super::super::Responder::new(cfg).is_ok());
    }

    #[test]
    fn a_routed_nic_is_served_from_the_netns_own_addresses() {
        let mut desc = samples::pod();
        let eth0 = samples::interface_mut(&mut desc, "eth0");
        eth0.l3 = Some(crate::model::L3Info {
            router_mac: "02:00:00:00:00:01".into(),
            router4: Some("169.254.0.1".into()),
            router6: Some("fe80::1".into()),
        });
        let cfg = config_for(&desc, desc.interface("eth0").unwrap()).unwrap();
        assert_eq!(cfg.server_mac, [2, 0, 0, 0, 0, 1]);
        assert_eq!(cfg.router_ll, Some(ROUTER6));
        assert_eq!(
            cfg.gateway6,
            Some(ROUTER6),
            "IPv6 goes via the TAP's own address"
        );
        assert!(cfg.ipv6.iter().all(|(_, p)| *p == 128));
    }
}
