//! Routed (`l3`) wiring with real QEMU guests (TCG): the pod netns's own
//! netfilter sees the guest's traffic, both families, every NIC.
//!
//! 1. A pod built by the CNI `bridge` plugin (dual-stack host-local) with a
//!    second network `net1` (another bridge network, reached through source
//!    rules), and the netfilter a service mesh and network policy put in a
//!    pod netns: a DNAT of port 80 to the guest's 8080, Istio's outbound
//!    REDIRECT of the guest's TCP to a listener on 15001 (which reads the
//!    original destination), an inbound TPROXY to a transparent listener
//!    (ambient's shape), and a FORWARD drop. The TAP of eth0 is named
//!    `tap0_kata`, as Istio's Kata mode expects. The guest reaches out and is
//!    reached, a reply from net1's address leaves by net1, conntrack lists the
//!    guest's flows, a packet from a foreign source is dropped, and detach
//!    leaves the netns byte-identical (every table, rules, neighbours,
//!    `sysctl -a`, nftables). The same pod in tc mode then shows why tc
//!    cannot: the DNAT and FORWARD counters stay at 0.
//! 2. A Calico-shaped pod (/32 and /128, 169.254.1.1 on-link, the host
//!    veth's link-local IPv6 gateway), both ways.
//! 3. An L3-only pod link (a NOARP veth, device-only default routes), both ways.
//! 4. The pod interface down and up under `podtap watch`: `check` fails
//!    until watch repairs it, and the guest is reachable again.

use podtap_testkit::listen::{Answer, Listener};
use podtap_testkit::shapes::RoutedPod;
use podtap_testkit::vm::{
    address_of, assert_line, assert_no_errors, boot_live, example, mac_of, reach_in,
    vm_prerequisites,
};
use podtap_testkit::{
    check, cni_add, full_snapshot, iface, podtap_ok, settle, sh_ok, stderr, tool_or_skip, unique,
    Netns, Pod, StateDir, Watch,
};

const BIN: &str = env!("CARGO_BIN_EXE_podtap");

fn prerequisites(test: &str) -> bool {
    vm_prerequisites(test)
        && ["iptables", "ip6tables", "nft", "conntrack", "socat"]
            .iter()
            .all(|t| tool_or_skip(test, t))
}

/// `attach --mode MODE` with `extra`: the description.
fn attach(
    state: &StateDir,
    pod: &Netns,
    id: &str,
    mode: &str,
    extra: &[&str],
) -> serde_json::Value {
    let netns = pod.path_str();
    let mut args = vec!["attach", "--netns", &netns, "--id", id, "--mode", mode];
    args.extend_from_slice(extra);
    serde_json::from_str(&podtap_ok(BIN, &state.0, &args)).expect("attach prints JSON")
}

/// One HTTP request from `ns` to `host` (IPv6 without brackets) port
/// `port`: the last line of the answer, empty when there is none.
fn fetch(ns: &Netns, host: &str, port: u16) -> String {
    let target = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | timeout 8 ip netns exec {} socat -T 4 - TCP:{target}",
            ns.name
        ))
        .output()
        .expect("socat");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or_default()
        .to_string()
}

/// The packet counter of the first rule of `iptables-save -c` output (of
/// `tool` in `ns`, table `table`) that contains `needle`.
fn rule_packets(ns: &Netns, tool: &str, table: &str, needle: &str) -> u64 {
    let saved = ns.exec(&format!("{tool}-save -c -t {table}"));
    let line = saved
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no {tool} rule with {needle:?} in:\n{saved}"));
    line.trim_start_matches('[')
        .split(':')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no counter in {line:?}"))
}

