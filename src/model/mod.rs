//! The network description: podtap's JSON contract (schema `podtap/v2`).
//!
//! `scan` fills it, `attach` extends it with what was built, and every
//! renderer, the CNI result and the OCI hook read it. Field names are the
//! contract documented in `docs/description.md` and `docs/description.schema.json`.

mod attached;
pub(crate) mod ifname;
mod tables;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

pub use attached::{Attachment, BridgeInfo, L3Info, TapInfo, Timings, Wiring};
pub(crate) use tables::RoutesDigest;

/// A name from one of the kernel's fixed tables (a route's scope, protocol
/// or type), or the number as text where the table has no name: borrowed
/// when known, so a routing table of 100 000 routes does not allocate three
/// strings a route for a few words.
pub type Name = Cow<'static, str>;

/// The value of the `schema` field.
pub const SCHEMA: &str = "podtap/v2";

/// Everything a VM needs to mirror a pod's network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Description {
    /// Always [`SCHEMA`] (`"podtap/v2"`); a reader must refuse other values.
    pub schema: String,
    /// Which network namespace was scanned.
    pub netns: NetnsRef,
    /// False when IPv6 is disabled in the netns (sysctl) or absent from the kernel.
    pub ipv6_enabled: bool,
    /// Every link in the netns, including `lo`, in ascending `ifindex` order.
    pub interfaces: Vec<Interface>,
    /// Every route of the main table (254), IPv4 and IPv6.
    pub routes: Vec<Route>,
    /// Static neighbour entries plus the neighbours that routes use as gateways.
    pub neighbours: Vec<Neighbour>,
    /// Policy routing rules other than the kernel's defaults; when present,
    /// `routes` also holds the routes of the tables they point to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
    /// The resolver configuration the guest should use, when a door was given
    /// one (the CNI result's `dns`, `attach --dns-from`); a scan never has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<Dns>,
    /// Present once `attach` has built TAPs for this description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<Attachment>,
}

/// Which netns was scanned, and its identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetnsRef {
    /// The netns path as given on the command line, not canonicalised.
    pub path: String,
    /// The nsfs inode number; with `dev`, the namespace's identity.
    pub inode: u64,
    /// `st_dev` of the nsfs file.
    pub dev: u64,
}

/// Link kinds podtap tells apart. `other` carries the kernel's kind string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    /// `veth`: one end of a virtual Ethernet pair.
    Veth,
    /// `macvlan`: a virtual link with its own MAC on a lower device.
    Macvlan,
    /// `macvtap`: a macvlan with a TAP-like character device.
    Macvtap,
    /// `ipvlan`: a virtual link sharing its lower device's MAC.
    Ipvlan,
    /// `vlan`: an 802.1Q VLAN sub-interface.
    Vlan,
    /// `bridge`: a Linux bridge; never eligible.
    Bridge,
    /// `tun` with an Ethernet link layer (`mode tap`); never eligible.
    Tap,
    /// `tun` without an Ethernet link layer (`mode tun`); never eligible.
    Tun,
    /// No kernel kind and an Ethernet link layer: a physical NIC.
    Physical,
    /// No kernel kind and a loopback link layer or `IFF_LOOPBACK`; never eligible.
    Loopback,
    /// Any other kernel kind (see `kind_raw`), or no kind and a non-Ethernet link layer.
    Other,
}

impl LinkKind {
    /// Whether a link of this kind can back a VM NIC at all.
    pub fn eligible(self) -> bool {
        !matches!(
            self,
            LinkKind::Loopback | LinkKind::Bridge | LinkKind::Tap | LinkKind::Tun
        )
    }

    /// Whether a link of this kind (`raw`: the kernel's kind string) carries
    /// a pod's traffic, so that it becomes a VM NIC without being named:
    /// veth, macvlan, ipvlan, vlan, netkit, physical NICs and VFs. Tunnel
    /// and helper links a CNI leaves in the pod netns (vxlan, ifb, ...) do
    /// not: Kata users saw a tunnel link turned into a guest NIC fail the pod.
    pub fn carries_pod_traffic(self, raw: Option<&str>) -> bool {
        match self {
            LinkKind::Veth
            | LinkKind::Macvlan
            | LinkKind::Ipvlan
            | LinkKind::Vlan
            | LinkKind::Physical => true,
            LinkKind::Other => raw == Some("netkit"),
            _ => false,
        }
    }

