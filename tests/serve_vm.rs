//! Real guests (QEMU, TCG) that configure themselves from `podtap serve`'s
//! answers and nothing else: no seed, no `ip=`, no static arguments. The
//! test guest runs busybox `udhcpc` with the kernel's own router
//! advertisement handling, or Debian's `dhcpcd` for DHCPv4, DHCPv6 and RA
//! together (tests/guest/README.md, `podtap.dhcp`).
//!
//! 1. A pod built by the CNI `bridge` plugin (dual-stack host-local) with a
//!    second network `net1`, in tc mode with dhcpcd and in bridge mode with
//!    udhcpc: each NIC gets the pod's addresses, routes and DNS, the guest
//!    reaches the gateways and the node reaches it, and `tcpdump` on the
//!    pod's links during the boot sees none of its requests.
//! 2. A Calico-shaped pod (/32 and /128, 169.254.1.1, a link-local IPv6
//!    gateway), in l3 mode with dhcpcd and in tc mode with udhcpc.

use std::process::Command;

use podtap_testkit::serve::ServeDaemon;
use podtap_testkit::shapes::RoutedPod;
use podtap_testkit::vm::{
    address_of, assert_line, boot_command, guest, mac_of, reach_in, results, vm_prerequisites, QEMU,
};
use podtap_testkit::{cni_add, iface, podtap_ok, settle, tool_or_skip, unique, Netns, StateDir};

const BIN: &str = env!("CARGO_BIN_EXE_podtap");

fn prerequisites(test: &str) -> bool {
    vm_prerequisites(test) && tool_or_skip(test, "tcpdump")
}

/// Boot the test guest in `pod` on `id`'s TAPs (opened by name, as
/// vmm-examples/qemu-by-name.sh does) with only `append` on its kernel
/// command line, and run `during` while it holds.
fn boot(state: &StateDir, id: &str, pod: &Netns, append: &str, during: impl FnOnce()) -> String {
    let (kernel, initrd) = guest();
    let qemu_args = podtap_ok(BIN, &state.0, &["render", "qemu", "--id", id]);
    let mut cmd = Command::new("timeout");
    cmd.args([
        "150", "ip", "netns", "exec", &pod.name, QEMU, "-accel", "tcg", "-m", "256",
    ])
    .args([
        "-nographic",
        "-no-reboot",
        "-kernel",
        kernel,
        "-initrd",
        initrd,
    ])
    .args(["-append", &format!("console=ttyS0 quiet panic=-1 {append}")])
    .args(qemu_args.lines());
    boot_command(cmd, id, |_| during())
}

/// `podtap.nic=MAC,0` for each of `names` (the NIC is found by MAC; the
/// MTU comes from DHCP) and `podtap.dhcp=CLIENT`.
fn dhcp_args(desc: &serde_json::Value, names: &[&str], client: &str) -> String {
    let nics: Vec<String> = names
        .iter()
        .map(|n| format!("podtap.nic={},0", mac_of(desc, n)))
        .collect();
    format!("{} podtap.dhcp={client}", nics.join(" "))
}

