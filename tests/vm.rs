//! End-to-end VM tests (root + QEMU): real Linux guests boot on podtap's TAPs,
//! configure themselves only from `podtap render guest-args`, and ping the
//! pod's real peers. See tests/guest/README.md for the guest.
//!
//! Three boots in all, several NICs per guest:
//! 1. a pod built by the CNI `bridge` (dual-stack host-local) and `macvlan`
//!    plugins, tc mode, QEMU by name in the pod netns (vmm-examples/qemu-by-name.sh);
//! 2. the same pod in bridge mode (the macvlan falls back to tc), and in tc
//!    mode with fd handover (vmm-examples/qemu-fds.sh). In these three runs the
//!    guest pings out and then stays up while the node reaches in over IPv4
//!    and IPv6 on the bridge interface and the macvlan, resolving the guest
//!    afresh five times: the peer's neighbour entry must hold the guest's MAC;
//! 3. a hand-built pod with MTU 9000 / 1400 veths, an onlink default route via
//!    169.254.1.1 and a route with its own MTU, `--queues 2`, QEMU started
//!    from the test's own netns with fd handover (vmm-examples/qemu-fds.sh).
//!
//! After each VM exits, `podtap detach` must leave the pod netns as it was.
//!
//! One more boot goes through the CNI door: hooks/cni/bridge-podtap.conflist
//! run plugin by plugin (the runner shared with tests/cni.rs), the guest on
//! the TAP of podtap's CNI result (and its resolver config from the result's
//! `dns`), then CNI DEL.

use std::process::{Command, Stdio};

use podtap_testkit::vm::{
    address_of, assert_line, assert_no_errors, boot, boot_reachable, example, guest, mac_of,
    nic_line, reach_in, vm_prerequisites, QEMU,
};
use podtap_testkit::{
    cni_add, conflist, container_id, iface, podtap_ok, root_or_skip, settle, settled_snapshot, sh,
    sh_ok, stderr, stdout, tool_or_skip, unique, Chain, Netns, StateDir, TempDir, PLUGINS,
};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// Test 1+2: CNI bridge + macvlan pod, tc mode then bridge mode, QEMU by name.

