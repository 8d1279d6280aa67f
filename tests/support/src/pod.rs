//! Pods: a pod netns joined to a peer ("node") netns by veths, as a CNI plugin leaves it.

use crate::netns::Netns;
use crate::run::{next, sh};

/// A pod netns joined to a peer ("node") netns by a veth: pod side `eth0`.
pub struct Pod {
    /// The pod's netns.
    pub pod: Netns,
    /// The peer ("node") netns.
    pub peer: Netns,
    /// Index for addresses: `198.18.<n>.0/24` and `2001:db8:<n>::/64` (1 to 249, kept unique per process).
    pub net: u32,
}

impl Default for Pod {
    fn default() -> Self {
        Self::new()
    }
}

impl Pod {
    /// Empty pod and peer netns.
    pub fn new() -> Self {
        // Never 0: 2001:db8:0::2 is written 2001:db8::2, and a test that
        // formats the address from `net` would not find its own.
        let net = 1 + next() % 249;
        Pod {
            pod: Netns::new("ptp"),
            peer: Netns::new("ptn"),
            net,
        }
    }

    /// An empty pod and peer with IPv6 DAD off in the pod, so link-local
    /// addresses are not "tentative" in one snapshot and settled in the next.
    pub fn without_dad() -> Self {
        let pod = Pod::new();
        pod.pod
            .exec("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");
        pod
    }

    /// The usual CNI-like pod: eth0 dual-stack with default routes.
    pub fn dual_stack() -> Self {
        let pod = Pod::new();
        pod.add_veth("eth0", "veth0", pod.net, true);
        pod
    }

    /// [`Pod::dual_stack`] with IPv6 DAD off in the pod ([`Pod::without_dad`]):
    /// one dual-stack veth `eth0`, stable snapshots.
    pub fn stable_dual_stack() -> Self {
        let pod = Pod::without_dad();
        pod.add_veth("eth0", "veth0", pod.net, true);
        pod
    }

    /// A dual-stack veth: pod `ifname` = `198.18.<sub>.2/24` + `2001:db8:<sub>::2/64`, peer .1 / ::1,
    /// default routes via the peer when `default_routes`.
    pub fn add_veth(&self, ifname: &str, peer_if: &str, sub: u32, default_routes: bool) {
        let (p, q) = (&self.pod.name, &self.peer.name);
        sh(&format!(
            "ip -n {q} link add {peer_if} type veth peer name {ifname} netns {p}"
        ));
        sh(&format!(
            "ip -n {q} link set {peer_if} up && ip -n {p} link set {ifname} up"
        ));
        sh(&format!("ip -n {q} addr add 198.18.{sub}.1/24 dev {peer_if} && ip -n {q} addr add 2001:db8:{sub:x}::1/64 dev {peer_if} nodad"));
        sh(&format!("ip -n {p} addr add 198.18.{sub}.2/24 dev {ifname} && ip -n {p} addr add 2001:db8:{sub:x}::2/64 dev {ifname} nodad"));
        if default_routes {
            sh(&format!(
                "ip -n {p} route add default via 198.18.{sub}.1 dev {ifname}"
            ));
            sh(&format!(
                "ip -n {p} -6 route add default via 2001:db8:{sub:x}::1 dev {ifname}"
            ));
        }
    }

    /// A macvlan `ifname` in the pod on top of a veth in the peer netns (the peer keeps a parent).
    pub fn add_macvlan(&self, ifname: &str, sub: u32) {
        let (p, q) = (&self.pod.name, &self.peer.name);
        let parent = format!("mvp{sub}");
        sh(&format!(
            "ip -n {q} link add {parent} type veth peer name {parent}b"
        ));
        sh(&format!(
            "ip -n {q} link set {parent} up && ip -n {q} link set {parent}b up"
        ));
        sh(&format!(
            "ip -n {q} link add {ifname} link {parent} type macvlan mode bridge"
        ));
        sh(&format!("ip -n {q} link set {ifname} netns {p}"));
        sh(&format!(
            "ip -n {p} link set {ifname} up && ip -n {p} addr add 198.18.{sub}.2/24 dev {ifname}"
        ));
    }
}
