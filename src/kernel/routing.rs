//! The requests of routed (`l3`) wiring, each one kind of request: a host
//! route to a TAP, a pod address's local route, proxy neighbour entries,
//! the TAP's own addresses and its IPv6 address generation mode.
//! Pure message builders; the caller sends them ([`super::batch`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};
use rtnetlink::packet_route::link::{
    AfSpecInet6, AfSpecUnspec, In6AddrGenMode, LinkAttribute, LinkMessage,
};
use rtnetlink::packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use rtnetlink::packet_route::route::{RouteMessage, RouteProtocol, RouteScope, RouteType};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};
use rtnetlink::{AddressMessageBuilder, RouteMessageBuilder};

/// The kernel's local routing table.
pub const RT_TABLE_LOCAL: u32 = 255;

/// The metric of an IPv6 host route to a TAP: below the kernel's 256 for
/// an address's own prefix route, which a /128 pod address has.
pub const HOST_ROUTE_METRIC_V6: u32 = 1;

/// `ip route add IP/32 dev TAP scope link` (IPv4) or `ip -6 route add
/// IP/128 dev TAP metric 1` (IPv6), in the main table.
pub fn host_route(ip: IpAddr, tap: u32) -> RouteMessage {
    match ip {
        IpAddr::V4(v4) => RouteMessageBuilder::<Ipv4Addr>::new()
            .destination_prefix(v4, 32)
            .output_interface(tap)
            .scope(RouteScope::Link)
            .protocol(RouteProtocol::Boot)
            .build(),
        IpAddr::V6(v6) => RouteMessageBuilder::<Ipv6Addr>::new()
            .destination_prefix(v6, 128)
            .output_interface(tap)
            .priority(HOST_ROUTE_METRIC_V6)
            .protocol(RouteProtocol::Boot)
            .build(),
    }
}

/// The local-table route of `ip` on `link`, as the kernel makes it for an
/// address: what routed wiring deletes (so the netns forwards `ip`) and,
/// for IPv4, adds back exactly at teardown (`proto kernel scope host src
/// IP`). IPv6 local routes cannot be made by a request as the kernel made
/// them (metric 0): teardown puts the address back instead.
pub fn local_route(ip: IpAddr, link: u32) -> RouteMessage {
    let mut msg = match ip {
        IpAddr::V4(v4) => RouteMessageBuilder::<Ipv4Addr>::new()
            .destination_prefix(v4, 32)
            .pref_source(v4)
            .build(),
        IpAddr::V6(v6) => RouteMessageBuilder::<Ipv6Addr>::new()
            .destination_prefix(v6, 128)
            .build(),
    };
    let h = &mut msg.header;
    h.table = u8::try_from(RT_TABLE_LOCAL).unwrap_or(u8::MAX);
    h.kind = RouteType::Local;
    h.protocol = RouteProtocol::Kernel;
    h.scope = RouteScope::Host;
    msg.attributes
        .push(rtnetlink::packet_route::route::RouteAttribute::Oif(link));
    msg.attributes
        .push(rtnetlink::packet_route::route::RouteAttribute::Table(
            RT_TABLE_LOCAL,
        ));
    msg
}

/// A proxy neighbour entry for `ip` on `link` (`ip neigh add proxy IP dev LINK`).
pub fn proxy_neighbour(ip: IpAddr, link: u32) -> NeighbourMessage {
    let mut msg = NeighbourMessage::default();
    msg.header.family = match ip {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    };
    msg.header.ifindex = link;
    msg.header.state = NeighbourState::None;
    msg.header.flags = NeighbourFlags::Proxy;
    msg.header.kind = RouteType::Unspec;
    let address = match ip {
        IpAddr::V4(v4) => NeighbourAddress::Inet(v4),
        IpAddr::V6(v6) => NeighbourAddress::Inet6(v6),
    };
    msg.attributes
        .push(NeighbourAttribute::Destination(address));
    msg
}

/// A request that makes the kernel resolve `ip` on `link` now (`NTF_USE`:
/// it sends an ARP request or neighbour solicitation, as traffic would).
pub fn resolve_neighbour(ip: IpAddr, link: u32) -> NeighbourMessage {
    let mut msg = proxy_neighbour(ip, link);
    msg.header.flags = NeighbourFlags::Use;
    msg.header.state = NeighbourState::None;
    msg
}

/// An address of the TAP's own (`169.254.0.1/32`, `fe80::1/64`), IPv6
/// without duplicate address detection: the VMM may not have the TAP open
/// yet, and a tentative address cannot send.
pub fn tap_address(ip: IpAddr, prefix: u8, tap: u32) -> AddressMessage {
    match ip {
        IpAddr::V4(v4) => AddressMessageBuilder::<Ipv4Addr>::new()
            .index(tap)
            .address(v4, prefix)
            .build(),
        IpAddr::V6(v6) => {
            let mut msg = AddressMessageBuilder::<Ipv6Addr>::new()
                .index(tap)
                .address(v6, prefix)
                .build();
            msg.attributes
                .push(AddressAttribute::Flags(AddressFlags::Nodad));
            msg
        }
    }
}

/// `ip link set LINK addrgenmode none`: no EUI-64 link-local address of
/// the kernel's beside the TAP's own `fe80::1`.
pub fn no_address_generation(link: u32) -> LinkMessage {
    let mut msg = LinkMessage::default();
    msg.header.index = link;
    msg.attributes
        .push(LinkAttribute::AfSpecUnspec(vec![AfSpecUnspec::Inet6(
            vec![AfSpecInet6::AddrGenMode(In6AddrGenMode::None)],
        )]));
    msg
}

/// A request to add `route`.
pub fn new_route(route: RouteMessage) -> RouteNetlinkMessage {
    RouteNetlinkMessage::NewRoute(route)
}

/// A request to delete `route`.
pub fn del_route(route: RouteMessage) -> RouteNetlinkMessage {
    RouteNetlinkMessage::DelRoute(route)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_route::route::RouteAttribute;

    #[test]
    fn routes_say_what_ip_route_would() {
        let v6: IpAddr = "2001:db8::2".parse().unwrap();
        let r = host_route(v6, 7);
        assert_eq!(r.header.destination_prefix_length, 128);
        assert!(r.attributes.contains(&RouteAttribute::Priority(1)));
        assert!(r.attributes.contains(&RouteAttribute::Oif(7)));
        let local = local_route("198.18.0.2".parse().unwrap(), 3);
        assert_eq!(local.header.kind, RouteType::Local);
        assert_eq!(local.header.scope, RouteScope::Host);
        assert!(local
            .attributes
            .contains(&RouteAttribute::Table(RT_TABLE_LOCAL)));
        let n = proxy_neighbour(v6, 3);
        assert_eq!(n.header.flags, NeighbourFlags::Proxy);
    }
}