#[test]
fn cni_pod_boots_in_tc_and_bridge_mode() {
    let test = "cni_pod_boots_in_tc_and_bridge_mode";
    if !vm_prerequisites(test) {
        return;
    }
    let node = Netns::new("vmn");
    let pod = Netns::new("vmp");
    let state = StateDir::new();
    let ipam_dir = std::env::temp_dir().join(unique("podtap-ipam-"));
    let n = std::process::id() % 200 + 20;
    // Gateway addresses on the bridge must not wait for DAD.
    node.exec("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");
    pod.exec("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");

    // eth0: the CNI bridge plugin, dual-stack host-local, the bridge (gateway) in the node netns.
    let v4_gw = format!("198.18.{n}.1");
    let v6_gw = format!("2001:db8:77:{n:x}::1");
    cni_add(
        &node,
        &pod,
        "bridge",
        "eth0",
        &serde_json::json!({
            "cniVersion": "1.0.0", "name": "podtap-vm-bridge", "type": "bridge",
            "bridge": "ptbr0", "isGateway": true, "ipMasq": false,
            "ipam": {
                "type": "host-local", "dataDir": ipam_dir,
                "ranges": [[{"subnet": format!("198.18.{n}.0/24")}], [{"subnet": format!("2001:db8:77:{n:x}::/64")}]],
                "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]
            }
        }),
    );
    // net1: the CNI macvlan plugin on a veth of the node netns; a second macvlan
    // on the same master in the node netns is the peer to ping.
    node.ip("link add mvm0 type veth peer name mvm0p");
    node.ip("link set mvm0 up");
    node.ip("link set mvm0p up");
    let mv_peer = format!("198.19.{n}.1");
    node.ip("link add mvpeer link mvm0 type macvlan mode bridge");
    node.ip(&format!("addr add {mv_peer}/24 dev mvpeer"));
    node.ip("link set mvpeer up");
    cni_add(
        &node,
        &pod,
        "macvlan",
        "net1",
        &serde_json::json!({
            "cniVersion": "1.0.0", "name": "podtap-vm-macvlan", "type": "macvlan",
            "master": "mvm0", "mode": "bridge",
            "ipam": {
                "type": "host-local", "dataDir": ipam_dir,
                "ranges": [[{"subnet": format!("198.19.{n}.0/24"), "rangeStart": format!("198.19.{n}.10")}]]
            }
        }),
    );
    settle(&pod);
    settle(&node);

    // The guest pings out, then stays up while the node reaches in.
    let append = format!("podtap.ping={v4_gw},{v6_gw},{mv_peer} podtap.hold=12");
    // Each boot asks for u32 + mirred, tc mode's one redirect, by name.
    for (mode, launcher, redirect) in [
        ("tc", "qemu-by-name.sh", "u32"),
        ("bridge", "qemu-by-name.sh", "u32"),
        ("tc", "qemu-fds.sh", "u32"),
    ] {
        let id = unique("vmcni");
        let before = settled_snapshot(&pod);
        let desc: serde_json::Value = serde_json::from_str(&podtap_ok(
            BIN,
            &state.0,
            &[
                "attach",
                "--netns",
                &pod.path_str(),
                "--id",
                &id,
                "--mode",
                mode,
                "--tc-redirect",
                redirect,
            ],
        ))
        .expect("attach prints JSON");
        assert_eq!(iface(&desc, "eth0")["wiring"], mode);
        let net1_tap = iface(&desc, "net1")["tap"]["name"].as_str().expect("a TAP");
        assert_eq!(
            podtap_testkit::wiring::redirect_kind(&pod, "net1", net1_tap),
            Some(redirect),
            "{mode} ({launcher}): net1's redirect"
        );
        assert_eq!(
            iface(&desc, "net1")["wiring"],
            "tc",
            "a macvlan is always wired with tc"
        );
        let inbound = [
            (address_of(&desc, "eth0", "inet"), mac_of(&desc, "eth0")),
            (address_of(&desc, "eth0", "inet6"), mac_of(&desc, "eth0")),
            (address_of(&desc, "net1", "inet"), mac_of(&desc, "net1")),
        ];
        let console = boot_reachable(BIN, &example(launcher), &state.0, &id, &append, || {
            for (ip, mac) in &inbound {
                reach_in(&node, ip, mac, 5);
            }
        });
        for peer in [&v4_gw, &v6_gw, &mv_peer] {
            assert_line(&console, &format!("PODTAP-PING OK {peer}"));
        }
        assert_no_errors(&console);
        for ifname in ["eth0", "net1"] {
            let line = nic_line(&console, &mac_of(&desc, ifname));
            assert!(line.contains(" mtu=1500 "), "{line}");
        }
        podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
        assert_eq!(
            before,
            settled_snapshot(&pod),
            "{mode} ({launcher}): detach left the pod netns changed"
        );
    }
    let _ = std::fs::remove_dir_all(&ipam_dir);
}