    /// Whether this kind may be enslaved to a Linux bridge for bridge wiring.
    pub fn bridgeable(self) -> bool {
        matches!(self, LinkKind::Veth | LinkKind::Physical)
    }

    /// The name used in JSON: `veth`, `physical`, `other`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Veth => "veth",
            LinkKind::Macvlan => "macvlan",
            LinkKind::Macvtap => "macvtap",
            LinkKind::Ipvlan => "ipvlan",
            LinkKind::Vlan => "vlan",
            LinkKind::Bridge => "bridge",
            LinkKind::Tap => "tap",
            LinkKind::Tun => "tun",
            LinkKind::Physical => "physical",
            LinkKind::Loopback => "loopback",
            LinkKind::Other => "other",
        }
    }
}

/// One link of the pod netns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    /// Interface name (`IFLA_IFNAME`), 1-15 bytes.
    pub name: String,
    /// Interface index inside this netns (at least 1).
    pub ifindex: u32,
    /// podtap's classification of the link.
    pub kind: LinkKind,
    /// The kernel's own kind string (`IFLA_INFO_KIND`), absent for physical and loopback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind_raw: Option<String>,
    /// Six-byte link-layer address (lower-case hex, colon-separated); `None`
    /// for links without one (TUN, IP tunnels). All zeros for `lo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// Link MTU in bytes.
    pub mtu: u32,
    /// Operational state as iproute2 prints it: UP, DOWN, UNKNOWN, LOWERLAYERDOWN, ...
    pub oper_state: String,
    /// The link's flags (`ifi_flags`) as iproute2 names them: `UP`,
    /// `BROADCAST`, `MULTICAST`, `NOARP` (an L3-only link: no ARP or
    /// neighbour discovery on it), `POINTOPOINT`, `LOWER_UP`, ...; what the
    /// Kata agent reads as `raw_flags` ([`flag_bits`] gives them back).
    /// Empty in a description written before podtap read them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// Name of the controller (bridge/bond master), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    /// Whether the link becomes a VM NIC when no interface is named.
    pub eligible: bool,
    /// A link that can back a VM NIC but carries no pod traffic by default
    /// (a vxlan, an ifb, a macvtap): attached only when named
    /// (`--interfaces`, `CNI_IFNAME`). `eligible` is false for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub named_only: bool,
    /// Why it is not eligible, when `eligible` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ineligible_reason: Option<String>,
    /// The MAC the VM NIC must use: the pod interface's own MAC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_mac: Option<String>,
    /// Addresses as CIDR strings, in kernel order (the first IPv4 one is primary).
    pub addresses: Vec<String>,
    /// The same addresses with scope and flags.
    pub address_details: Vec<Address>,
    /// The TAP built for this interface (attach only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tap: Option<TapInfo>,
    /// How the TAP is wired: "tc", "bridge" or "macvtap" (attach only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wiring: Option<Wiring>,
    /// Why the wiring differs from the requested mode, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wiring_note: Option<String>,
    /// The bridge built in bridge mode (attach only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<BridgeInfo>,
    /// What the guest is routed through in `l3` mode (attach only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l3: Option<L3Info>,
}

/// One address with its details.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Address {
    /// `ADDRESS/PREFIXLEN` (`IFA_LOCAL`, or `IFA_ADDRESS` when there is no local).
    pub cidr: String,
    /// Address family.
    pub family: Family,
    /// Address scope as iproute2 names it: global, site, link, host, nowhere, or the number.
    pub scope: String,
    /// IPv6 link-local (fe80::/10). The guest makes its own; do not copy it.
    pub link_local: bool,
    /// IPv6 duplicate address detection has not finished (IFA_F_TENTATIVE).
    pub tentative: bool,
    /// The preferred lifetime has run out (IFA_F_DEPRECATED).
    pub deprecated: bool,
    /// No lifetime (IFA_F_PERMANENT); false for SLAAC/DHCP-managed addresses.
    pub permanent: bool,
}

