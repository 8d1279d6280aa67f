//! Routed (`l3`) wiring, undone and checked: pure decisions on what the
//! netns holds now ([`L3Now`], read by `teardown::l3`).
//!
//! Every step is one the kernel takes again without harm, so a teardown
//! killed at any step and run again ends in the same place: a proxy entry
//! is deleted only while it is there, a local route re-added only while
//! its address is and the route is not, the pod interface's settings are
//! written from the record (not flipped), and the IPv6 addresses are put
//! back from the record whenever one of their local routes is missing.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::kernel::replay::Recorded;
use crate::plan::l3::{L3Plan, ROUTER4, ROUTER6};
use crate::plan::{NicPlan, Plan};

/// What routed wiring may have left in the netns, as read now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct L3Now {
    /// Every address, as `(ifindex, address)`.
    pub addresses: BTreeSet<(u32, IpAddr)>,
    /// The local table's local routes of single addresses, `(oif, address)`.
    pub local_routes: BTreeSet<(u32, IpAddr)>,
    /// The main table's routes to single addresses, `(oif, address)`.
    pub host_routes: BTreeSet<(u32, IpAddr)>,
    /// Proxy neighbour entries, `(ifindex, address)`.
    pub proxies: BTreeSet<(u32, IpAddr)>,
    /// The netns's nftables tables named `podtap_*`, with their markers.
    pub tables: Vec<(String, String)>,
}

/// One step of undoing routed wiring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum L3Step {
    /// Delete the attachment's nftables table (if it carries `marker`).
    DeleteTable {
        /// Its name.
        name: String,
        /// Its marker.
        marker: String,
    },
    /// Delete the pod interface's recorded IPv6 addresses that are there
    /// (`delete`), add every recorded one back oldest first (`add`: the
    /// kernel makes its local route again), then give back the `src` of
    /// the recorded routes that still exist (`routes`).
    ReaddV6 {
        /// The pod interface.
        link: u32,
        /// Its addresses there now, to delete.
        delete: Vec<Recorded>,
        /// Every recorded address, oldest first.
        add: Vec<Recorded>,
        /// The routes whose preferred source they were.
        routes: Vec<Recorded>,
    },
    /// Delete the proxy entry for `ip` on `link`.
    DeleteProxy {
        /// The link.
        link: u32,
        /// The address.
        ip: IpAddr,
    },
    /// Add back the local route of `ip` on `link` as the kernel made it.
    AddLocal4 {
        /// The pod interface.
        link: u32,
        /// Its address.
        ip: Ipv4Addr,
    },
    /// Write these settings back (`/proc/sys/net` keys, recorded values).
    Sysctls(Vec<(String, String)>),
}

/// The steps that undo routed wiring of `nics` (the routed NICs among
/// them whose pod interface is still there: the kernel took everything on
/// a gone one), on what `now` holds. `whole`: the attachment goes (its table
/// with it); otherwise only these NICs do, and the table stays for the
/// others (the caller builds it again).
pub fn undo(plan: &Plan, nics: &[&NicPlan], now: &L3Now, whole: bool) -> Vec<L3Step> {
    let mut steps = Vec::new();
    if let (true, Some(netns)) = (whole, &plan.l3) {
        if now.tables.iter().any(|(n, _)| *n == netns.table) {
            steps.push(L3Step::DeleteTable {
                name: netns.table.clone(),
                marker: netns.marker.clone(),
            });
        }
    }
    for nic in nics {
        if let Some(l3) = &nic.l3 {
            undo_nic(nic.pod.ifindex, l3, now, &mut steps);
        }
    }
    steps
}

