//! What `attach` adds to a description: the TAPs, bridges and wiring it built.

use serde::{Deserialize, Serialize};

/// Wiring between a pod interface and its TAP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Wiring {
    /// A tc ingress redirect in both directions between pod interface and TAP.
    Tc,
    /// A Linux bridge with the pod interface and the TAP as ports.
    Bridge,
    /// A macvtap in passthru mode on top of the pod interface: the VMM opens
    /// its character device (`tap.device`) instead of a TAP.
    Macvtap,
    /// Routed: the pod netns forwards the pod's addresses between the pod
    /// interface and the TAP, so its netfilter (service mesh, network
    /// policy, port-forward) sees the guest's traffic.
    L3,
}

impl Wiring {
    /// Every mode, the default ([`Wiring::Tc`]) first.
    pub const ALL: [Wiring; 4] = [Wiring::Tc, Wiring::Bridge, Wiring::Macvtap, Wiring::L3];
    /// Their names, in the order of [`Wiring::ALL`]: `--mode`'s values.
    pub const NAMES: [&'static str; 4] = [
        Wiring::ALL[0].as_str(),
        Wiring::ALL[1].as_str(),
        Wiring::ALL[2].as_str(),
        Wiring::ALL[3].as_str(),
    ];

    /// The name used in JSON, on command lines and in annotations: `tc`,
    /// `bridge`, `macvtap` or `l3` (serde's lowercase names, spelled here once).
    pub const fn as_str(self) -> &'static str {
        match self {
            Wiring::Tc => "tc",
            Wiring::Bridge => "bridge",
            Wiring::Macvtap => "macvtap",
            Wiring::L3 => "l3",
        }
    }
}

/// What a guest behind a routed (`l3`) TAP is routed through: the pod
/// netns's own addresses on the TAP, and the MAC the guest sees for every
/// next hop (the TAP's: the netns answers ARP and neighbour solicitation
/// for the pod's gateways and peers with it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct L3Info {
    /// The TAP's MAC: the link-layer address of every next hop the guest has.
    pub router_mac: String,
    /// The netns's IPv4 address on the TAP (`169.254.0.1`): the next hop of
    /// the guest's device-only IPv4 routes, when the pod has IPv4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router4: Option<String>,
    /// The netns's IPv6 link-local address on the TAP (`fe80::1`): the next
    /// hop of every IPv6 route of the guest, when the pod has IPv6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router6: Option<String>,
}

/// The TAP podtap built for one pod interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapInfo {
    /// TAP name inside the pod netns.
    pub name: String,
    /// The TAP's interface index.
    pub ifindex: u32,
    /// Number of queues, 1-256.
    pub queues: u32,
    /// Created with `IFF_VNET_HDR`; the VMM must open it the same way.
    pub vnet_hdr: bool,
    /// Created with `IFF_MULTI_QUEUE`; true exactly when `queues > 1`.
    pub multi_queue: bool,
    /// uid that may open the TAP (`TUNSETOWNER`); `None` when no owner was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<u32>,
    /// gid that may open the TAP (`TUNSETGROUP`); `None` when no group was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
    /// The TAP's own hardware address (the host side; the guest uses
    /// `guest_mac`). Absent in descriptions recorded before podtap read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// macvtap only: podtap's own character device node of the macvtap
    /// (`/dev/podtap/ID.NAME`), which the VMM opens once per queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// podtap answers the guest's DHCPv4, DHCPv6 and router solicitations
    /// on this TAP (`podtap serve`, `podtap watch --serve`): the guest can
    /// configure itself with no seed or kernel arguments.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub served: bool,
}

/// The bridge built in bridge mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgeInfo {
    /// Name of the bridge podtap created in the pod netns.
    pub name: String,
    /// The bridge's interface index.
    pub ifindex: u32,
    /// The generated MAC the pod interface carries while it is bridged.
    pub pod_interface_mac: String,
}

/// What `attach` adds at the top level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// The sandbox id given to `attach`.
    pub id: String,
    /// The wiring mode requested; an interface's `wiring` may differ (see `wiring_note`).
    pub mode: Wiring,
    /// Per-phase wall time of the attach that built this, in microseconds.
    pub timings_us: Timings,
    /// How many times `podtap watch` has revised this description since
    /// attach (interfaces added, removed or changed); absent while 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub revision: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Per-phase timings in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timings {
    /// Dumping and scanning the netns and planning, in microseconds.
    pub scan: u64,
    /// Creating and configuring the TAPs (and bridges, in bridge mode), in microseconds.
    pub tap: u64,
    /// Installing the tc qdiscs and redirects of tc-wired NICs, in microseconds.
    pub wiring: u64,
    /// Writing the state checkpoint, in microseconds (the final write is not timed).
    pub checkpoint: u64,
    /// The whole attach up to the final checkpoint write, in microseconds.
    pub total: u64,
}
