//! Pure: routes, policy rules and neighbours of a dump, in the description's terms.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::{IpAddr, Ipv4Addr};

use rtnetlink::packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use rtnetlink::packet_route::rule::{RuleAction, RuleAttribute, RuleFlags, RuleMessage};
use rtnetlink::packet_route::AddressFamily;

use super::names::{neighbour_state, protocol_name, scope_name, type_name};
use crate::kernel::mac::MacAddr;
use crate::kernel::wire::link::LinkState;
use crate::kernel::wire::route::{
    NextHopState, RouteState, AF_INET, AF_INET6, RTM_F_CLONED, RTNH_F_ONLINK,
};
use crate::kernel::wire::{self, nexthop};
use crate::model::{Family, Neighbour, NextHop, Route, Rule};

/// The main routing table.
pub const RT_TABLE_MAIN: u32 = 254;
/// The local table (the kernel's routes for local and broadcast addresses).
const RT_TABLE_LOCAL: u32 = 255;
/// The "default" table of the kernel's last default rule.
const RT_TABLE_DEFAULT: u32 = 253;

/// The pod's routes, translated into the description's terms as a dump
/// hands them over (a scan translates while the kernel is still dumping):
/// those of the main table and of every table a rule of the pod points to,
/// sorted by [`route_order`] at the end.
#[derive(Debug, Default)]
pub struct Translator {
    names: BTreeMap<u32, String>,
    tables: BTreeSet<u32>,
    routes: Vec<Route>,
    /// `keys[i]` is the sort key of `routes[i]`.
    keys: Vec<SortKey>,
    /// Routes that name a next-hop object and carry nothing of it.
    held: Vec<RouteState>,
    /// Whether a route message was too short to be one.
    unreadable: bool,
}

impl Translator {
    /// For a netns with `links` and the policy rules `rules`.
    pub fn new(links: &[LinkState], rules: &[RuleMessage]) -> Translator {
        Translator {
            names: links.iter().map(|l| (l.ifindex, l.name.clone())).collect(),
            tables: std::iter::once(RT_TABLE_MAIN)
                .chain(rules.iter().filter_map(rule).filter_map(|r| r.table))
                .collect(),
            ..Translator::default()
        }
    }

    /// Translate the route messages in `messages` (whole netlink messages,
    /// as a dump hands them over); hold back those that name a next-hop
    /// object and carry nothing of it (the netns's `nexthop_compat_mode` is
    /// 0: [`Self::take_held`]), and note any route message too short to be
    /// one ([`Self::unreadable`]).
    pub fn add_messages(&mut self, messages: &[u8]) {
        for (kind, _, frame) in wire::frames(messages) {
            match wire::route::parse_new(frame) {
                Some(r) if nexthop::needs_object(&r) => self.held.push(r),
                Some(r) => self.add_one(&r),
                None => self.unreadable |= kind == wire::route::RTM_NEWROUTE,
            }
        }
    }

    /// Whether a route message added was too short to be one.
    pub fn unreadable(&self) -> bool {
        self.unreadable
    }

    /// The routes held back for their next-hop objects (to be filled in
    /// and [`Self::add`]ed).
    pub fn take_held(&mut self) -> Vec<RouteState> {
        std::mem::take(&mut self.held)
    }

    /// Translate the routes of `read` that belong to the pod's tables (the
    /// table is known before translation: routes of other tables, such as
    /// the local table's one or more per address, are never turned into
    /// text).
    pub fn add(&mut self, read: &[RouteState]) {
        for r in read {
            self.add_one(r);
        }
    }

    fn add_one(&mut self, read: &RouteState) {
        if !self.tables.contains(&read.table) {
            return;
        }
        if let Some(r) = route(read, &self.names) {
            self.keys.push(sort_key(self.routes.len(), &r));
            self.routes.push(r);
        }
    }

    /// Forget what was added (the dump is read again).
    pub fn clear(&mut self) {
        self.routes.clear();
        self.keys.clear();
        self.held.clear();
        self.unreadable = false;
    }

    /// The routes translated, sorted by [`route_order`] (stably: routes
    /// that tie keep the order they were added in).
    pub fn into_routes(self) -> Vec<Route> {
        sorted(self.routes, self.keys)
    }
}

pub fn route(r: &RouteState, names: &BTreeMap<u32, String>) -> Option<Route> {
    if r.flags & RTM_F_CLONED != 0 {
        return None;
    }
    let (family, unspecified) = match r.family {
        AF_INET => (Family::Inet, "0.0.0.0"),
        AF_INET6 => (Family::Inet6, "::"),
        _ => return None,
    };
    let len = r.destination_len;
    let destination = match r.destination {
        Some(d) => cidr_text(d, len),
        None => format!("{unspecified}/{len}"),
    };
    Some(Route {
        family,
        destination,
        gateway: r.gateway.map(ip_text),
        interface: r.oif.map(|i| if_name(names, i)),
        metric: r.priority,
        onlink: r.flags & RTNH_F_ONLINK != 0,
        mtu: r.mtu,
        scope: scope_name(r.scope),
        protocol: protocol_name(r.protocol),
        route_type: type_name(r.kind),
        source: r.source.map(ip_text),
        nexthops: r.nexthops.iter().map(|h| next_hop(h, names)).collect(),
        table: r.table,
    })
}