fn undo_nic(pod: u32, l3: &L3Plan, now: &L3Now, steps: &mut Vec<L3Step>) {
    let on_pod = |ip: IpAddr| now.addresses.contains(&(pod, ip));
    let v6_lost = l3.v6.iter().any(|ip| {
        let ip = IpAddr::V6(*ip);
        !on_pod(ip) || !now.local_routes.contains(&(pod, ip))
    });
    if v6_lost && !l3.v6_addresses.is_empty() {
        let present = |r: &&Recorded| recorded_address(r).is_some_and(|ip| on_pod(IpAddr::V6(ip)));
        steps.push(L3Step::ReaddV6 {
            link: pod,
            delete: l3.v6_addresses.iter().filter(present).cloned().collect(),
            add: l3.v6_addresses.iter().rev().cloned().collect(),
            routes: l3.v6_src_routes.clone(),
        });
    }
    for ip in addresses(l3) {
        if now.proxies.contains(&(pod, ip)) {
            steps.push(L3Step::DeleteProxy { link: pod, ip });
        }
    }
    for ip in &l3.v4 {
        let a = IpAddr::V4(*ip);
        if on_pod(a) && !now.local_routes.contains(&(pod, a)) {
            steps.push(L3Step::AddLocal4 { link: pod, ip: *ip });
        }
    }
    if !l3.pod_sysctls.is_empty() {
        steps.push(L3Step::Sysctls(l3.pod_sysctls.clone()));
    }
}

/// The address of a recorded IPv6 address message.
pub fn recorded_address(r: &Recorded) -> Option<Ipv6Addr> {
    use rtnetlink::packet_route::address::AddressAttribute;
    use rtnetlink::packet_route::RouteNetlinkMessage;
    match r.message()? {
        RouteNetlinkMessage::NewAddress(a) => a.attributes.iter().find_map(|attr| match attr {
            AddressAttribute::Address(IpAddr::V6(ip)) => Some(*ip),
            _ => None,
        }),
        _ => None,
    }
}

/// The pod's addresses a routed NIC routes to its TAP, IPv4 first.
pub fn addresses(l3: &L3Plan) -> impl Iterator<Item = IpAddr> + '_ {
    l3.v4
        .iter()
        .map(|a| IpAddr::V4(*a))
        .chain(l3.v6.iter().map(|a| IpAddr::V6(*a)))
}

/// Whether the netns's `proxy_ndp` goes back to `value` once `ours` is
/// deleted: only when no other attachment's routed table is left.
pub fn proxy_ndp_back(plan: &Plan, now_tables: &[(String, String)]) -> Option<String> {
    let netns = plan.l3.as_ref()?;
    let others = now_tables.iter().any(|(n, _)| *n != netns.table);
    (!others).then(|| netns.proxy_ndp.clone()).flatten()
}

/// One way a routed NIC is not as built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drift {
    /// The kernel put back the local route of a pod address (the pod
    /// interface went down and up): the netns keeps the guest's traffic.
    LocalRouteBack(IpAddr),
    /// The route of a pod address to the TAP is gone (the TAP went down).
    HostRouteMissing(IpAddr),
    /// The proxy entry for a pod address on the pod interface is gone (it
    /// went down: the node's ARP and neighbour solicitations for the
    /// address go unanswered).
    ProxyMissing(IpAddr),
    /// The TAP lost one of the netns's own addresses.
    TapAddressMissing(IpAddr),
    /// The pod interface lost one of the pod's IPv6 addresses (the kernel
    /// drops them when it goes down): the node's neighbour solicitations
    /// for the guest's address go unanswered. `record`: the address as
    /// recorded at attach, to add back.
    PodAddressLost(Ipv6Addr, Recorded),
}

impl fmt::Display for Drift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Drift::LocalRouteBack(ip) => write!(
                f,
                "the local route of {ip} is back on the pod interface: the netns keeps the guest's traffic"
            ),
            Drift::HostRouteMissing(ip) => write!(f, "the route of {ip} to the TAP is missing"),
            Drift::ProxyMissing(ip) => {
                write!(f, "the proxy entry for {ip} on the pod interface is missing")
            }
            Drift::TapAddressMissing(ip) => write!(f, "the TAP's address {ip} is missing"),
            Drift::PodAddressLost(ip, _) => write!(f, "the pod interface lost its address {ip}"),
        }
    }
}

