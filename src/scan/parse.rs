//! Pure translation of dump messages into the description model.
//!
//! No I/O here: `scan::dump` collects the messages (links and routes as
//! read by `kernel::wire::link` and `kernel::wire::route`, the one parsers
//! of those messages; addresses, neighbours and rules as rtnetlink's typed
//! messages), this module decides what they mean, so it is covered by
//! plain unit tests.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::IpAddr;

use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};
use rtnetlink::packet_route::neighbour::NeighbourMessage;
use rtnetlink::packet_route::rule::RuleMessage;
use rtnetlink::packet_route::RouteNetlinkMessage;

use super::names::{oper_state_name, scope_name};
use super::routes::{neighbour, rule};
use crate::kernel::wire::link::{LinkState, ARPHRD_ETHER, ARPHRD_LOOPBACK};
use crate::model::{Address, Family, Interface, LinkKind, Neighbour, Route, Rule};

/// Everything one scan read from the kernel, one dump per object type.
#[derive(Debug, Default, Clone)]
pub struct Dump {
    /// Links in the order the kernel dumped them.
    pub links: Vec<LinkState>,
    pub addresses: Vec<AddressMessage>,
    /// The routes of the pod's tables (main and every table a rule points
    /// to), translated as the dump came in and sorted
    /// (`routes::Translator`): in the description's order.
    pub routes: Vec<Route>,
    pub neighbours: Vec<NeighbourMessage>,
    /// Policy rules, IPv4 and IPv6.
    pub rules: Vec<RuleMessage>,
}

impl Dump {
    /// Keep the addresses, neighbours and rules of `messages`, in their order.
    pub fn take(&mut self, messages: Vec<RouteNetlinkMessage>) {
        for m in messages {
            match m {
                RouteNetlinkMessage::NewAddress(a) => self.addresses.push(a),
                RouteNetlinkMessage::NewNeighbour(n) => self.neighbours.push(n),
                RouteNetlinkMessage::NewRule(r) => self.rules.push(r),
                _ => {}
            }
        }
    }
}

/// Interfaces, routes and neighbours, each in a stable order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub interfaces: Vec<Interface>,
    pub routes: Vec<Route>,
    pub neighbours: Vec<Neighbour>,
    pub rules: Vec<Rule>,
}

