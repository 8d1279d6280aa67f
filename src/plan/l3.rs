//! Routed (`l3`) wiring, planned: which of the pod's addresses are routed
//! to the TAP, which gateways the TAP answers for, which settings of the
//! pod interface and the netns change, and the nftables table. Pure.
//!
//! The layout (Kata's `l3forwarding`, made exact and extended to IPv6 and
//! several NICs): the pod's addresses stay on the pod interface, their
//! local routes go (so the netns forwards them), a host route sends each to
//! the TAP, and proxy entries answer for them on the pod interface. The
//! TAP holds `169.254.0.1/32` and `fe80::1/64` of the netns's own (the
//! source of its ARP and neighbour solicitations toward the guest, and of
//! port-forward's SNAT) and answers the guest's ARP by proxy and its
//! neighbour solicitations for its IPv6 gateways. An nftables table of the
//! attachment's own drops what the guest sends from any other source and
//! forwards connections to the pod's `127.0.0.1` (CRI port-forward) to it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use super::{NicPlan, Plan};
use crate::error::{Error, Result};
use crate::id::SandboxId;
use crate::kernel::nft;
use crate::kernel::replay::Recorded;
use crate::model::{Family, Interface};

/// The netns's IPv4 address on every routed TAP.
pub const ROUTER4: Ipv4Addr = Ipv4Addr::new(169, 254, 0, 1);
/// The netns's IPv6 address on every routed TAP.
pub const ROUTER6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);

/// One routed NIC.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct L3Plan {
    /// The pod interface's IPv4 addresses, routed to the TAP.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) v4: Vec<Ipv4Addr>,
    /// Its IPv6 addresses (not link-local), routed to the TAP.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) v6: Vec<Ipv6Addr>,
    /// The pod interface's settings before attach, as `(key, value)` under
    /// `/proc/sys/net` (read once the plan is made, recorded before any is
    /// changed, put back at teardown).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) pod_sysctls: Vec<(String, String)>,
    /// The pod interface's IPv6 addresses, newest first down to the oldest
    /// of `v6`, exactly as dumped: the kernel's own local route of an IPv6
    /// address cannot be made by a request, so teardown deletes these and
    /// adds them back (oldest first), which makes it again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) v6_addresses: Vec<Recorded>,
    /// Routes whose preferred source is one of `v6`, exactly as dumped:
    /// deleting the address takes their `src`, and teardown puts it back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) v6_src_routes: Vec<Recorded>,
}

/// What routed wiring holds for the whole netns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct L3Netns {
    /// The attachment's nftables table (`inet`).
    pub(crate) table: String,
    /// Its marker (the table's comment): `podtap:<id>`, and the netns's
    /// `net.ipv6.conf.all.proxy_ndp` before the first routed attachment of
    /// the netns changed it (` proxy_ndp=N`), which every such table
    /// carries, so that the last one to go puts it back.
    pub(crate) marker: String,
    /// That value, when the netns has IPv6 and podtap changes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) proxy_ndp: Option<String>,
}

/// The sysctl keys of the pod interface `name` routed wiring sets, and
/// their values while routed: IPv4 forwarding and no delay of proxied ARP
/// answers (the kernel's default holds each for up to 0.8 s), and, with
/// IPv6, forwarding of that interface alone (`force_forwarding`: the
/// netns-wide switch would rewrite every interface's).
pub fn pod_settings(name: &str, ipv6: bool) -> Vec<(String, &'static str)> {
    let mut out = vec![
        (format!("ipv4/conf/{name}/forwarding"), "1"),
        (format!("ipv4/neigh/{name}/proxy_delay"), "0"),
    ];
    if ipv6 {
        out.push((format!("ipv6/conf/{name}/force_forwarding"), "1"));
    }
    out
}

/// The TAP's settings: they go with the TAP, so teardown has none to undo.
/// IPv4: forwarding, proxy ARP (it answers the guest for everything routed
/// elsewhere), the guest's pod address accepted as a source (it is still
/// an address of the pod interface), 127.0.0.1 routed out (port-forward's
/// DNAT), no proxy delay. IPv6: forwarding, and its own addresses as sources only
/// (else the netns's answers to the guest could carry the guest's address).
///
/// The guest's IPv6 next hop is the TAP's own `fe80::1`, never the pod's
/// gateway by proxy: the kernel flushes a link's proxy entries whenever it
/// loses carrier, which a TAP does each time its VMM lets go of it.
pub fn tap_settings(name: &str, v4: bool, v6: bool) -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    if v4 {
        for (key, value) in [
            ("conf/{}/forwarding", "1"),
            ("conf/{}/proxy_arp", "1"),
            ("conf/{}/accept_local", "1"),
            ("conf/{}/route_localnet", "1"),
            ("neigh/{}/proxy_delay", "0"),
        ] {
            out.push((format!("ipv4/{}", key.replace("{}", name)), value));
        }
    }
    if v6 {
        for (key, value) in [
            ("conf/{}/force_forwarding", "1"),
            ("conf/{}/forwarding", "1"),
            ("conf/{}/use_oif_addrs_only", "1"),
        ] {
            out.push((format!("ipv6/{}", key.replace("{}", name)), value));
        }
    }
    out
}

/// The TAP's IPv6 settings whatever the pod has (a kernel without IPv6
/// has none of them): no router advertisements or redirects from the guest.
pub fn tap_guards(name: &str) -> Vec<(String, &'static str)> {
    vec![
        (format!("ipv6/conf/{name}/accept_ra"), "0"),
        (format!("ipv6/conf/{name}/accept_redirects"), "0"),
    ]
}

