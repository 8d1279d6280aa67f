//! Pure translation of rtnetlink dump messages into the description model.
//!
//! No I/O here: `scan::dump` collects the messages, this module decides what
//! they mean, so it is covered by plain unit tests.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::IpAddr;

use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};
use rtnetlink::packet_route::link::{
    InfoKind, LinkAttribute, LinkFlags, LinkInfo, LinkLayerType, LinkMessage,
};
use rtnetlink::packet_route::neighbour::NeighbourMessage;
use rtnetlink::packet_route::route::RouteMessage;
use rtnetlink::packet_route::rule::RuleMessage;

use super::names::scope_name;
use super::routes::{neighbour, route, route_order, rule, RT_TABLE_MAIN};
use crate::kernel::mac::MacAddr;
use crate::model::{Address, Family, Interface, LinkKind, Neighbour, Route, Rule};

/// Everything one scan read from the kernel, one dump per object type.
#[derive(Debug, Default, Clone)]
pub struct Dump {
    pub links: Vec<LinkMessage>,
    pub addresses: Vec<AddressMessage>,
    pub routes: Vec<RouteMessage>,
    pub neighbours: Vec<NeighbourMessage>,
    /// Policy rules, IPv4 and IPv6.
    pub rules: Vec<RuleMessage>,
}

/// Interfaces, routes and neighbours, each in a stable order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub interfaces: Vec<Interface>,
    pub routes: Vec<Route>,
    pub neighbours: Vec<Neighbour>,
    pub rules: Vec<Rule>,
}

pub fn parse(dump: &Dump) -> Parsed {
    let mut interfaces: Vec<Interface> = dump.links.iter().map(link_to_interface).collect();
    interfaces.sort_by_key(|i| i.ifindex);
    let names: BTreeMap<u32, String> = interfaces
        .iter()
        .map(|i| (i.ifindex, i.name.clone()))
        .collect();
    resolve_controllers(&mut interfaces, &dump.links, &names);
    mark_podtap_links(&mut interfaces, &dump.links);

    for msg in &dump.addresses {
        if let Some(iface) = interfaces
            .iter_mut()
            .find(|i| i.ifindex == msg.header.index)
        {
            if let Some(addr) = address(msg) {
                iface.addresses.push(addr.cidr.clone());
                iface.address_details.push(addr);
            }
        }
    }

    // The rules the pod added (not the kernel's three defaults), and the
    // routes of main and of every table those rules point to.
    let mut rules: Vec<Rule> = dump.rules.iter().filter_map(rule).collect();
    rules.sort_by_key(|r| (r.family, r.priority));
    let tables: BTreeSet<u32> = std::iter::once(RT_TABLE_MAIN)
        .chain(rules.iter().filter_map(|r| r.table))
        .collect();
    let mut routes: Vec<Route> = dump
        .routes
        .iter()
        .filter_map(|r| route(r, &names))
        .filter(|r| tables.contains(&r.table))
        .collect();
    routes.sort_by_key(route_order);

    let gateways: HashSet<(String, String)> = routes
        .iter()
        .flat_map(|r| {
            let direct = r.gateway.clone().zip(r.interface.clone());
            let legs = r
                .nexthops
                .iter()
                .filter_map(|h| h.gateway.clone().map(|g| (g, h.interface.clone())));
            direct.into_iter().chain(legs).collect::<Vec<_>>()
        })
        .collect();
    let mut neighbours: Vec<Neighbour> = dump
        .neighbours
        .iter()
        .filter_map(|n| neighbour(n, &names, &gateways))
        .collect();
    neighbours.sort_by(|a, b| (&a.interface, &a.ip).cmp(&(&b.interface, &b.ip)));
    neighbours.dedup();

    Parsed {
        interfaces,
        routes,
        neighbours,
        rules,
    }
}