/// How routed NIC `l3` between `pod` and `tap` differs from what was built.
pub fn drift(l3: &L3Plan, pod: u32, tap: u32, now: &L3Now) -> Vec<Drift> {
    let mut out = Vec::new();
    if !l3.v4.is_empty() && !now.addresses.contains(&(tap, IpAddr::V4(ROUTER4))) {
        out.push(Drift::TapAddressMissing(IpAddr::V4(ROUTER4)));
    }
    if !l3.v6.is_empty() && !now.addresses.contains(&(tap, IpAddr::V6(ROUTER6))) {
        out.push(Drift::TapAddressMissing(IpAddr::V6(ROUTER6)));
    }
    for rec in &l3.v6_addresses {
        let Some(ip) = recorded_address(rec) else {
            continue;
        };
        if l3.v6.contains(&ip) && !now.addresses.contains(&(pod, IpAddr::V6(ip))) {
            out.push(Drift::PodAddressLost(ip, rec.clone()));
        }
    }
    for ip in addresses(l3) {
        if now.local_routes.contains(&(pod, ip)) {
            out.push(Drift::LocalRouteBack(ip));
        }
        if !now.host_routes.contains(&(tap, ip)) {
            out.push(Drift::HostRouteMissing(ip));
        }
        if !now.proxies.contains(&(pod, ip)) {
            out.push(Drift::ProxyMissing(ip));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l3() -> L3Plan {
        L3Plan {
            v4: vec!["198.18.10.2".parse().unwrap()],
            v6: vec!["2001:db8:10::2".parse().unwrap()],
            pod_sysctls: vec![("ipv4/conf/eth0/forwarding".into(), "0".into())],
            ..Default::default()
        }
    }

    fn built(pod: u32, tap: u32) -> L3Now {
        let p4: IpAddr = "198.18.10.2".parse().unwrap();
        let p6: IpAddr = "2001:db8:10::2".parse().unwrap();
        L3Now {
            addresses: [
                (pod, p4),
                (pod, p6),
                (tap, IpAddr::V4(ROUTER4)),
                (tap, IpAddr::V6(ROUTER6)),
            ]
            .into(),
            local_routes: BTreeSet::new(),
            host_routes: [(tap, p4), (tap, p6)].into(),
            proxies: [(pod, p4), (pod, p6)].into(),
            tables: Vec::new(),
        }
    }

    #[test]
    fn a_built_nic_has_no_drift_and_a_flapped_pod_interface_has_its_local_route_back() {
        let mut now = built(2, 9);
        assert!(drift(&l3(), 2, 9, &now).is_empty());
        let p4: IpAddr = "198.18.10.2".parse().unwrap();
        now.local_routes.insert((2, p4));
        now.proxies.retain(|(i, _)| *i != 2);
        let d = drift(&l3(), 2, 9, &now);
        assert!(d.contains(&Drift::LocalRouteBack(p4)));
        assert!(d.contains(&Drift::ProxyMissing(p4)));
        assert_eq!(d.len(), 3, "{d:?}");
    }

    #[test]
    fn undo_takes_only_what_is_there_and_puts_back_only_what_is_missing() {
        let now = built(2, 9);
        let mut plan = l3();
        plan.v6_addresses = Vec::new();
        let steps = {
            let mut s = Vec::new();
            undo_nic(2, &plan, &now, &mut s);
            s
        };
        let p4: Ipv4Addr = "198.18.10.2".parse().unwrap();
        assert!(steps.contains(&L3Step::AddLocal4 { link: 2, ip: p4 }));
        assert_eq!(
            steps
                .iter()
                .filter(|s| matches!(s, L3Step::DeleteProxy { .. }))
                .count(),
            2
        );
        // Run again after it finished: only the settings are written again.
        let mut after = now.clone();
        after.proxies.retain(|(i, _)| *i != 2);
        after.local_routes.insert((2, IpAddr::V4(p4)));
        after
            .local_routes
            .insert((2, "2001:db8:10::2".parse().unwrap()));
        let mut s = Vec::new();
        undo_nic(2, &plan, &after, &mut s);
        assert_eq!(s, [L3Step::Sysctls(plan.pod_sysctls.clone())]);
    }
}