/// The netns-wide setting: IPv6 NS, NA and redirects addressed to a
/// proxied address go up the stack instead of being forwarded (to the
/// guest, where they die), which only the `all` switch does.
pub const PROXY_NDP: &str = "ipv6/conf/all/proxy_ndp";

/// Plan `iface` for routed wiring; `None` when it has no address to route
/// (then it is wired with tc redirect). The settings and records are
/// filled in once the netns has been read ([`complete`]).
pub fn plan_nic(iface: &Interface) -> Option<L3Plan> {
    let mut plan = L3Plan::default();
    for a in &iface.address_details {
        let Some(ip) = a
            .cidr
            .split('/')
            .next()
            .and_then(|ip| ip.parse::<IpAddr>().ok())
        else {
            continue;
        };
        match ip {
            IpAddr::V4(v4) if a.family == Family::Inet => plan.v4.push(v4),
            IpAddr::V6(v6) if !a.link_local => plan.v6.push(v6),
            _ => {}
        }
    }
    if plan.v4.is_empty() && plan.v6.is_empty() {
        return None;
    }
    Some(plan)
}

/// The netns-wide part of attachment `id`, given the marker an earlier
/// routed attachment of the netns left (`existing`: its `proxy_ndp=N`) and
/// the value read now.
pub fn netns_part(
    id: &SandboxId,
    ipv6: bool,
    existing: Option<&str>,
    now: Option<&str>,
) -> L3Netns {
    let proxy_ndp = ipv6
        .then(|| {
            existing
                .and_then(original_proxy_ndp)
                .or(now.map(str::to_string))
        })
        .flatten();
    let mut marker = format!("podtap:{id}");
    if let Some(v) = &proxy_ndp {
        marker.push_str(&format!(" proxy_ndp={v}"));
    }
    L3Netns {
        table: table_name(id),
        marker,
        proxy_ndp,
    }
}

/// The value of `net.ipv6.conf.all.proxy_ndp` a routed table's marker records.
pub fn original_proxy_ndp(marker: &str) -> Option<String> {
    marker
        .split(' ')
        .find_map(|f| f.strip_prefix("proxy_ndp="))
        .map(str::to_string)
}

/// The nftables table of attachment `id`: `podtap_` and 8 hex digits.
pub fn table_name(id: &SandboxId) -> String {
    let h = id.as_str().bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("podtap_{h:08x}")
}

/// The attachment's nftables table: anti-spoofing on every routed TAP
/// (every address of the attachment's routed NICs: a reply may leave by
/// another NIC than its flow came in on) and, for the first routed NIC
/// with an IPv4 address (the pod's primary interface comes first),
/// connections to `127.0.0.1` forwarded to the guest (CRI port-forward
/// dials it inside the pod netns; `::1` cannot be forwarded off the host).
pub fn table(plan: &Plan, netns: &L3Netns) -> Result<nft::Table> {
    let nics: Vec<(&NicPlan, &L3Plan)> = plan
        .nics
        .iter()
        .filter_map(|n| Some((n, n.l3.as_ref()?)))
        .collect();
    let v4: Vec<_> = nics
        .iter()
        .flat_map(|(_, l)| l.v4.iter().copied())
        .collect();
    let v6: Vec<_> = nics
        .iter()
        .flat_map(|(_, l)| l.v6.iter().copied())
        .collect();
    let guard = (!nics.is_empty()).then_some(nft::Guard {
        group: plan.group,
        v4,
        v6,
    });
    let forward = nics
        .iter()
        .find(|(_, l)| !l.v4.is_empty())
        .map(|(n, l)| nft::Forward {
            tap: n.tap.name.clone(),
            v4: l.v4.first().map(|g| nft::NatPair {
                guest: *g,
                snat: ROUTER4,
            }),
            v6: None,
        });
    let mut table = nft::Table::podtap(&nft::Spec {
        id: 0,
        sandbox: plan.id.to_string(),
        forward,
        guard,
        local_daddr_check: false,
    })
    .map_err(|e| {
        Error::kernel(
            "",
            "build nftables table",
            "",
            crate::error::KernelError::Netlink(e.0),
        )
    })?;
    table.name = netns.table.clone();
    table.marker = netns.marker.clone();
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_routed_attachment_records_the_netns_setting_and_the_rest_inherit_it() {
        let id = SandboxId::new("a").unwrap();
        let first = netns_part(&id, true, None, Some("0"));
        assert_eq!(first.proxy_ndp.as_deref(), Some("0"));
        assert!(first.marker.ends_with(" proxy_ndp=0"));
        let second = netns_part(
            &SandboxId::new("b").unwrap(),
            true,
            Some(&first.marker),
            Some("1"),
        );
        assert_eq!(
            second.proxy_ndp.as_deref(),
            Some("0"),
            "inherited, not the 1 podtap set"
        );
        let v4_only = netns_part(&id, false, None, Some("0"));
        assert_eq!(v4_only.proxy_ndp, None);
        assert_eq!(v4_only.marker, "podtap:a");
        assert_eq!(table_name(&id), table_name(&SandboxId::new("a").unwrap()));
        assert!(table_name(&id).starts_with("podtap_") && table_name(&id).len() == 15);
    }

    #[test]
    fn settings_name_the_interface() {
        let pod = pod_settings("eth0", true);
        assert!(pod.contains(&("ipv6/conf/eth0/force_forwarding".into(), "1")));
        let tap = tap_settings("tap0_kata", true, false);
        assert!(tap.contains(&("ipv4/conf/tap0_kata/accept_local".into(), "1")));
        assert!(!tap
            .iter()
            .any(|(k, _)| k.contains("forwarding") && k.starts_with("ipv6")));
        assert!(tap_guards("tap0_kata").contains(&("ipv6/conf/tap0_kata/accept_ra".into(), "0")));
    }
}