/// tcpdump on `ifname` of `ns` for a guest's DHCP and router solicitations.
fn capture(ns: &Netns, ifname: &str) -> std::process::Child {
    let child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.name,
            "tcpdump",
            "-n",
            "-l",
            "--immediate-mode",
            "-i",
            ifname,
        ])
        .args(["udp port 67 or udp port 68 or udp port 547 or icmp6[icmp6type] == 133"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run tcpdump");
    std::thread::sleep(std::time::Duration::from_millis(500));
    child
}

fn captured(child: std::process::Child) -> String {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    String::from_utf8_lossy(&child.wait_with_output().expect("tcpdump").stdout).into_owned()
}

/// The bridge-CNI pod: eth0 on node bridge A (dual-stack, the default
/// routes), net1 on node bridge B (dual-stack, no default route).
struct CniPod {
    node: Netns,
    pod: Netns,
    n: u32,
    ipam: std::path::PathBuf,
}

impl CniPod {
    fn new() -> Self {
        let node = Netns::new("svn");
        let pod = Netns::new("svp");
        let ipam = std::env::temp_dir().join(unique("podtap-ipam-"));
        let n = 30 + std::process::id() % 90;
        // Quiet links: no router solicitations of the node's or the pod's
        // own, so any the capture sees would be the guest's.
        for ns in [&node, &pod] {
            ns.exec(
                "sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 \
                 net.ipv6.conf.all.router_solicitations=0 net.ipv6.conf.default.router_solicitations=0",
            );
        }
        let conf = |name: &str, br: &str, ranges: serde_json::Value, routes: serde_json::Value| {
            serde_json::json!({
                "cniVersion": "1.0.0", "name": name, "type": "bridge", "bridge": br,
                "isGateway": true, "ipMasq": false,
                "ipam": {"type": "host-local", "dataDir": ipam, "ranges": ranges, "routes": routes}
            })
        };
        let a = serde_json::json!([[{"subnet": format!("198.18.{n}.0/24")}], [{"subnet": format!("2001:db8:{n:x}::/64")}]]);
        cni_add(
            &node,
            &pod,
            "bridge",
            "eth0",
            &conf(
                "sv-a",
                "svbr0",
                a,
                serde_json::json!([{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]),
            ),
        );
        let b = serde_json::json!([[{"subnet": format!("198.18.{}.0/24", n + 100)}], [{"subnet": format!("2001:db8:{:x}::/64", n + 100)}]]);
        cni_add(
            &node,
            &pod,
            "bridge",
            "net1",
            &conf("sv-b", "svbr1", b, serde_json::json!([])),
        );
        settle(&node);
        settle(&pod);
        CniPod { node, pod, n, ipam }
    }
}

impl Drop for CniPod {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.ipam);
    }
}

/// Attach `pod` served, in `mode`, with the test's name servers.
fn attach_served(state: &StateDir, pod: &Netns, id: &str, mode: &str) -> serde_json::Value {
    let resolv = std::env::temp_dir().join(format!("{id}.resolv"));
    std::fs::write(
        &resolv,
        "nameserver 198.18.0.53\nsearch pod.example svc.example\n",
    )
    .expect("resolv.conf");
    let (netns, resolv_s) = (pod.path_str(), resolv.display().to_string());
    let args = [
        "attach",
        "--netns",
        &netns,
        "--id",
        id,
        "--mode",
        mode,
        "--serve",
        "--dns-from",
        &resolv_s,
    ];
    let desc = serde_json::from_str(&podtap_ok(BIN, &state.0, &args)).expect("attach prints JSON");
    let _ = std::fs::remove_file(resolv);
    desc
}