/// A multipath route's leg, in the description's terms.
fn next_hop(h: &NextHopState, names: &BTreeMap<u32, String>) -> NextHop {
    NextHop {
        gateway: h.gateway.map(ip_text),
        interface: if_name(names, h.ifindex),
        weight: u16::from(h.hops) + 1,
        onlink: u32::from(h.flags) & RTNH_F_ONLINK != 0,
    }
}

/// A policy rule, or `None` for the kernel's defaults (`0: from all lookup
/// local`, `32766: from all lookup main`, `32767: from all lookup default`),
/// which every netns has and no guest needs told.
pub fn rule(msg: &RuleMessage) -> Option<Rule> {
    let family = match msg.header.family {
        AddressFamily::Inet => Family::Inet,
        AddressFamily::Inet6 => Family::Inet6,
        _ => return None,
    };
    let mut r = Rule {
        family,
        priority: 0,
        from: None,
        to: None,
        iif: None,
        oif: None,
        fwmark: None,
        fwmask: None,
        tos: msg.header.tos,
        table: None,
        action: rule_action(msg.header.action),
        goto: None,
        invert: msg.header.flags.contains(RuleFlags::Invert),
    };
    let mut table = (msg.header.table != 0).then_some(u32::from(msg.header.table));
    for attr in &msg.attributes {
        match attr {
            RuleAttribute::Priority(p) => r.priority = *p,
            RuleAttribute::Source(ip) => r.from = Some(format!("{ip}/{}", msg.header.src_len)),
            RuleAttribute::Destination(ip) => r.to = Some(format!("{ip}/{}", msg.header.dst_len)),
            RuleAttribute::Iifname(n) => r.iif = Some(n.clone()),
            RuleAttribute::Oifname(n) => r.oif = Some(n.clone()),
            RuleAttribute::FwMark(m) => r.fwmark = Some(*m),
            // The kernel reports the default mask (all ones) too: leave it out.
            RuleAttribute::FwMask(m) => r.fwmask = (*m != u32::MAX).then_some(*m),
            RuleAttribute::Table(t) => table = Some(*t),
            RuleAttribute::Goto(g) => r.goto = Some(*g),
            _ => {}
        }
    }
    if msg.header.action == RuleAction::ToTable {
        r.table = table;
    }
    let plain = r.from.is_none()
        && r.to.is_none()
        && r.iif.is_none()
        && r.oif.is_none()
        && r.fwmark.is_none()
        && r.tos == 0
        && !r.invert;
    let default = plain
        && matches!(
            (r.priority, r.table),
            (0, Some(RT_TABLE_LOCAL))
                | (32766, Some(RT_TABLE_MAIN))
                | (32767, Some(RT_TABLE_DEFAULT))
        );
    (!default).then_some(r)
}

fn rule_action(a: RuleAction) -> String {
    match a {
        RuleAction::ToTable => "table".into(),
        RuleAction::Goto => "goto".into(),
        RuleAction::Nop => "nop".into(),
        RuleAction::Blackhole => "blackhole".into(),
        RuleAction::Unreachable => "unreachable".into(),
        RuleAction::Prohibit => "prohibit".into(),
        RuleAction::Unspec => "unspec".into(),
        RuleAction::Other(n) => n.to_string(),
        other => format!("{other:?}").to_lowercase(),
    }
}

pub fn neighbour(
    msg: &NeighbourMessage,
    names: &BTreeMap<u32, String>,
    gateways: &HashSet<(&str, &str)>,
) -> Option<Neighbour> {
    let mut ip = None;
    let mut lladdr = None;
    for attr in &msg.attributes {
        match attr {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => {
                ip = Some(IpAddr::V4(*v4))
            }
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                ip = Some(IpAddr::V6(*v6))
            }
            NeighbourAttribute::LinkLayerAddress(a) if a.len() == 6 => {
                lladdr = MacAddr::from_bytes(a).map(|m| m.to_string())
            }
            _ => {}
        }
    }
    let ip = ip?;
    let mac = lladdr?;
    if ip.is_multicast() || mac == "00:00:00:00:00:00" {
        return None;
    }
    let interface = names.get(&msg.header.ifindex)?.clone();
    let ip_text = ip_text(ip);
    let is_gateway = gateways.contains(&(ip_text.as_str(), interface.as_str()));
    let is_static = matches!(
        msg.header.state,
        NeighbourState::Permanent | NeighbourState::Noarp
    );
    if !is_static && !is_gateway {
        return None;
    }
    Some(Neighbour {
        ip: ip_text,
        mac,
        interface,
        state: neighbour_state(msg.header.state),
        gateway: is_gateway,
    })
}

