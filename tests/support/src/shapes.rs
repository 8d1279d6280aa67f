//! Pods shaped as Calico and Cilium build them, and the CNI results their
//! plugins hand the next plugin of the chain (at 0.3.1, the version their
//! conflists say). Neither CNI can run here, so the pods are built with
//! iproute2 as their plugins build them, from their sources:
//! - Calico, `cni-plugin/pkg/k8s/k8s.go` and `dataplane/linux`: a veth whose
//!   host end is `cali…` with proxy ARP on, `eth0` with a /32,
//!   `169.254.1.1 dev eth0 scope link` and `default via 169.254.1.1`. The
//!   result has one entry named after the host veth with the pod's MAC and
//!   sandbox, and a /32 with no gateway and no `interface` index.
//! - Cilium, `plugins/cilium-cni/cmd/cmd.go`: a veth whose host end is
//!   `lxc…`, `eth0` with a /32, `GW/32 dev eth0 scope link` and `default via
//!   GW` with a route MTU below the link's (tunnel overhead). GW is the
//!   node's `cilium_host` address. The result lists the host `lxc…` and the
//!   pod's `eth0` and, in older releases, no `interface` index.
//!
//! The node netns also holds `198.19.N.1` on `lo`: an address of the node
//! the pod reaches through its default route.

use serde_json::{json, Value};

use crate::netns::Netns;

/// Which CNI shaped the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Calico,
    Cilium,
}

/// A node netns and a pod netns joined by a veth, shaped as [`Shape`] says.
pub struct RoutedPod {
    pub node: Netns,
    pub pod: Netns,
    pub shape: Shape,
    /// The host end of the veth, in `node`.
    pub host: String,
    /// The pod's address (a /32 on `eth0`).
    pub address: String,
    /// The pod's default gateway: 169.254.1.1, or Cilium's `cilium_host` address.
    pub gateway: String,
    /// An address of the node beyond the gateway.
    pub node_address: String,
}

/// The route MTU Cilium gives the default route in tunnel mode.
pub const CILIUM_ROUTE_MTU: u32 = 1450;

impl RoutedPod {
    /// Build the pod; `n` (0-49) keeps its addresses apart from other pods of the test.
    pub fn new(shape: Shape, n: u32) -> Self {
        let node = Netns::new("crn");
        let pod = Netns::new("crp");
        let prefix = match shape {
            Shape::Calico => "cali",
            Shape::Cilium => "lxc",
        };
        let host = format!("{prefix}{:08x}", std::process::id().wrapping_mul(31) + n);
        let host = host[..host.len().min(15)].to_string();
        let net = 100 + n;
        let address = format!("198.18.{net}.{}", 2 + std::process::id() % 200);
        let node_address = format!("198.19.{net}.1");
        node.ip(&format!(
            "link add {host} type veth peer name eth0 netns {}",
            pod.name
        ));
        pod.ip(&format!("addr add {address}/32 dev eth0"));
        pod.ip("link set eth0 up");
        node.ip(&format!("link set {host} up"));
        node.ip(&format!("addr add {node_address}/32 dev lo"));
        node.ip(&format!("route add {address}/32 dev {host}"));
        let gateway = match shape {
            Shape::Calico => {
                // Proxy ARP answers only for what the node routes elsewhere:
                // a default route out of an uplink, as a node has.
                node.ip("link add uplink0 type veth peer name uplink1");
                node.ip("link set uplink0 up");
                node.ip("link set uplink1 up");
                node.ip(&format!("addr add 198.18.{}.1/24 dev uplink0", 150 + n));
                node.ip(&format!(
                    "route add default via 198.18.{}.2 dev uplink0",
                    150 + n
                ));
                // The kernel answers ARP by proxy only on a forwarding
                // device; Calico's nodes forward.
                node.exec(&format!(
                    "sysctl -qw net.ipv4.conf.all.forwarding=1 net.ipv4.conf.{host}.forwarding=1 net.ipv4.conf.{host}.proxy_arp=1"
                ));
                pod.ip("route add 169.254.1.1 dev eth0 scope link");
                pod.ip("route add default via 169.254.1.1 dev eth0");
                "169.254.1.1".to_string()
            }
            Shape::Cilium => {
                // The node owns the gateway (cilium_host's address) and so
                // answers ARP for it on the lxc veth.
                let gw = format!("198.18.{net}.1");
                node.ip(&format!("addr add {gw}/32 dev lo"));
                pod.ip(&format!("route add {gw}/32 dev eth0 scope link"));
                pod.ip(&format!(
                    "route add default via {gw} dev eth0 mtu {CILIUM_ROUTE_MTU}"
                ));
                gw
            }
        };
        RoutedPod {
            node,
            pod,
            shape,
            host,
            address,
            gateway,
            node_address,
        }
    }