/// The CNI path end to end: hooks/cni/bridge-podtap.conflist (bridge with
/// dual-stack host-local, then podtap) run plugin by plugin as libcni does,
/// from a node netns; the guest boots on the TAP of podtap's CNI result,
/// pings the bridge gateway and writes its resolv.conf from the `dns` the
/// bridge plugin put in the result; CNI DEL (reverse order) removes the TAP
/// and the checkpoint.
#[test]
fn cni_chain_tap_boots_and_pings_gateway() {
    let test = "cni_chain_tap_boots_and_pings_gateway";
    if !root_or_skip(test)
        || !tool_or_skip(test, QEMU)
        || !tool_or_skip(test, "jq")
        || !tool_or_skip(test, &format!("{PLUGINS}/bridge"))
        || !tool_or_skip(test, &format!("{PLUGINS}/host-local"))
    {
        return;
    }
    let node = Netns::new("vmn");
    let pod = Netns::new("vmp");
    // Gateway addresses on the bridge must not wait for DAD.
    for ns in [&node, &pod] {
        ns.exec("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");
    }
    // Private host-local dataDir and podtap stateDir; the conflist made dual-stack.
    let (state, data) = (TempDir::new(), TempDir::new());
    let n = std::process::id() % 200 + 20;
    let mut conf = conflist("bridge-podtap.conflist", state.path(), data.path(), n);
    let bridge_name = conf["plugins"][0]["bridge"]
        .as_str()
        .expect("bridge name")
        .to_string();
    conf["plugins"][0]["ipam"]["ranges"] = serde_json::json!([
        [{ "subnet": format!("198.18.{n}.0/24") }],
        [{ "subnet": format!("2001:db8:{n:x}::/64") }]
    ]);
    conf["plugins"][0]["ipam"]["routes"] =
        serde_json::json!([{ "dst": "0.0.0.0/0" }, { "dst": "::/0" }]);
    // The bridge plugin copies its `dns` into its result: podtap's prevResult.
    let nameserver = format!("198.18.{n}.53");
    let dns = serde_json::json!({ "nameservers": [nameserver], "search": ["pod.example"] });
    conf["plugins"][0]["dns"] = dns.clone();
    // This test reads the TAP and its own MAC from the result: the spec's literal listing.
    conf["plugins"][1]["resultTap"] = serde_json::json!("listed");
    let chain = Chain::new(BIN, conf, Some(&node));
    let (cid, netns) = (container_id(n), pod.path_str());
    let id = format!("{cid}-eth0");

    // ADD: bridge (+ host-local) in the node netns, then podtap with its prevResult.
    let results = chain.add(&cid, &netns, "eth0");
    let result = results.last().expect("podtap's result");
    assert_eq!(
        result["dns"], dns,
        "podtap keeps the prevResult's dns: {result:#}"
    );
    assert!(
        node.ip(&format!("link show {bridge_name}"))
            .contains("state UP"),
        "the bridge is in the node netns"
    );
    assert!(
        !sh_ok(&format!("ip link show {bridge_name}")),
        "the bridge must not land in the root netns"
    );
    let tap = result["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .find(|i| i["sandbox"] == netns.as_str() && i["name"] != "eth0")
        .unwrap_or_else(|| panic!("no TAP in podtap's result {result:#}"))
        .clone();
    let tap_name = tap["name"].as_str().expect("TAP name").to_string();
    assert!(sh_ok(&format!("ip -n {} link show {tap_name}", pod.name)));
    // The result lists the TAP with its own MAC; the guest takes eth0's.
    let own = pod.ip_json(&format!("link show {tap_name}"))[0]["address"].clone();
    assert_eq!(tap["mac"], own, "the TAP's own MAC in the result");
    let mac = result["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .find(|i| i["sandbox"] == netns.as_str() && i["name"] == "eth0")
        .and_then(|i| i["mac"].as_str())
        .expect("eth0 in the result")
        .to_string();
    let gateways: Vec<String> = result["ips"]
        .as_array()
        .expect("ips")
        .iter()
        .filter_map(|ip| ip["gateway"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        gateways,
        [format!("198.18.{n}.1"), format!("2001:db8:{n:x}::1")],
        "{result:#}"
    );
    settle(&node);
    settle(&pod);

    // The VMM side reads only the checkpoint the CNI ADD wrote.
    let guest_args = podtap_ok(BIN, state.path(), &["render", "guest-args", "--id", &id]);
    assert!(
        guest_args.contains(&format!("podtap.nic={mac},1500,198.18.{n}.")),
        "{guest_args}"
    );
    assert!(
        guest_args.contains(&format!(
            "podtap.dns={nameserver} podtap.search=pod.example"
        )),
        "the description records the result's dns: {guest_args}"
    );
    let cloud_init = podtap_ok(BIN, state.path(), &["render", "cloud-init", "--id", &id]);
    assert!(
        cloud_init.contains(&format!(
            "    nameservers:\n      addresses:\n        - \"{nameserver}\"\n      \
             search:\n        - \"pod.example\"\n"
        )),
        "{cloud_init}"
    );
    let qemu_args = podtap_ok(BIN, state.path(), &["render", "qemu", "--id", &id]);
    assert!(
        qemu_args.contains(&format!(",ifname={tap_name},")),
        "{qemu_args}"
    );
    let console = boot(
        BIN,
        &example("qemu-by-name.sh"),
        state.path(),
        &id,
        &format!("podtap.ping={}", gateways.join(",")),
    );
    for gw in &gateways {
        assert_line(&console, &format!("PODTAP-PING OK {gw}"));
    }
    assert_no_errors(&console);
    assert!(nic_line(&console, &mac).contains(" mtu=1500 "));
    // The guest's /etc/resolv.conf, line by line.
    let resolv: Vec<&str> = console
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("PODTAP-RESOLV "))
        .collect();
    assert_eq!(
        resolv,
        [
            format!("PODTAP-RESOLV nameserver {nameserver}"),
            "PODTAP-RESOLV search pod.example".to_string()
        ],
        "the guest's resolver config"
    );

    // DEL through the chain, podtap first: the TAP and the checkpoint are gone.
    chain.del(&cid, &netns, "eth0", Some(result));
    assert!(
        !pod.ip("link show").contains(&format!(" {tap_name}:")),
        "DEL removes the TAP"
    );
    assert!(
        !state.path().join(format!("{id}.json")).exists(),
        "DEL removes the checkpoint"
    );
    assert!(!podtap_ok(BIN, state.path(), &["list", "--json"]).contains(&id));
}

/// Test 3: fd handover from the test's own netns, 2 queues, MTU 9000/1400,
/// an onlink default route via 169.254.1.1 and a route with its own MTU.
#[test]
fn fd_handover_multiqueue_mtu_and_routes() {
    let test = "fd_handover_multiqueue_mtu_and_routes";
    if !vm_prerequisites(test) {
        return;
    }
    let node = Netns::new("vmn");
    let pod = Netns::new("vmp");
    let state = StateDir::new();
    let (p, q) = (&pod.name, &node.name);
    let s = std::process::id() % 200 + 20;
    pod.exec("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");

    // eth0: MTU 9000 both ends, 198.18.S.2/24; 198.19.S.0/24 behind the peer with `mtu 1300`.
    sh(&format!(
        "ip -n {q} link add jumbo mtu 9000 type veth peer name eth0 mtu 9000 netns {p}"
    ));
    node.ip("link set jumbo up");
    pod.ip("link set eth0 up");
    node.ip(&format!("addr add 198.18.{s}.1/24 dev jumbo"));
    pod.ip(&format!("addr add 198.18.{s}.2/24 dev eth0"));
    node.ip(&format!("addr add 198.19.{s}.1/32 dev lo"));
    pod.ip(&format!(
        "route add 198.19.{s}.0/24 via 198.18.{s}.1 dev eth0 mtu 1300"
    ));
    // eth1: MTU 1400 both ends, Calico style: a /32 address and an onlink
    // default route via 169.254.1.1, which the peer end owns (and so answers ARP for).
    sh(&format!(
        "ip -n {q} link add cali mtu 1400 type veth peer name eth1 mtu 1400 netns {p}"
    ));
    node.ip("link set cali up");
    pod.ip("link set eth1 up");
    node.ip("addr add 169.254.1.1/32 dev cali");
    let (calico_ip, far) = (
        format!("198.19.{}.5", s + 30),
        format!("198.19.{}.1", s + 31),
    );
    node.ip(&format!("route add {calico_ip}/32 dev cali"));
    node.ip(&format!("addr add {far}/32 dev lo"));
    pod.ip(&format!("addr add {calico_ip}/32 dev eth1"));
    pod.ip("route add default via 169.254.1.1 dev eth1 onlink");

    let id = unique("vmfd");
    let before = settled_snapshot(&pod);
    let desc: serde_json::Value = serde_json::from_str(&podtap_ok(
        BIN,
        &state.0,
        &[
            "attach",
            "--netns",
            &pod.path_str(),
            "--id",
            &id,
            "--queues",
            "2",
        ],
    ))
    .expect("attach prints JSON");
    let qemu_args = podtap_ok(BIN, &state.0, &["render", "qemu", "--id", &id]);
    assert_eq!(qemu_args.matches(",queues=2").count(), 2, "{qemu_args}");
    assert_eq!(
        qemu_args.matches("mq=on,vectors=6").count(),
        2,
        "{qemu_args}"
    );

    let (peer, routed) = (format!("198.18.{s}.1"), format!("198.19.{s}.1"));
    let append = [
        format!("podtap.ping={peer},{routed},169.254.1.1,{far}"),
        format!(
            "podtap.pingbig=8000:{peer},8000:{far},1372:{far},1380:{far},1272:{routed},1300:{routed}"
        ),
    ]
    .join(" ");
    // The test process stays in its own netns: qemu-fds.sh runs `podtap exec --vmm qemu`.
    let console = boot(BIN, &example("qemu-fds.sh"), &state.0, &id, &append);

    for target in [peer.as_str(), routed.as_str(), "169.254.1.1", far.as_str()] {
        assert_line(&console, &format!("PODTAP-PING OK {target}"));
    }
    assert_no_errors(&console);
    let jumbo = nic_line(&console, &mac_of(&desc, "eth0"));
    assert!(jumbo.ends_with(" mtu=9000 queues=2"), "{jumbo}");
    let small = nic_line(&console, &mac_of(&desc, "eth1"));
    assert!(small.ends_with(" mtu=1400 queues=2"), "{small}");
    // Big pings cross only where the NIC and route MTUs allow them.
    for (verdict, size, target) in [
        ("OK", 8000, peer.as_str()),
        ("FAIL", 8000, far.as_str()),
        ("OK", 1372, far.as_str()),
        ("FAIL", 1380, far.as_str()),
        ("OK", 1272, routed.as_str()),
        ("FAIL", 1300, routed.as_str()),
    ] {
        assert_line(
            &console,
            &format!("PODTAP-PINGBIG {verdict} {size} {target}"),
        );
    }
    // The routes reached the guest as they are in the pod.
    let guest_dev = |line: &str| line.split_whitespace().nth(2).unwrap_or("").to_string();
    let (dev0, dev1) = (guest_dev(jumbo), guest_dev(small));
    assert!(
        console.contains(&format!("default via 169.254.1.1 dev {dev1} onlink")),
        "no onlink default route via {dev1} in the guest"
    );
    assert!(
        console.contains(&format!(
            "198.19.{s}.0/24 via 198.18.{s}.1 dev {dev0} mtu 1300"
        )),
        "no route with mtu 1300 via {dev0} in the guest"
    );

    podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
    assert_eq!(
        before,
        settled_snapshot(&pod),
        "detach left the pod netns changed"
    );
}

/// `podtap demo` boots the test guest on the demo pod's TAP (fd handover
/// from podtap itself, served by podtap): the guest configures itself by
/// DHCP, DHCPv6 and RA, pings the peer, and the peer pings it back.
#[test]
fn demo_boots_a_guest_that_configures_itself() {
    let test = "demo_boots_a_guest_that_configures_itself";
    if !root_or_skip(test) || !tool_or_skip(test, QEMU) {
        return;
    }
    let (kernel, initrd) = guest();
    let out = Command::new(BIN)
        .arg("demo")
        .env("PODTAP_GUEST_KERNEL", kernel)
        .env("PODTAP_GUEST_INITRD", initrd)
        .stdin(Stdio::null())
        .output()
        .expect("run podtap demo");
    let (text, log) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "demo failed: {text}{log}");
    for line in [
        "guest: PODTAP-DHCP dhcpcd eth0 ok",
        "guest:   inet 198.18.0.2/24 brd 198.18.0.255 scope global dynamic noprefixroute eth0",
        "guest: PODTAP-PING OK 198.18.0.1",
        "guest: PODTAP-PING OK 2001:db8:0:1::1",
        "peer:  PEER-PING OK 198.18.0.2",
        "peer:  PEER-PING OK 2001:db8:0:1::2",
        "guest: PODTAP-DONE",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in {text}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("guest:   inet6 2001:db8:0:1::2/128")),
        "the guest has no DHCPv6 address: {text}"
    );
    assert!(log.contains("pod netns is exactly as before"), "{log}");
}

/// Without QEMU the demo still does its job on the pod, and says what it
/// did not do and how to get it.
#[test]
fn demo_without_qemu_says_what_it_skipped() {
    if !root_or_skip("demo_without_qemu_says_what_it_skipped") {
        return;
    }
    let out = Command::new(BIN)
        .arg("demo")
        .env("PODTAP_QEMU", "/nonexistent/qemu-system-x86_64")
        .stdin(Stdio::null())
        .output()
        .expect("run podtap demo");
    let (text, log) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "demo failed: {text}{log}");
    assert!(
        log.contains("not booting a guest: /nonexistent/qemu-system-x86_64 is not installed (Debian: apt-get install qemu-system-x86)"),
        "{log}"
    );
    assert!(log.contains("pod netns is exactly as before"), "{log}");
    assert!(!text.contains("guest: "), "{text}");
}