/// Address family: `inet` or `inet6` in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// IPv4 (`inet`).
    Inet,
    /// IPv6 (`inet6`).
    Inet6,
}

/// A route from the main table.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Route {
    /// Address family of the destination.
    pub family: Family,
    /// CIDR; `0.0.0.0/0` or `::/0` for defaults.
    pub destination: String,
    /// Next-hop gateway (`RTA_GATEWAY`, or `RTA_VIA`, which may be IPv6 for an
    /// IPv4 route); `None` for device-only and multipath routes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Output interface name; absent for multipath and for routes with no device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// Route priority (`metric`); IPv6 routes added without one get 1024.
    pub metric: u32,
    /// `onlink` flag: the gateway is reachable on the link even if no address prefix covers it.
    pub onlink: bool,
    /// Per-route MTU (`mtu N` / RTAX_MTU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// global (universe), site, link, host, nowhere: iproute2 names.
    pub scope: Name,
    /// kernel, boot, static, dhcp, ra, ... or the number.
    pub protocol: Name,
    /// unicast, blackhole, unreachable, prohibit, ...
    #[serde(rename = "type")]
    pub route_type: Name,
    /// Preferred source address (`src`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Next hops of a multipath route, else empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nexthops: Vec<NextHop>,
    /// The routing table; absent means 254 (main). Routes of other tables are
    /// those of tables a policy rule points to.
    #[serde(default = "main_table", skip_serializing_if = "is_main_table")]
    pub table: u32,
}

fn main_table() -> u32 {
    254
}

fn is_main_table(t: &u32) -> bool {
    *t == 254
}

/// A policy routing rule (`ip rule`), other than the kernel's three defaults.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rule {
    /// Address family.
    pub family: Family,
    /// Priority (`pref`); lower runs first.
    pub priority: u32,
    /// Source prefix (`from`), absent for all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Destination prefix (`to`), absent for all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Input interface name (`iif`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iif: Option<String>,
    /// Output interface name (`oif`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oif: Option<String>,
    /// Firewall mark to match (`fwmark`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fwmark: Option<u32>,
    /// Mask of the firewall mark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fwmask: Option<u32>,
    /// TOS to match; 0 for any.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tos: u8,
    /// The table to look up, for action `table`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<u32>,
    /// table, goto, nop, blackhole, unreachable, prohibit.
    pub action: String,
    /// The rule priority to jump to, for action `goto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goto: Option<u32>,
    /// `not`: the selector is inverted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub invert: bool,
}

fn is_zero(v: &u8) -> bool {
    *v == 0
}

/// One leg of a multipath route.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NextHop {
    /// The leg's gateway; `None` for a leg without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// The leg's output interface name.
    pub interface: String,
    /// `weight` as iproute2 shows it (kernel hops + 1).
    pub weight: u16,
    /// The leg's `onlink` flag.
    pub onlink: bool,
}

/// A neighbour entry the guest should be seeded with.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Neighbour {
    /// The neighbour's IP address.
    pub ip: String,
    /// Its link-layer address (six octets, lower-case hex).
    pub mac: String,
    /// Name of the interface the entry belongs to.
    pub interface: String,
    /// permanent, noarp, reachable, stale, ...
    pub state: String,
    /// True when a route uses this neighbour as its gateway.
    pub gateway: bool,
}

/// The `IFF_*` link flags, by bit, as iproute2 names them (`linux/if.h`).
pub const LINK_FLAGS: [(u32, &str); 19] = [
    (0x1, "UP"),
    (0x2, "BROADCAST"),
    (0x4, "DEBUG"),
    (0x8, "LOOPBACK"),
    (0x10, "POINTOPOINT"),
    (0x20, "NOTRAILERS"),
    (0x40, "RUNNING"),
    (0x80, "NOARP"),
    (0x100, "PROMISC"),
    (0x200, "ALLMULTI"),
    (0x400, "MASTER"),
    (0x800, "SLAVE"),
    (0x1000, "MULTICAST"),
    (0x2000, "PORTSEL"),
    (0x4000, "AUTOMEDIA"),
    (0x8000, "DYNAMIC"),
    (0x1_0000, "LOWER_UP"),
    (0x2_0000, "DORMANT"),
    (0x4_0000, "ECHO"),
];