    /// [`RoutedPod::new`] with Calico's IPv6 too: the host veth's MAC is
    /// `ee:ee:ee:ee:ee:ee`, so the pod's gateway is its link-local
    /// `fe80::ecee:eeff:feee:eeee`; a /128 on eth0, a /128 route to it on
    /// the node, and an address of the node beyond it. Returns the pod's
    /// IPv6 address and that node address.
    pub fn calico_dual_stack(n: u32) -> (Self, String, String) {
        let rp = RoutedPod::new(Shape::Calico, n);
        let net = 100 + n;
        let p6 = format!("2001:db8:{net:x}::5");
        let far6 = format!("2001:db8:ff:{net:x}::1");
        rp.node.ip(&format!("link set {} down", rp.host));
        rp.node
            .ip(&format!("link set {} address ee:ee:ee:ee:ee:ee", rp.host));
        rp.node.exec(&format!(
            "sysctl -qw net.ipv6.conf.{}.accept_dad=0 net.ipv6.conf.all.forwarding=1",
            rp.host
        ));
        rp.node.ip(&format!("link set {} up", rp.host));
        // Down took the node's route to the pod with it.
        rp.node
            .ip(&format!("route replace {}/32 dev {}", rp.address, rp.host));
        rp.node.ip(&format!("addr add {far6}/128 dev lo"));
        rp.node
            .ip(&format!("-6 route add {p6}/128 dev {}", rp.host));
        rp.pod.ip(&format!("-6 addr add {p6}/128 dev eth0 nodad"));
        rp.pod
            .ip("-6 route add default via fe80::ecee:eeff:feee:eeee dev eth0");
        crate::netns::settle(&rp.node);
        crate::netns::settle(&rp.pod);
        (rp, p6, far6)
    }

    /// The MAC of `ifname` in `ns`.
    pub fn mac(&self, ns: &Netns, ifname: &str) -> String {
        ns.ip_json(&format!("link show {ifname}"))[0]["address"]
            .as_str()
            .expect("mac")
            .to_string()
    }

    /// The result the CNI's own plugin hands podtap, at 0.3.1.
    pub fn prev_result(&self) -> Value {
        let pod_mac = self.mac(&self.pod, "eth0");
        let cidr = format!("{}/32", self.address);
        match self.shape {
            Shape::Calico => json!({
                "cniVersion": "0.3.1",
                "interfaces": [{ "name": self.host, "mac": pod_mac, "sandbox": self.pod.path_str() }],
                "ips": [{ "version": "4", "address": cidr }],
                "dns": {}
            }),
            Shape::Cilium => json!({
                "cniVersion": "0.3.1",
                "interfaces": [
                    { "name": self.host, "mac": self.mac(&self.node, &self.host) },
                    { "name": "eth0", "mac": pod_mac, "sandbox": self.pod.path_str() }
                ],
                "ips": [{ "version": "4", "address": cidr, "gateway": self.gateway }],
                "routes": [{ "dst": "0.0.0.0/0" }],
                "dns": {}
            }),
        }
    }
}