fn link_to_interface(msg: &LinkMessage) -> Interface {
    let mut name = String::new();
    let mut mac = None;
    let mut mtu = 0;
    let mut oper_state = "UNKNOWN".to_string();
    let mut info_kind = None;
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::IfName(n) => name = n.clone(),
            LinkAttribute::Address(a) if a.len() == 6 => {
                mac = MacAddr::from_bytes(a).map(|m| m.to_string())
            }
            LinkAttribute::Mtu(m) => mtu = *m,
            LinkAttribute::OperState(s) => oper_state = s.to_string(),
            LinkAttribute::LinkInfo(infos) => {
                info_kind = infos.iter().find_map(|i| match i {
                    LinkInfo::Kind(k) => Some(k.clone()),
                    _ => None,
                })
            }
            _ => {}
        }
    }
    let ether = msg.header.link_layer_type == LinkLayerType::Ether;
    let loopback = msg.header.link_layer_type == LinkLayerType::Loopback
        || msg.header.flags.contains(LinkFlags::Loopback);
    let kind = classify(info_kind.as_ref(), ether, loopback);
    let kind_raw = info_kind.map(|k| k.to_string());
    let ineligible_reason = if !kind.eligible() {
        Some(format!("{} links cannot back a VM NIC", kind.as_str()))
    } else if !ether || mac.is_none() {
        Some("not an Ethernet link with a MAC address".to_string())
    } else if !msg.header.flags.contains(LinkFlags::Up) {
        // A CNI plugin brings every interface it configures up; one that is
        // down carries nothing, so the guest gets no NIC for it.
        Some("administratively down: bring it up to attach it".to_string())
    } else {
        None
    };
    Interface {
        name,
        ifindex: msg.header.index,
        kind,
        kind_raw,
        guest_mac: if ineligible_reason.is_none() {
            mac.clone()
        } else {
            None
        },
        mac,
        mtu,
        oper_state,
        controller: None,
        eligible: ineligible_reason.is_none(),
        ineligible_reason,
        addresses: Vec::new(),
        address_details: Vec::new(),
        tap: None,
        wiring: None,
        wiring_note: None,
        bridge: None,
    }
}

/// Map the kernel's kind to podtap's. No kind attribute means loopback or a physical NIC.
pub fn classify(kind: Option<&InfoKind>, ether: bool, loopback: bool) -> LinkKind {
    match kind {
        Some(InfoKind::Veth) => LinkKind::Veth,
        Some(InfoKind::MacVlan) => LinkKind::Macvlan,
        Some(InfoKind::MacVtap) => LinkKind::Macvtap,
        Some(InfoKind::IpVlan) => LinkKind::Ipvlan,
        Some(InfoKind::Vlan) => LinkKind::Vlan,
        Some(InfoKind::Bridge) => LinkKind::Bridge,
        // A TAP reports kind "tun" with an Ethernet link layer; a TUN has none.
        Some(InfoKind::Tun) if ether => LinkKind::Tap,
        Some(InfoKind::Tun) => LinkKind::Tun,
        Some(_) => LinkKind::Other,
        None if loopback => LinkKind::Loopback,
        None if ether => LinkKind::Physical,
        None => LinkKind::Other,
    }
}

/// The sandbox id in the podtap marker (`podtap:<id> ...`) of link `idx`, if it has one.
fn podtap_owner(links: &[LinkMessage], idx: u32) -> Option<String> {
    let link = links.iter().find(|l| l.header.index == idx)?;
    link.attributes.iter().find_map(|a| match a {
        LinkAttribute::IfAlias(alias) => alias
            .split(' ')
            .next()?
            .strip_prefix("podtap:")
            .map(str::to_string),
        _ => None,
    })
}

/// podtap's own links (its macvtaps; TAPs and bridges are never eligible)
/// are not pod interfaces.
fn mark_podtap_links(interfaces: &mut [Interface], links: &[LinkMessage]) {
    for iface in interfaces.iter_mut().filter(|i| i.eligible) {
        if let Some(id) = podtap_owner(links, iface.ifindex) {
            iface.eligible = false;
            iface.guest_mac = None;
            iface.ineligible_reason = Some(format!("podtap's own link for sandbox {id}"));
        }
    }
}