/// An address as text, the way `Display` writes it; IPv4 (nearly every
/// route of a big table) without the formatting machinery, which costs more
/// than the rest of a route's parse.
pub(super) fn ip_text(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => {
            let mut out = String::with_capacity(19);
            push_ipv4(&mut out, v4);
            out
        }
        IpAddr::V6(v6) => v6.to_string(),
    }
}

/// `ADDRESS/LEN`.
fn cidr_text(ip: IpAddr, len: u8) -> String {
    let mut out = ip_text(ip);
    out.push('/');
    push_decimal(&mut out, len);
    out
}

fn push_ipv4(out: &mut String, ip: Ipv4Addr) {
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        push_decimal(out, octet);
    }
}

fn push_decimal(out: &mut String, v: u8) {
    if v >= 100 {
        out.push(char::from(b'0' + v / 100));
    }
    if v >= 10 {
        out.push(char::from(b'0' + v / 10 % 10));
    }
    out.push(char::from(b'0' + v % 10));
}

fn if_name(names: &BTreeMap<u32, String>, index: u32) -> String {
    names
        .get(&index)
        .cloned()
        .unwrap_or_else(|| format!("if{index}"))
}

/// Where a route goes in the sort: its family and the first 16 bytes of
/// its destination as one number (ordered as the text is), which decide
/// nearly every comparison without reading the route; then its index.
type SortKey = (Family, u128, usize);

fn sort_key(index: usize, r: &Route) -> SortKey {
    (r.family, text_prefix(&r.destination), index)
}

/// `routes` sorted by [`route_order`], stably, as `sort_by` would.
#[cfg(test)]
pub(super) fn sort_routes(routes: Vec<Route>) -> Vec<Route> {
    let keys = routes
        .iter()
        .enumerate()
        .map(|(i, r)| sort_key(i, r))
        .collect();
    sorted(routes, keys)
}

/// `routes` (`keys[i]` the key of `routes[i]`) sorted by [`route_order`],
/// stably. A sort of 100 000 routes makes millions of comparisons and a
/// route is a few hundred bytes, so the sort runs over the keys (ties of
/// their destination prefix fall back to [`route_order`]), and then the
/// routes are put in that order in place: moving them into a new vector
/// instead cost a page fault for every 4 KiB of it, more than the moves.
fn sorted(mut routes: Vec<Route>, mut keys: Vec<SortKey>) -> Vec<Route> {
    // Ties of the whole order fall back to the index, so an unstable sort
    // (which needs no scratch memory, unlike a stable one: a fresh page
    // for every 4 KiB of half the keys) sorts as a stable one would.
    keys.sort_unstable_by(|a, b| {
        (a.0, a.1)
            .cmp(&(b.0, b.1))
            .then_with(|| route_order(&routes[a.2], &routes[b.2]))
            .then(a.2.cmp(&b.2))
    });
    let mut order: Vec<usize> = keys.into_iter().map(|(_, _, i)| i).collect();
    permute(&mut routes, &mut order);
    routes
}

/// Pure: put `items` in `order` (`order[i]` is the index of the item that
/// belongs at `i`; a permutation) in place, by following its cycles.
/// `order` ends as the identity.
pub(super) fn permute<T>(items: &mut [T], order: &mut [usize]) {
    for start in 0..items.len() {
        let mut at = start;
        while order[at] != start {
            let from = order[at];
            items.swap(at, from);
            order[at] = at;
            at = from;
        }
        order[at] = at;
    }
}

/// Pure: the first 16 bytes of `text`, zero-padded, as a big-endian number:
/// two texts whose numbers differ compare as their numbers do (text holds
/// no NUL byte, so a shorter prefix sorts first, as `str` does).
fn text_prefix(text: &str) -> u128 {
    let mut bytes = [0u8; 16];
    let n = text.len().min(16);
    bytes[..n].copy_from_slice(&text.as_bytes()[..n]);
    u128::from_be_bytes(bytes)
}

/// Sort order: IPv4 before IPv6, then destination (as text), metric,
/// interface, gateway. Compared in place: a sort of 100 000 routes makes
/// millions of comparisons, and a key of owned strings allocated for each.
pub fn route_order(a: &Route, b: &Route) -> Ordering {
    route_key(a).cmp(&route_key(b))
}

fn route_key(r: &Route) -> (Family, &str, u32, &str, &str) {
    (
        r.family,
        r.destination.as_str(),
        r.metric,
        r.interface.as_deref().unwrap_or_default(),
        r.gateway.as_deref().unwrap_or_default(),
    )
}
