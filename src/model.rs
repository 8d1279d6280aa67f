//! The network description: podtap's JSON contract (schema `podtap/v1`).
//!
//! `scan` fills it, `attach` extends it with what was built, and every
//! renderer, the CNI result and the OCI hook read it. Field names are the
//! contract documented in `docs/description.md` and `docs/description.schema.json`.

use serde::{Deserialize, Serialize};

/// The value of the `schema` field.
pub const SCHEMA: &str = "podtap/v1";

/// Everything a VM needs to mirror a pod's network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Description {
    pub schema: String,
    pub netns: NetnsRef,
    /// False when IPv6 is disabled in the netns (sysctl) or absent from the kernel.
    pub ipv6_enabled: bool,
    pub interfaces: Vec<Interface>,
    pub routes: Vec<Route>,
    pub neighbours: Vec<Neighbour>,
    /// Present once `attach` has built TAPs for this description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<Attachment>,
}

/// Which netns was scanned, and its identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetnsRef {
    pub path: String,
    pub inode: u64,
    pub dev: u64,
}

/// Link kinds podtap tells apart. `other` carries the kernel's kind string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    Veth,
    Macvlan,
    Macvtap,
    Ipvlan,
    Vlan,
    Bridge,
    Tap,
    Tun,
    Physical,
    Loopback,
    Other,
}

impl LinkKind {
    /// Whether a link of this kind can back a VM NIC.
    pub fn eligible(self) -> bool {
        !matches!(
            self,
            LinkKind::Loopback | LinkKind::Bridge | LinkKind::Tap | LinkKind::Tun
        )
    }

    /// Whether this kind may be enslaved to a Linux bridge for bridge wiring.
    pub fn bridgeable(self) -> bool {
        matches!(self, LinkKind::Veth | LinkKind::Physical)
    }

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
    pub name: String,
    pub ifindex: u32,
    pub kind: LinkKind,
    /// The kernel's own kind string (`IFLA_INFO_KIND`), absent for physical and loopback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind_raw: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    pub mtu: u32,
    /// Operational state as iproute2 prints it: UP, DOWN, UNKNOWN, LOWERLAYERDOWN, ...
    pub oper_state: String,
    /// Name of the controller (bridge/bond master), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    /// Whether the link can become a VM NIC.
    pub eligible: bool,
    /// Why it cannot, when `eligible` is false.
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
    /// How the TAP is wired: "tc" or "bridge" (attach only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wiring: Option<Wiring>,
    /// Why the wiring differs from the requested mode, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wiring_note: Option<String>,
    /// The bridge built in bridge mode (attach only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<BridgeInfo>,
}

/// One address with its details.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Address {
    pub cidr: String,
    pub family: Family,
    pub scope: String,
    /// IPv6 link-local (fe80::/10). The guest makes its own; do not copy it.
    pub link_local: bool,
    pub tentative: bool,
    pub deprecated: bool,
    /// No lifetime (IFA_F_PERMANENT); false for SLAAC/DHCP-managed addresses.
    pub permanent: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Inet,
    Inet6,
}

/// A route from the main table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    pub family: Family,
    /// CIDR; `0.0.0.0/0` or `::/0` for defaults.
    pub destination: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Output interface name; absent for multipath and for routes with no device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    pub metric: u32,
    pub onlink: bool,
    /// Per-route MTU (`mtu N` / RTAX_MTU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// global (universe), site, link, host, nowhere: iproute2 names.
    pub scope: String,
    /// kernel, boot, static, dhcp, ra, ... or the number.
    pub protocol: String,
    /// unicast, blackhole, unreachable, prohibit, ...
    #[serde(rename = "type")]
    pub route_type: String,
    /// Preferred source address (`src`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Next hops of a multipath route, else empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nexthops: Vec<NextHop>,
}

/// One leg of a multipath route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextHop {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    pub interface: String,
    /// `weight` as iproute2 shows it (kernel hops + 1).
    pub weight: u16,
    pub onlink: bool,
}

/// A neighbour entry the guest should be seeded with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Neighbour {
    pub ip: String,
    pub mac: String,
    pub interface: String,
    /// permanent, noarp, reachable, stale, ...
    pub state: String,
    /// True when a route uses this neighbour as its gateway.
    pub gateway: bool,
}

/// Wiring between a pod interface and its TAP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Wiring {
    Tc,
    Bridge,
}

impl Wiring {
    pub fn as_str(self) -> &'static str {
        match self {
            Wiring::Tc => "tc",
            Wiring::Bridge => "bridge",
        }
    }
}

/// The TAP podtap built for one pod interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapInfo {
    pub name: String,
    pub ifindex: u32,
    pub queues: u32,
    pub vnet_hdr: bool,
    pub multi_queue: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
}

/// The bridge built in bridge mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgeInfo {
    pub name: String,
    pub ifindex: u32,
    /// The generated MAC the pod interface carries while it is bridged.
    pub pod_interface_mac: String,
}

/// What `attach` adds at the top level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    pub id: String,
    pub mode: Wiring,
    /// Per-phase wall time of the attach that built this, in microseconds.
    pub timings_us: Timings,
}

/// Per-phase timings in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timings {
    pub scan: u64,
    pub tap: u64,
    pub wiring: u64,
    pub checkpoint: u64,
    pub total: u64,
}

impl Description {
    /// Interfaces that have a TAP (after attach), in description order.
    pub fn attached(&self) -> impl Iterator<Item = (&Interface, &TapInfo)> {
        self.interfaces
            .iter()
            .filter_map(|i| i.tap.as_ref().map(|t| (i, t)))
    }

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
}