/// Bridge ports are the bridge's, not the pod's: name the controller and mark them ineligible.
fn resolve_controllers(
    interfaces: &mut [Interface],
    links: &[LinkMessage],
    names: &BTreeMap<u32, String>,
) {
    for msg in links {
        let controller = msg.attributes.iter().find_map(|a| match a {
            LinkAttribute::Controller(c) => Some(*c),
            _ => None,
        });
        let Some(idx) = controller else { continue };
        if let Some(iface) = interfaces
            .iter_mut()
            .find(|i| i.ifindex == msg.header.index)
        {
            let cname = names
                .get(&idx)
                .cloned()
                .unwrap_or_else(|| format!("if{idx}"));
            if iface.eligible {
                iface.eligible = false;
                iface.guest_mac = None;
                iface.ineligible_reason = Some(match podtap_owner(links, idx) {
                    Some(id) => format!(
                        "enslaved to {cname}, the bridge of podtap sandbox {id} (detach it first)"
                    ),
                    None => format!("enslaved to {cname}"),
                });
            }
            iface.controller = Some(cname);
        }
    }
}

fn address(msg: &AddressMessage) -> Option<Address> {
    let mut local = None;
    let mut peer = None;
    let mut flags = AddressFlags::from_bits_retain(u32::from(msg.header.flags.bits()));
    for attr in &msg.attributes {
        match attr {
            AddressAttribute::Local(ip) => local = Some(*ip),
            AddressAttribute::Address(ip) => peer = Some(*ip),
            AddressAttribute::Flags(f) => flags = *f,
            _ => {}
        }
    }
    // IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer on point-to-point links.
    let ip = local.or(peer)?;
    let family = match ip {
        IpAddr::V4(_) => Family::Inet,
        IpAddr::V6(_) => Family::Inet6,
    };
    let link_local = matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80);
    Some(Address {
        cidr: format!("{ip}/{}", msg.header.prefix_len),
        family,
        scope: scope_name(u8::from(msg.header.scope)),
        link_local,
        tentative: flags.contains(AddressFlags::Tentative),
        deprecated: flags.contains(AddressFlags::Deprecated),
        permanent: flags.contains(AddressFlags::Permanent),
    })
}

/// Link groups in use.
pub fn link_groups(links: &[LinkMessage]) -> BTreeSet<u32> {
    links
        .iter()
        .flat_map(|l| l.attributes.iter())
        .filter_map(|a| match a {
            LinkAttribute::Group(g) => Some(*g),
            _ => None,
        })
        .collect()
}

/// Links with a macvlan, macvtap, ipvlan or vlan of the same netns stacked on
/// them (`IFLA_LINK` without `IFLA_LINK_NETNSID`).
pub fn stacked_lowers(links: &[LinkMessage]) -> BTreeSet<u32> {
    let stacked = |k: &InfoKind| {
        matches!(
            k,
            InfoKind::MacVlan
                | InfoKind::MacVtap
                | InfoKind::IpVlan
                | InfoKind::IpVtap
                | InfoKind::Vlan
        )
    };
    links
        .iter()
        .filter(|l| {
            l.attributes.iter().any(|a| match a {
                LinkAttribute::LinkInfo(infos) => infos
                    .iter()
                    .any(|i| matches!(i, LinkInfo::Kind(k) if stacked(k))),
                _ => false,
            })
        })
        .filter(|l| {
            !l.attributes
                .iter()
                .any(|a| matches!(a, LinkAttribute::LinkNetNsId(_)))
        })
        .filter_map(|l| {
            l.attributes.iter().find_map(|a| match a {
                LinkAttribute::Link(parent) => Some(*parent),
                _ => None,
            })
        })
        .collect()
}