/// The packets podtap's own table dropped in `ns` (its anti-spoofing rules).
fn podtap_drops(ns: &Netns) -> u64 {
    let ruleset = ns.exec("nft list ruleset");
    ruleset
        .lines()
        .filter(|l| l.contains(" drop") && l.contains("counter packets"))
        .filter_map(|l| {
            l.split("counter packets ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// The bridge-CNI pod of test 1: eth0 on node bridge A (the default
/// routes), net1 on node bridge B, reached through a source rule (table
/// 120), and the node's own addresses beyond the gateways.
struct MeshPod {
    node: Netns,
    pod: Netns,
    n: u32,
    ipam: std::path::PathBuf,
}

impl MeshPod {
    fn new() -> Self {
        let node = Netns::new("l3n");
        let pod = Netns::new("l3p");
        let ipam = std::env::temp_dir().join(unique("podtap-ipam-"));
        let n = 20 + std::process::id() % 100;
        for ns in [&node, &pod] {
            ns.exec("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");
        }
        let bridge = |name: &str, br: &str, v4: String, v6: String, routes: serde_json::Value| {
            serde_json::json!({
                "cniVersion": "1.0.0", "name": name, "type": "bridge",
                "bridge": br, "isGateway": true, "ipMasq": false,
                "ipam": { "type": "host-local", "dataDir": ipam,
                          "ranges": [[{"subnet": v4}], [{"subnet": v6}]], "routes": routes }
            })
        };
        let defaults = serde_json::json!([{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]);
        let conf = bridge(
            "l3-a",
            "l3br0",
            format!("198.18.{n}.0/24"),
            format!("2001:db8:{n:x}::/64"),
            defaults,
        );
        cni_add(&node, &pod, "bridge", "eth0", &conf);
        let m = n + 100;
        let conf = bridge(
            "l3-b",
            "l3br1",
            format!("198.18.{m}.0/24"),
            format!("2001:db8:{m:x}::/64"),
            serde_json::json!([]),
        );
        cni_add(&node, &pod, "bridge", "net1", &conf);
        node.ip(&format!("addr add 198.19.{n}.1/32 dev lo"));
        node.ip(&format!("addr add 2001:db8:ff:{n:x}::1/128 dev lo"));
        let p = MeshPod { node, pod, n, ipam };
        let net1 = p.address("net1", false);
        p.pod
            .ip(&format!("rule add from {net1} lookup 120 pref 100"));
        p.pod.ip(&format!(
            "route add default via 198.18.{m}.1 dev net1 table 120"
        ));
        settle(&p.node);
        settle(&p.pod);
        p
    }

    fn address(&self, ifname: &str, v6: bool) -> String {
        let family = if v6 { "-6" } else { "-4" };
        let j = self
            .pod
            .ip_json(&format!("{family} addr show dev {ifname} scope global"));
        j[0]["addr_info"][0]["local"]
            .as_str()
            .expect("an address")
            .to_string()
    }

    fn far(&self, v6: bool) -> String {
        if v6 {
            format!("2001:db8:ff:{:x}::1", self.n)
        } else {
            format!("198.19.{}.1", self.n)
        }
    }

    fn gateway(&self, v6: bool) -> String {
        if v6 {
            format!("2001:db8:{:x}::1", self.n)
        } else {
            format!("198.18.{}.1", self.n)
        }
    }

    /// What a mesh and network policy put in the pod netns, both families.
    fn netfilter(&self) {
        let (p4, p6) = (self.address("eth0", false), self.address("eth0", true));
        for (tool, to) in [
            ("iptables", format!("{p4}:8080")),
            ("ip6tables", format!("[{p6}]:8080")),
        ] {
            let rules = format!(
                "-t nat -A PREROUTING -i eth0 -p tcp --dport 80 -j DNAT --to-destination {to}
                 -t nat -A PREROUTING -i tap0_kata -p tcp --dport 443 -j REDIRECT --to-ports 15001
                 -A FORWARD -i tap0_kata -p tcp --dport 7777 -j DROP"
            );
            for rule in rules.lines() {
                self.pod.exec(&format!("{tool} {}", rule.trim()));
            }
            // The TPROXY rule comes and goes after attach; iptables leaves
            // its table and chain behind, so they are there from the start.
            self.pod
                .exec(&format!("{tool} -t mangle -A PREROUTING -j RETURN"));
            self.pod
                .exec(&format!("{tool} -t mangle -D PREROUTING -j RETURN"));
        }
    }

    /// Ambient's inbound capture: port 9090 to a transparent listener on 15008.
    fn tproxy(&self, add: bool) {
        let (op, rop) = if add { ("-A", "add") } else { ("-D", "del") };
        for (tool, ip) in [("iptables", "ip -4"), ("ip6tables", "ip -6")] {
            self.pod.exec(&format!(
                "{tool} -t mangle {op} PREROUTING -i eth0 -p tcp --dport 9090 -j TPROXY --on-port 15008 --tproxy-mark 0x111/0x111"
            ));
            self.pod
                .exec(&format!("{ip} rule {rop} fwmark 0x111/0x111 lookup 100"));
            self.pod
                .exec(&format!("{ip} route {rop} local default dev lo table 100"));
        }
    }
}

impl Drop for MeshPod {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.ipam);
    }
}

#[test]
fn a_mesh_pods_netfilter_sees_a_routed_guest_and_not_a_tc_one() {
    let test = "a_mesh_pods_netfilter_sees_a_routed_guest_and_not_a_tc_one";
    if !prerequisites(test) {
        return;
    }
    let mp = MeshPod::new();
    mp.netfilter();
    let pod_path = mp.pod.path_str();
    let _origdst = Listener::start(&pod_path, 15001, Answer::OriginalDestination);
    let _tproxied = Listener::start(&pod_path, 15008, Answer::Local);
    let before = full_snapshot(&mp.pod);
    routed_boot(&mp);
    same(&before, &full_snapshot(&mp.pod));
    tc_boot(&mp);
}

/// Test 1, routed.
fn routed_boot(mp: &MeshPod) {
    let state = StateDir::new();
    let id = unique("l3mesh");
    let desc = attach(&state, &mp.pod, &id, "l3", &["--nic", "eth0:tap=tap0_kata"]);
    assert_eq!(iface(&desc, "eth0")["wiring"], "l3");
    assert_eq!(iface(&desc, "eth0")["tap"]["name"], "tap0_kata");
    assert_eq!(iface(&desc, "net1")["wiring"], "l3");
    mp.tproxy(true);
    let (p4, p6, net1) = (
        address_of(&desc, "eth0", "inet"),
        address_of(&desc, "eth0", "inet6"),
        address_of(&desc, "net1", "inet"),
    );
    let (far4, far6) = (mp.far(false), mp.far(true));
    let net1_gw = format!("198.18.{}.1", mp.n + 100);
    let spoof4 = format!("198.18.{}.77", mp.n);
    let spoof6 = format!("2001:db8:{:x}::77", mp.n);
    let append = format!(
        "podtap.httpd=8080 podtap.ping={},{},{far4},{far6},{net1_gw} \
         podtap.fetch={far4}:443,[{far6}]:443,{far4}:7777,[{far6}]:7777 \
         podtap.spoof={spoof4}>{far4},{spoof6}>{far6} podtap.hold=25",
        mp.gateway(false),
        mp.gateway(true),
    );
    // A counter at the node for what the guest sent from foreign sources.
    mp.node.exec(&format!(
        "nft add table inet l3t \\; add chain inet l3t c {{ type filter hook prerouting priority 0 \\; }} \\; \
         add rule inet l3t c ip saddr {spoof4} counter \\; add rule inet l3t c ip6 saddr {spoof6} counter"
    ));
    // And one in the pod for where the guest's replies from net1's address leave.
    mp.pod.exec(&format!(
        "nft add table inet l3t \\; add chain inet l3t c {{ type filter hook postrouting priority 0 \\; }} \\; \
         add rule inet l3t c oifname net1 ip saddr {net1} icmp type echo-reply counter \\; \
         add rule inet l3t c oifname eth0 ip saddr {net1} icmp type echo-reply counter"
    ));
    let console = boot_live(
        BIN,
        &example("qemu-by-name.sh"),
        &state.0,
        &id,
        &append,
        &[],
        |_| {
            for (ip, name) in [(&p4, "eth0"), (&p6, "eth0"), (&net1, "net1")] {
                reach_in(&mp.node, ip, &mac_of(&desc, name), 2);
            }
            reached_through_netfilter(mp, &p4, &p6);
            let far = mp.far(false);
            assert!(sh_ok(&format!(
                "ip netns exec {} ping -c 2 -W 2 -I {far} {net1}",
                mp.node.name
            )));
        },
    );
    for target in [
        mp.gateway(false),
        mp.gateway(true),
        far4.clone(),
        far6.clone(),
        net1_gw,
    ] {
        assert_line(&console, &format!("PODTAP-PING OK {target}"));
    }
    // Outbound capture: the listener read where the guest meant to go.
    assert_line(
        &console,
        &format!("PODTAP-FETCH OK {far4}:443 ORIGDST {far4}:443"),
    );
    assert_line(
        &console,
        &format!("PODTAP-FETCH OK [{far6}]:443 ORIGDST [{far6}]:443"),
    );
    // Network policy: the FORWARD drop stopped the guest, and counted it.
    assert_line(&console, &format!("PODTAP-FETCH FAIL {far4}:7777"));
    assert_line(&console, &format!("PODTAP-FETCH FAIL [{far6}]:7777"));
    assert!(rule_packets(&mp.pod, "iptables", "filter", "--dport 7777") > 0);
    assert!(rule_packets(&mp.pod, "ip6tables", "filter", "--dport 7777") > 0);
    no_errors_but_the_dropped(&console);
    // The node's connections to :80, answered by the guest's :8080.
    let conntrack = mp.pod.exec("conntrack -L");
    for p in [&p4, &p6] {
        assert!(
            conntrack.contains(&format!("dport=80 src={p} ")) && conntrack.contains("sport=8080"),
            "conntrack lists the guest's flows:\n{conntrack}"
        );
    }
    // Anti-spoofing: nothing from a foreign source reached the node.
    let node_counts = mp.node.exec("nft list table inet l3t");
    assert_eq!(
        node_counts.matches("counter packets 0 ").count(),
        2,
        "the node saw the guest's spoofed packets:\n{node_counts}"
    );
    assert!(
        podtap_drops(&mp.pod) >= 4,
        "podtap's table dropped the spoofed pings"
    );
    let pod_counts = mp.pod.exec("nft list table inet l3t");
    let replies: Vec<u64> = pod_counts
        .split("counter packets ")
        .skip(1)
        .filter_map(|s| s.split(' ').next()?.parse().ok())
        .collect();
    assert!(
        replies.len() == 2 && replies[0] >= 2 && replies[1] == 0,
        "the guest's replies from net1's address left by net1, not eth0: {pod_counts}"
    );
    assert!(check(BIN, &state, &id).status.success(), "check passes");
    podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
    mp.tproxy(false);
    mp.node.exec("nft delete table inet l3t");
    mp.pod.exec("nft delete table inet l3t");
}

/// From the node: the DNAT to the guest's 8080 and the inbound TPROXY, both
/// families, each counted by the pod's rules.
fn reached_through_netfilter(mp: &MeshPod, p4: &str, p6: &str) {
    for ip in [p4, p6] {
        assert_eq!(
            fetch(&mp.node, ip, 80),
            "podtap-guest-httpd",
            "DNAT :80 to the guest's :8080 ({ip})"
        );
        let local = if ip.contains(':') {
            format!("[{ip}]:9090")
        } else {
            format!("{ip}:9090")
        };
        assert_eq!(
            fetch(&mp.node, ip, 9090),
            format!("LOCAL {local}"),
            "TPROXY ({ip})"
        );
    }
    assert!(rule_packets(&mp.pod, "iptables", "nat", "--dport 80") > 0);
    assert!(rule_packets(&mp.pod, "ip6tables", "nat", "--dport 80") > 0);
}

/// Test 1, in tc mode: the guest is reachable, and the pod's netfilter never sees it.
fn tc_boot(mp: &MeshPod) {
    let state = StateDir::new();
    let id = unique("tcmesh");
    let zero = |tool: &str, table: &str, needle: &str| {
        let n = rule_packets(&mp.pod, tool, table, needle);
        mp.pod.exec(&format!("{tool} -t {table} -Z"));
        n
    };
    for (tool, table, needle) in [
        ("iptables", "nat", "--dport 80"),
        ("iptables", "filter", "--dport 7777"),
    ] {
        zero(tool, table, needle);
    }
    let desc = attach(&state, &mp.pod, &id, "tc", &["--nic", "eth0:tap=tap0_kata"]);
    let (p4, far4) = (address_of(&desc, "eth0", "inet"), mp.far(false));
    let append = format!("podtap.httpd=8080 podtap.fetch={far4}:7777 podtap.hold=10");
    let console = boot_live(
        BIN,
        &example("qemu-by-name.sh"),
        &state.0,
        &id,
        &append,
        &[],
        |_| {
            assert_eq!(
                fetch(&mp.node, &p4, 8080),
                "podtap-guest-httpd",
                "the guest serves"
            );
            assert_eq!(
                fetch(&mp.node, &p4, 80),
                "",
                "nothing answers :80: the DNAT never saw it"
            );
        },
    );
    no_errors_but_the_dropped(&console);
    // The node refused :7777 (nothing listens there), so the guest's
    // request got an answer without passing the pod's FORWARD chain.
    assert_line(&console, &format!("PODTAP-FETCH FAIL {far4}:7777"));
    assert_eq!(
        rule_packets(&mp.pod, "iptables", "nat", "--dport 80"),
        0,
        "tc: DNAT counts 0"
    );
    assert_eq!(
        rule_packets(&mp.pod, "iptables", "filter", "--dport 7777"),
        0,
        "tc: FORWARD counts 0"
    );
    podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
}

/// Detach restored the pod netns exactly: `after` is `before`, and if not,
/// the lines that differ say how.
fn same(before: &str, after: &str) {
    let gone: Vec<&str> = before
        .lines()
        .filter(|l| !after.lines().any(|a| a == *l))
        .collect();
    let new: Vec<&str> = after
        .lines()
        .filter(|l| !before.lines().any(|b| b == *l))
        .collect();
    assert!(
        before == after,
        "detach left the pod netns changed: gone {gone:#?}, new {new:#?}"
    );
}

/// No error or failure in the guest's results but its requests to :7777
/// (dropped by the pod's FORWARD rule, or refused by the node).
fn no_errors_but_the_dropped(console: &str) {
    let unexpected: Vec<&str> = podtap_testkit::vm::results(console)
        .into_iter()
        .filter(|l| {
            l.starts_with("PODTAP-ERROR") || (l.contains(" FAIL ") && !l.ends_with(":7777"))
        })
        .collect();
    assert!(unexpected.is_empty(), "guest errors: {unexpected:#?}");
}

/// Boot a guest on `pod` attached in l3 mode, ping `out` from it, and reach
/// each of `inbound` (pod interface, address) from `node` while it holds.
fn boot_both_ways(
    pod: &Netns,
    node: &Netns,
    out: &[String],
    noarp: bool,
) -> (String, serde_json::Value) {
    let state = StateDir::new();
    let id = unique("l3vm");
    let desc = attach(&state, pod, &id, "l3", &[]);
    let inbound = [
        address_of(&desc, "eth0", "inet"),
        address_of(&desc, "eth0", "inet6"),
    ];
    let mac = mac_of(&desc, "eth0");
    let append = format!("podtap.ping={} podtap.hold=8", out.join(","));
    let console = boot_live(
        BIN,
        &example("qemu-by-name.sh"),
        &state.0,
        &id,
        &append,
        &[],
        |_| {
            for ip in &inbound {
                if noarp {
                    // No neighbour entry to look at on a NOARP link: the pings answer.
                    let ping = if ip.contains(':') { "ping -6" } else { "ping" };
                    let cmd = format!("ip netns exec {} {ping} -c 2 -W 2 {ip}", node.name);
                    assert!(sh_ok(&cmd), "{ip} is not reachable from the node");
                } else {
                    reach_in(node, ip, &mac, 2);
                }
            }
        },
    );
    for target in out {
        assert_line(&console, &format!("PODTAP-PING OK {target}"));
    }
    assert_no_errors(&console);
    podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
    (console, desc)
}

#[test]
fn a_routed_guest_on_a_calico_shaped_dual_stack_pod_reaches_the_node_and_back() {
    let test = "a_routed_guest_on_a_calico_shaped_dual_stack_pod_reaches_the_node_and_back";
    if !prerequisites(test) {
        return;
    }
    let (rp, _, far6) = RoutedPod::calico_dual_stack(30);
    let before = full_snapshot(&rp.pod);
    let (console, desc) =
        boot_both_ways(&rp.pod, &rp.node, &[rp.node_address.clone(), far6], false);
    assert_eq!(iface(&desc, "eth0")["wiring"], "l3");
    assert!(
        console.contains("default via 169.254.1.1 dev"),
        "the pod's on-link gateway, as it is"
    );
    assert!(
        console.contains("default via fe80::1 dev"),
        "IPv6 through the TAP's own address"
    );
    same(&before, &full_snapshot(&rp.pod));
}

#[test]
fn a_routed_guest_on_an_l3_only_pod_link_reaches_the_node_and_back() {
    let test = "a_routed_guest_on_an_l3_only_pod_link_reaches_the_node_and_back";
    if !prerequisites(test) {
        return;
    }
    let node = Netns::new("l3on");
    let pod = Netns::new("l3op");
    let n = 40 + std::process::id() % 50;
    let (p4, p6) = (format!("198.18.{n}.2"), format!("2001:db8:{n:x}::2"));
    let (far4, far6) = (format!("198.19.{n}.1"), format!("2001:db8:ff:{n:x}::1"));
    node.ip(&format!(
        "link add lxc{n} type veth peer name eth0 netns {}",
        pod.name
    ));
    // NOARP both ends: a frame carries its sender's own MAC as destination,
    // so both ends share one (what a netkit or ipvlan-L3 pod has no L2 for).
    let mac = pod.ip_json("link show eth0")[0]["address"]
        .as_str()
        .expect("mac")
        .to_string();
    node.ip(&format!("link set lxc{n} address {mac} arp off up"));
    pod.ip("link set eth0 arp off up");
    for ns in [&node, &pod] {
        ns.exec("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");
    }
    node.ip(&format!("addr add {far4}/32 dev lo"));
    node.ip(&format!("addr add {far6}/128 dev lo"));
    node.ip(&format!("route add {p4}/32 dev lxc{n}"));
    node.ip(&format!("-6 route add {p6}/128 dev lxc{n}"));
    pod.ip(&format!("addr add {p4}/32 dev eth0"));
    pod.ip(&format!("-6 addr add {p6}/128 dev eth0 nodad"));
    pod.ip("route add default dev eth0");
    pod.ip("-6 route add default dev eth0");
    settle(&pod);
    let before = full_snapshot(&pod);
    let (console, _) = boot_both_ways(&pod, &node, &[far4, far6], true);
    assert!(
        console.contains("default via 169.254.0.1 dev"),
        "the device route goes via the TAP"
    );
    assert!(
        !console.contains("NOARP"),
        "the guest's link resolves addresses"
    );
    same(&before, &full_snapshot(&pod));
}

#[test]
fn a_pod_interface_down_and_up_is_repaired_by_watch() {
    let test = "a_pod_interface_down_and_up_is_repaired_by_watch";
    if !prerequisites(test) {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let state = StateDir::new();
    let id = unique("l3flap");
    let desc = attach(&state, &pod.pod, &id, "l3", &[]);
    let (p4, p6) = (
        address_of(&desc, "eth0", "inet"),
        address_of(&desc, "eth0", "inet6"),
    );
    let mac = mac_of(&desc, "eth0");
    let console = boot_live(
        BIN,
        &example("qemu-by-name.sh"),
        &state.0,
        &id,
        "podtap.hold=20",
        &[],
        |_| {
            reach_in(&pod.peer, &p4, &mac, 1);
            pod.pod.ip("link set eth0 down");
            pod.pod.ip("link set eth0 up");
            settle(&pod.pod);
            let out = check(BIN, &state, &id);
            assert!(!out.status.success(), "check reports the flap");
            let said = stderr(&out);
            assert!(
                said.contains(&format!("the local route of {p4} is back")),
                "{said}"
            );
            assert!(said.contains(&format!("lost its address {p6}")), "{said}");
            let watch = Watch::start(BIN, &state.0, &id, &[]);
            assert!(
                podtap_testkit::poll(
                    std::time::Duration::from_secs(15),
                    std::time::Duration::from_millis(200),
                    || check(BIN, &state, &id).status.success()
                ),
                "watch repairs it: {}",
                stderr(&check(BIN, &state, &id))
            );
            for ip in [&p4, &p6] {
                reach_in(&pod.peer, ip, &mac, 2);
            }
            drop(watch);
        },
    );
    assert_no_errors(&console);
    podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
}