#[test]
fn stock_guests_configure_themselves_on_a_bridge_cni_pod() {
    let test = "stock_guests_configure_themselves_on_a_bridge_cni_pod";
    if !prerequisites(test) {
        return;
    }
    let cp = CniPod::new();
    let state = StateDir::new();
    let _daemon = ServeDaemon::start(BIN, &state.0);
    let n = cp.n;
    let (gw4, gw6, gw1) = (
        format!("198.18.{n}.1"),
        format!("2001:db8:{n:x}::1"),
        format!("198.18.{}.1", n + 100),
    );
    for (mode, client) in [("tc", "dhcpcd"), ("bridge", "udhcpc")] {
        let id = unique("svcni");
        let desc = attach_served(&state, &cp.pod, &id, mode);
        let (p4, p6, p1) = (
            address_of(&desc, "eth0", "inet"),
            address_of(&desc, "eth0", "inet6"),
            address_of(&desc, "net1", "inet"),
        );
        let pings = if client == "dhcpcd" {
            format!("{gw4},{gw6},{gw1}")
        } else {
            format!("{gw4},{gw1}")
        };
        let append = format!(
            "{} podtap.ping={pings} podtap.hold=8",
            dhcp_args(&desc, &["eth0", "net1"], client)
        );
        let (leak_a, leak_b) = (capture(&cp.node, "svbr0"), capture(&cp.node, "svbr1"));
        let console = boot(&state, &id, &cp.pod, &append, || {
            reach_in(&cp.node, &p4, &mac_of(&desc, "eth0"), 2);
            reach_in(&cp.node, &p1, &mac_of(&desc, "net1"), 2);
            if client == "dhcpcd" {
                reach_in(&cp.node, &p6, &mac_of(&desc, "eth0"), 2);
            }
        });
        for (ifname, net) in [("eth0", n), ("net1", n + 100)] {
            assert!(
                console.contains(&format!("PODTAP-DHCP {client} ")),
                "{mode}: {:#?}",
                results(&console)
            );
            assert!(
                console.contains(&format!("198.18.{net}.")),
                "{mode}: {ifname}'s address"
            );
        }
        assert_eq!(
            console.matches(&format!("PODTAP-DHCP {client} ")).count(),
            2,
            "{mode}: both NICs"
        );
        assert!(
            !console.contains(&format!("PODTAP-DHCP {client} eth0 fail")),
            "{mode}"
        );
        assert!(
            console.contains(&format!("inet {p4}/24")),
            "{mode}: the pod's address and prefix"
        );
        assert!(console.contains(&format!("inet {p1}/24")), "{mode}: net1's");
        assert!(
            console.contains(&format!("default via {gw4} dev")),
            "{mode}: the pod's default route"
        );
        assert!(
            console.contains("PODTAP-RESOLV nameserver 198.18.0.53"),
            "{mode}: DNS"
        );
        assert!(
            console.contains("search pod.example svc.example"),
            "{mode}: the search list"
        );
        if client == "dhcpcd" {
            assert!(
                console.contains(&format!("inet6 {p6}/")),
                "{mode}: the pod's IPv6 address from DHCPv6"
            );
        }
        assert!(
            console.contains("default via fe80::"),
            "{mode}: an IPv6 default route from the RA"
        );
        for p in pings.split(',') {
            assert_line(&console, &format!("PODTAP-PING OK {p}"));
        }
        for (name, seen) in [("svbr0", captured(leak_a)), ("svbr1", captured(leak_b))] {
            assert!(
                seen.trim().is_empty(),
                "{mode}: the guest's requests reached {name}:\n{seen}"
            );
        }
        podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
    }
}

#[test]
fn stock_guests_configure_themselves_on_a_calico_shaped_pod() {
    let test = "stock_guests_configure_themselves_on_a_calico_shaped_pod";
    if !prerequisites(test) {
        return;
    }
    let (rp, p6, far6) = RoutedPod::calico_dual_stack(33);
    let state = StateDir::new();
    let _daemon = ServeDaemon::start(BIN, &state.0);
    for (mode, client) in [("l3", "dhcpcd"), ("tc", "udhcpc")] {
        let id = unique("svcal");
        let desc = attach_served(&state, &rp.pod, &id, mode);
        assert_eq!(iface(&desc, "eth0")["wiring"], mode);
        let pings = if client == "dhcpcd" {
            format!("{},{far6}", rp.node_address)
        } else {
            rp.node_address.clone()
        };
        let append = format!(
            "{} podtap.ping={pings} podtap.hold=8",
            dhcp_args(&desc, &["eth0"], client)
        );
        let mac = mac_of(&desc, "eth0");
        let console = boot(&state, &id, &rp.pod, &append, || {
            reach_in(&rp.node, &rp.address, &mac, 2);
            if client == "dhcpcd" {
                let ok = podtap_testkit::sh_ok(&format!(
                    "ip netns exec {} ping -6 -c 2 -W 2 {p6}",
                    rp.node.name
                ));
                assert!(ok, "{mode}: the node reaches the guest's {p6}");
            }
        });
        assert_line(&console, &format!("PODTAP-DHCP {client} eth0 ok"));
        assert!(
            console.contains(&format!("inet {}/32", rp.address)),
            "{mode}: the /32"
        );
        assert!(
            console.contains("169.254.1.1 dev eth0"),
            "{mode}: the on-link route to the gateway"
        );
        assert!(
            console.contains("default via 169.254.1.1 dev eth0"),
            "{mode}"
        );
        if client == "dhcpcd" {
            assert!(
                console.contains(&format!("inet6 {p6}/128")),
                "{mode}: the /128 from DHCPv6"
            );
        }
        let router6 = if mode == "l3" {
            "default via fe80::1 dev"
        } else {
            "default via fe80::ecee:eeff:feee:eeee dev"
        };
        assert!(console.contains(router6), "{mode}: the IPv6 router");
        for p in pings.split(',') {
            assert_line(&console, &format!("PODTAP-PING OK {p}"));
        }
        podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
    }
}