/// The description's view of `dump`; its routes are taken out of it, not
/// copied.
pub fn parse(dump: &mut Dump) -> Parsed {
    let mut interfaces: Vec<Interface> = dump.links.iter().map(link_to_interface).collect();
    interfaces.sort_by_key(|i| i.ifindex);
    let names: BTreeMap<u32, String> = interfaces
        .iter()
        .map(|i| (i.ifindex, i.name.clone()))
        .collect();
    let owners = podtap_owners(&dump.links);
    resolve_controllers(&mut interfaces, &dump.links, &names, &owners);
    mark_podtap_links(&mut interfaces, &owners);

    for msg in &dump.addresses {
        if let Some(iface) = by_ifindex(&mut interfaces, msg.header.index) {
            if let Some(addr) = address(msg) {
                iface.addresses.push(addr.cidr.clone());
                iface.address_details.push(addr);
            }
        }
    }

    // The rules the pod added (not the kernel's three defaults); the routes
    // are those of main and of every table they point to.
    let mut rules: Vec<Rule> = dump.rules.iter().filter_map(rule).collect();
    rules.sort_by_key(|r| (r.family, r.priority));
    let routes = std::mem::take(&mut dump.routes);

    let gateways = gateways(&routes);
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

/// The (gateway, interface) pairs of `routes` and their legs. Routes in
/// order mostly share their gateway, so a pair the same as the one before
/// is not hashed again.
fn gateways(routes: &[Route]) -> HashSet<(&str, &str)> {
    let mut set = HashSet::new();
    let mut last = None;
    for r in routes {
        let direct = r.gateway.as_deref().zip(r.interface.as_deref());
        let legs = r
            .nexthops
            .iter()
            .filter_map(|h| h.gateway.as_deref().map(|g| (g, h.interface.as_str())));
        for pair in direct.into_iter().chain(legs) {
            if last != Some(pair) {
                set.insert(pair);
                last = Some(pair);
            }
        }
    }
    set
}

fn link_to_interface(link: &LinkState) -> Interface {
    let mac = link.mac.map(|m| m.to_string());
    let ether = link.link_type == ARPHRD_ETHER;
    let loopback = link.link_type == ARPHRD_LOOPBACK || link.loopback;
    let kind = classify(link.kind.as_deref(), ether, loopback);
    let raw = link.kind.as_deref();
    let (ineligible_reason, named_only) = if !kind.eligible() {
        let why = format!("{} links cannot back a VM NIC", kind.as_str());
        (Some(why), false)
    } else if !ether || mac.is_none() {
        (
            Some("not an Ethernet link with a MAC address".into()),
            false,
        )
    } else if !link.up {
        // A CNI plugin brings every interface it configures up; one that is
        // down carries nothing, so the guest gets no NIC for it.
        let why = "administratively down: bring it up to attach it";
        (Some(why.into()), false)
    } else if !kind.carries_pod_traffic(raw) {
        let why = format!(
            "{} links carry no pod traffic by default: name it to attach it",
            raw.unwrap_or(kind.as_str())
        );
        (Some(why), true)
    } else {
        (None, false)
    };
    Interface {
        name: link.name.clone(),
        ifindex: link.ifindex,
        kind,
        kind_raw: link.kind.clone(),
        guest_mac: if ineligible_reason.is_none() || named_only {
            mac.clone()
        } else {
            None
        },
        mac,
        mtu: link.mtu,
        oper_state: oper_state_name(link.oper_state),
        flags: crate::model::link_flags(link.flags),
        controller: None,
        eligible: ineligible_reason.is_none(),
        named_only,
        ineligible_reason,
        addresses: Vec::new(),
        address_details: Vec::new(),
        tap: None,
        wiring: None,
        l3: None,
        wiring_note: None,
        bridge: None,
    }
}

/// Map the kernel's kind (`IFLA_INFO_KIND`) to podtap's. No kind attribute
/// means loopback or a physical NIC.
pub fn classify(kind: Option<&str>, ether: bool, loopback: bool) -> LinkKind {
    match kind {
        Some("veth") => LinkKind::Veth,
        Some("macvlan") => LinkKind::Macvlan,
        Some("macvtap") => LinkKind::Macvtap,
        Some("ipvlan") => LinkKind::Ipvlan,
        Some("vlan") => LinkKind::Vlan,
        Some("bridge") => LinkKind::Bridge,
        // A TAP reports kind "tun" with an Ethernet link layer; a TUN has none.
        Some("tun") if ether => LinkKind::Tap,
        Some("tun") => LinkKind::Tun,
        Some(_) => LinkKind::Other,
        None if loopback => LinkKind::Loopback,
        None if ether => LinkKind::Physical,
        None => LinkKind::Other,
    }
}

/// The interface of `ifindex` in `interfaces` (sorted by ifindex): a pod
/// may hold tens of thousands of links or addresses, and a search of the
/// whole list for each made the scan quadratic.
fn by_ifindex(interfaces: &mut [Interface], ifindex: u32) -> Option<&mut Interface> {
    let at = interfaces
        .binary_search_by_key(&ifindex, |i| i.ifindex)
        .ok()?;
    interfaces.get_mut(at)
}

/// The sandbox id in the podtap marker (`podtap:<id> ...`) of each link that has one, by ifindex.
fn podtap_owners(links: &[LinkState]) -> BTreeMap<u32, String> {
    links
        .iter()
        .filter_map(|l| {
            let id = l
                .alias
                .as_deref()?
                .split(' ')
                .next()?
                .strip_prefix("podtap:")?;
            Some((l.ifindex, id.to_string()))
        })
        .collect()
}

/// podtap's own links (its macvtaps; TAPs and bridges are never eligible)
/// are not pod interfaces.
fn mark_podtap_links(interfaces: &mut [Interface], owners: &BTreeMap<u32, String>) {
    for (ifindex, id) in owners {
        let Some(iface) = by_ifindex(interfaces, *ifindex) else {
            continue;
        };
        if iface.eligible || iface.named_only {
            iface.eligible = false;
            iface.named_only = false;
            iface.guest_mac = None;
            iface.ineligible_reason = Some(format!("podtap's own link for sandbox {id}"));
        }
    }
}

/// Bridge ports are the bridge's, not the pod's: name the controller and mark them ineligible.
fn resolve_controllers(
    interfaces: &mut [Interface],
    links: &[LinkState],
    names: &BTreeMap<u32, String>,
    owners: &BTreeMap<u32, String>,
) {
    for link in links {
        let Some(idx) = link.controller else { continue };
        if let Some(iface) = by_ifindex(interfaces, link.ifindex) {
            let cname = names
                .get(&idx)
                .cloned()
                .unwrap_or_else(|| format!("if{idx}"));
            if iface.eligible || iface.named_only {
                iface.eligible = false;
                iface.named_only = false;
                iface.guest_mac = None;
                iface.ineligible_reason = Some(match owners.get(&idx) {
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
        scope: scope_name(u8::from(msg.header.scope)).into_owned(),
        link_local,
        tentative: flags.contains(AddressFlags::Tentative),
        deprecated: flags.contains(AddressFlags::Deprecated),
        permanent: flags.contains(AddressFlags::Permanent),
    })
}

/// Link groups in use.
pub fn link_groups(links: &[LinkState]) -> BTreeSet<u32> {
    links
        .iter()
        .filter(|l| l.has_group)
        .map(|l| l.group)
        .collect()
}

/// Links with a macvlan, macvtap, ipvlan or vlan of the same netns stacked on
/// them (`IFLA_LINK` without `IFLA_LINK_NETNSID`).
pub fn stacked_lowers(links: &[LinkState]) -> BTreeSet<u32> {
    let stacked = |k: &str| matches!(k, "macvlan" | "macvtap" | "ipvlan" | "ipvtap" | "vlan");
    links
        .iter()
        .filter(|l| l.kind.as_deref().is_some_and(stacked))
        .filter(|l| l.link_netnsid.is_none())
        .filter_map(|l| l.lower)
        .collect()
}