/// The names of the flags set in `bits` ([`LINK_FLAGS`]), in bit order.
pub fn link_flags(bits: u32) -> Vec<String> {
    LINK_FLAGS
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| (*name).to_string())
        .collect()
}

/// The bits of the flags `names` names (unknown names count for nothing).
pub fn flag_bits(names: &[String]) -> u32 {
    LINK_FLAGS
        .iter()
        .filter(|(_, name)| names.iter().any(|n| n == name))
        .fold(0, |bits, (bit, _)| bits | bit)
}

/// Resolver configuration for the guest: the fields of CNI's `DNS` type
/// (what a resolv.conf holds). Lists keep their given order; empty lists and
/// a missing `domain` are left out of the JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dns {
    /// Name server addresses, in order of preference (`nameserver` lines).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// The local domain (`domain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Search domains, in order (`search`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<String>,
    /// Resolver options such as `ndots:5` (`options`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

impl Dns {
    /// Whether no field is set (nothing worth recording).
    pub fn is_empty(&self) -> bool {
        self.nameservers.is_empty()
            && self.domain.is_none()
            && self.search.is_empty()
            && self.options.is_empty()
    }

    /// The search list a resolver uses: `search`, or else `domain` alone
    /// (resolv.conf(5): without `search`, the local domain is searched).
    pub fn search_list(&self) -> Vec<&str> {
        if self.search.is_empty() {
            self.domain.iter().map(String::as_str).collect()
        } else {
            self.search.iter().map(String::as_str).collect()
        }
    }
}

impl Description {
    /// Interfaces that have a TAP (after attach), in description order.
    pub fn attached(&self) -> impl Iterator<Item = (&Interface, &TapInfo)> {
        self.interfaces
            .iter()
            .filter_map(|i| i.tap.as_ref().map(|t| (i, t)))
    }

    /// The interface named `name`, if there is one.
    pub fn interface(&self, name: &str) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.name == name)
    }

    /// Routes that leave through `ifname` (directly or as a multipath leg).
    pub fn routes_via<'a>(&'a self, ifname: &'a str) -> impl Iterator<Item = &'a Route> + 'a {
        self.routes.iter().filter(move |r| {
            r.interface.as_deref() == Some(ifname)
                || r.nexthops.iter().any(|h| h.interface == ifname)
        })
    }

    /// The gateways of the default routes out of `ifname`, IPv6 first.
    pub fn default_gateways(&self, ifname: &str) -> Vec<std::net::IpAddr> {
        let mut gateways: Vec<std::net::IpAddr> = self
            .routes_via(ifname)
            .filter(|r| r.destination == "default" || r.destination.ends_with("/0"))
            .filter_map(|r| r.gateway.as_deref()?.parse().ok())
            .collect();
        gateways.sort_by_key(|g| !g.is_ipv6());
        gateways
    }

    /// The default gateway of `iface` to resolve for a served guest, whose
    /// router MAC is that gateway's when not routed: `None` when routed or
    /// when the pod's neighbour table has a MAC for one of its gateways.
    pub fn gateway_to_resolve(&self, iface: &Interface) -> Option<std::net::IpAddr> {
        let gateways = self.default_gateways(&iface.name);
        let known = gateways
            .iter()
            .any(|g| self.neighbour_mac(&iface.name, *g).is_some());
        if iface.l3.is_some() || known {
            return None;
        }
        gateways.into_iter().next()
    }

    /// The MAC the pod's neighbour table holds for `ip` on `ifname`.
    pub fn neighbour_mac(&self, ifname: &str, ip: std::net::IpAddr) -> Option<&str> {
        self.neighbours
            .iter()
            .filter(|n| n.interface == ifname && !n.mac.is_empty())
            .find(|n| n.ip.parse::<std::net::IpAddr>().ok() == Some(ip))
            .map(|n| n.mac.as_str())
    }
}
