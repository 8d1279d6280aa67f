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

use std::path::Path;
use std::process::{Command, Stdio};

use podtap_testkit::{
    cni_plugin, conflist, container_id, guest, iface, podtap_cmd, podtap_ok, reach_in,
    root_or_skip, settle, settled_snapshot, sh, sh_ok, stderr, stdout, taps, tool_or_skip, unique,
    Chain, Netns, Pod, StateDir, TempDir, Watch, PLUGINS, QEMU,
};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

fn example(name: &str) -> String {
    podtap_testkit::repo()
        .join("vmm-examples")
        .join(name)
        .display()
        .to_string()
}

/// Whether this machine can run the VM tests (skip, or fail under CI=true).
fn vm_prerequisites(test: &str) -> bool {
    root_or_skip(test)
        && tool_or_skip(test, QEMU)
        && tool_or_skip(test, "jq")
        && tool_or_skip(test, "ping")
        && tool_or_skip(test, &format!("{PLUGINS}/bridge"))
        && tool_or_skip(test, &format!("{PLUGINS}/macvlan"))
        && tool_or_skip(test, &format!("{PLUGINS}/host-local"))
}

/// Run a VMM launcher script under `timeout 120` and return the guest's console.
fn boot(script: &str, state: &Path, id: &str, append: &str) -> String {
    let (kernel, initrd) = guest();
    let started = std::time::Instant::now();
    let out = Command::new("timeout")
        .args(["120", script, id, kernel, initrd])
        .env("PODTAP", BIN)
        .env("PODTAP_STATE_DIR", state)
        .env("GUEST_APPEND", append)
        .stdin(Stdio::null())
        .output()
        .expect("run the VMM launcher");
    let console = stdout(&out).replace('\r', "");
    eprintln!(
        "--- {script} {id}: exit {:?} after {:.1}s\n{console}\n--- stderr:\n{}",
        out.status.code(),
        started.elapsed().as_secs_f64(),
        stderr(&out)
    );
    assert!(
        console.contains("PODTAP-DONE"),
        "the guest did not finish (exit {:?})",
        out.status.code()
    );
    console
}

/// Like [`boot`], for a guest started with `podtap.hold=SECONDS`: once it
/// prints `PODTAP-READY`, run `during` (which reaches into the guest from
/// outside) while the guest stays up, then wait for it to finish.
fn boot_reachable(
    script: &str,
    state: &Path,
    id: &str,
    append: &str,
    during: impl FnOnce(),
) -> String {
    boot_live(script, state, id, append, &[], |_| during())
}

/// The console of a running guest, line by line.
struct Console {
    lines: std::sync::mpsc::Receiver<String>,
}

impl Console {
    /// The next console line starting with `prefix` within `timeout` (lines before it are skipped).
    fn wait_for(&self, prefix: &str, timeout: std::time::Duration) -> Option<String> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            let line = self.lines.recv_timeout(left).ok()?;
            if line.starts_with(prefix) {
                return Some(line);
            }
        }
    }
}

/// Run a launcher (with `extra` QEMU arguments) for a guest started with
/// `podtap.hold`: once it says `PODTAP-READY`, run `during` with its live
/// console, then wait for the guest to finish and return the whole console.
fn boot_live(
    script: &str,
    state: &Path,
    id: &str,
    append: &str,
    extra: &[&str],
    during: impl FnOnce(&Console),
) -> String {
    use std::io::{BufRead, BufReader};
    let (kernel, initrd) = guest();
    let mut child = Command::new("timeout")
        .args(["150", script, id, kernel, initrd])
        .args(extra)
        .env("PODTAP", BIN)
        .env("PODTAP_STATE_DIR", state)
        .env("GUEST_APPEND", append)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the VMM launcher");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut console = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let line = line.replace('\r', "");
            let _ = tx.send(line.trim().to_string());
            console.push_str(&line);
            console.push('\n');
        }
        console
    });
    let live = Console { lines: rx };
    let ready = live
        .wait_for("PODTAP-READY", std::time::Duration::from_secs(120))
        .is_some();
    // A failed check inside `during` still shows the console, and stops the VM.
    let checked =
        ready.then(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| during(&live))));
    if matches!(checked, Some(Err(_))) {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("wait for the VMM");
    let console = reader.join().expect("console reader");
    eprintln!(
        "--- {script} {id}: exit {:?}\n{console}\n--- stderr:\n{}",
        out.status.code(),
        stderr(&out)
    );
    if let Some(Err(panic)) = checked {
        std::panic::resume_unwind(panic);
    }
    assert!(ready, "the guest never said PODTAP-READY");
    assert!(console.contains("PODTAP-DONE"), "the guest did not finish");
    console
}

/// The first non-link-local address of `family` ("inet"/"inet6") on interface `name`.
fn address_of(desc: &serde_json::Value, name: &str, family: &str) -> String {
    iface(desc, name)["address_details"]
        .as_array()
        .expect("address_details")
        .iter()
        .find(|a| a["family"] == family && a["link_local"] == false)
        .and_then(|a| a["cidr"].as_str())
        .and_then(|c| c.split('/').next())
        .unwrap_or_else(|| panic!("{name} has no {family} address"))
        .to_string()
}

/// The `PODTAP-` result lines of a console.
fn results(console: &str) -> Vec<&str> {
    console
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("PODTAP-"))
        .collect()
}

fn assert_line(console: &str, line: &str) {
    assert!(
        results(console).contains(&line),
        "missing {line:?} in the guest's results: {:#?}",
        results(console)
    );
}

fn assert_no_errors(console: &str) {
    let errors: Vec<_> = results(console)
        .into_iter()
        .filter(|l| l.starts_with("PODTAP-ERROR") || l.contains(" FAIL ") && !l.contains("BIG"))
        .collect();
    assert!(errors.is_empty(), "guest errors: {errors:#?}");
}

/// `PODTAP-NIC <mac> <ifname> mtu=<mtu> queues=<q>` for `mac`.
fn nic_line<'a>(console: &'a str, mac: &str) -> &'a str {
    results(console)
        .into_iter()
        .find(|l| l.starts_with(&format!("PODTAP-NIC {}", mac.to_lowercase())))
        .unwrap_or_else(|| panic!("no PODTAP-NIC line for {mac}"))
}

fn mac_of(desc: &serde_json::Value, name: &str) -> String {
    let i = iface(desc, name);
    i["guest_mac"]
        .as_str()
        .or_else(|| i["mac"].as_str())
        .expect("mac")
        .to_string()
}

/// A CNI plugin run in the node netns, for the pod netns (ADD).
fn cni_add(node: &Netns, pod: &Netns, plugin: &str, ifname: &str, conf: &serde_json::Value) {
    let out = cni_plugin(
        &node.name,
        "ADD",
        plugin,
        &pod.name,
        &pod.path_str(),
        ifname,
        conf,
    );
    assert!(
        out.status.success(),
        "CNI {plugin} ADD failed: {}{}",
        stdout(&out),
        stderr(&out)
    );
}

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
    for (mode, launcher) in [
        ("tc", "qemu-by-name.sh"),
        ("bridge", "qemu-by-name.sh"),
        ("tc", "qemu-fds.sh"),
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
            ],
        ))
        .expect("attach prints JSON");
        assert_eq!(iface(&desc, "eth0")["wiring"], mode);
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
        let console = boot_reachable(&example(launcher), &state.0, &id, &append, || {
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
        !sh_ok(&format!("ip -n {} link show {tap_name}", pod.name)),
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
    let console = boot(&example("qemu-fds.sh"), &state.0, &id, &append);

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

/// A stand-in for Cloud Hypervisor's API server: logs each request line, JSON
/// body and the TAP names of the fds that came with it (SCM_RIGHTS), answers
/// 204, and exits after vm.boot.
const MOCK_CH_API: &str = r#"
import json, os, re, socket, sys
path, out = sys.argv[1], sys.argv[2]
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(4)
srv.settimeout(120)  # never outlive a launcher that died half-way
log = open(out, "w")
while True:
    conn, _ = srv.accept()
    msg, fds, _, _ = socket.recv_fds(conn, 65536, 16)
    while b"\r\n\r\n" not in msg:
        msg += conn.recv(65536)
    head, _, body = msg.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    while len(body) < length:
        body += conn.recv(65536)
    taps = []
    for fd in fds:
        info = open(f"/proc/self/fdinfo/{fd}").read()
        m = re.search(r"iff:\s*(\S+)", info)
        taps.append(m.group(1) if m else os.readlink(f"/proc/self/fd/{fd}"))
        os.close(fd)
    line = head.split(b"\r\n")[0].decode()
    log.write(json.dumps({"request": line, "body": json.loads(body) if body else None, "fds": taps}) + "\n")
    log.flush()
    conn.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
    conn.close()
    if "vm.boot" in line:
        break
"#;

/// A stand-in VMM binary: prints its netns, its argv (one per line) and its open fds.
fn fake_vmm(dir: &Path, name: &str) -> String {
    let path = dir.join(name);
    std::fs::write(
        &path,
        "#!/bin/sh\necho \"NETNS $(readlink /proc/self/ns/net)\"\n\
         for a in \"$@\"; do echo \"ARG $a\"; done\n\
         for f in /proc/self/fd/*; do echo \"FD ${f##*/} $(readlink \"$f\")\"; done\n\
         [ \"$1\" = --no-api ] && cat \"$3\"\nexit 0\n",
    )
    .expect("write fake VMM");
    sh(&format!("chmod +x {}", path.display()));
    path.display().to_string()
}

/// The launchers that need KVM (Cloud Hypervisor CLI and API, Firecracker)
/// run against stand-ins: right netns, right arguments, real TAP fds.
#[test]
fn kvm_only_launchers_hand_over_the_taps() {
    let test = "kvm_only_launchers_hand_over_the_taps";
    if !root_or_skip(test) || !tool_or_skip(test, "jq") || !tool_or_skip(test, "python3") {
        return;
    }
    let pod = podtap_testkit::Pod::dual_stack();
    let state = StateDir::new();
    let tmp = TempDir::new();
    let dir = tmp.path();
    let pod_netns = pod
        .pod
        .exec("readlink /proc/self/ns/net")
        .trim()
        .to_string();
    let own_netns = sh("readlink /proc/self/ns/net").trim().to_string();
    let run = |script: &str, env: &[(&str, &str)], args: &[&str]| -> String {
        let out = Command::new(example(script))
            .args(args)
            .env("PODTAP", BIN)
            .env("PODTAP_STATE_DIR", &state.0)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .expect("run launcher");
        assert!(
            out.status.success(),
            "{script}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    };

    // Single queue: Firecracker's only mode.
    let id = unique("vmfake");
    let desc: serde_json::Value = serde_json::from_str(&podtap_ok(
        BIN,
        &state.0,
        &["attach", "--netns", &pod.pod.path_str(), "--id", &id],
    ))
    .expect("attach prints JSON");
    let tap = iface(&desc, "eth0")["tap"]["name"]
        .as_str()
        .expect("tap name")
        .to_string();
    let mac = mac_of(&desc, "eth0");

    let fc = fake_vmm(dir, "firecracker");
    let config = dir.join("fc.json").display().to_string();
    let out = run(
        "firecracker-config.sh",
        &[("FIRECRACKER", &fc)],
        &[&id, "/vmlinux", "/initrd", &config],
    );
    assert!(out.contains(&format!("NETNS {pod_netns}")), "{out}");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).expect("config")).expect("JSON");
    assert_eq!(
        config["network-interfaces"],
        serde_json::json!([{"iface_id": "net0", "host_dev_name": tap, "guest_mac": mac}])
    );
    assert_eq!(config["boot-source"]["kernel_image_path"], "/vmlinux");
    assert!(config["boot-source"]["boot_args"]
        .as_str()
        .expect("boot_args")
        .contains(&format!("podtap.nic={mac},1500,")));

    let ch = fake_vmm(dir, "cloud-hypervisor");
    let out = run(
        "cloud-hypervisor-cli.sh",
        &[("CLOUD_HYPERVISOR", &ch)],
        &[&id, "/vmlinuz", "/initrd"],
    );
    assert!(out.contains(&format!("NETNS {pod_netns}")), "{out}");
    assert!(
        out.contains(&format!(
            "ARG tap={tap},mac={mac},mtu=1500,num_queues=2,id=net0"
        )),
        "{out}"
    );
    podtap_ok(BIN, &state.0, &["detach", "--id", &id]);

    // Two queues, fd handover: Cloud Hypervisor CLI with FDS=1, then the API.
    let id = unique("vmfake");
    podtap_ok(
        BIN,
        &state.0,
        &[
            "attach",
            "--netns",
            &pod.pod.path_str(),
            "--id",
            &id,
            "--queues",
            "2",
        ],
    );
    let out = run(
        "cloud-hypervisor-cli.sh",
        &[("CLOUD_HYPERVISOR", &ch), ("FDS", "1")],
        &[&id, "/vmlinuz", "/initrd"],
    );
    assert!(out.contains(&format!("NETNS {own_netns}")), "{out}");
    assert!(out.contains("ARG boot=2"), "{out}");
    let net = out
        .lines()
        .find_map(|l| l.strip_prefix("ARG fd=["))
        .unwrap_or_else(|| panic!("no --net fd=[..] value: {out}"));
    assert!(
        net.ends_with(&format!("],mac={mac},num_queues=4,id=net0")),
        "{net}"
    );
    let fds: Vec<&str> = net.split(']').next().unwrap_or("").split(',').collect();
    assert_eq!(fds.len(), 2, "{net}");
    for fd in fds {
        assert!(
            out.contains(&format!("FD {fd} /dev/net/tun")),
            "fd {fd} is not an inherited TAP queue: {out}"
        );
    }

    let api = dir.join("api.sock");
    let log = dir.join("api.log");
    let mut server = Command::new("python3")
        .args(["-c", MOCK_CH_API])
        .arg(&api)
        .arg(&log)
        .spawn()
        .expect("start the stand-in API server");
    for _ in 0..100 {
        if log.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = podtap_cmd(BIN, &state.0)
        .args([
            "exec",
            "--id",
            &id,
            "--vmm",
            "cloud-hypervisor",
            "--",
            "python3",
        ])
        .arg(example("cloud-hypervisor-api.py"))
        .args(["--no-start", "--api-socket"])
        .arg(&api)
        .args(["--kernel", "/vmlinuz", "--initramfs", "/initrd"])
        .stdin(Stdio::null())
        .output()
        .expect("run cloud-hypervisor-api.py");
    if !out.status.success() {
        // It will never send vm.boot: don't wait for the server to see one.
        let _ = server.kill();
    }
    let served = server.wait().expect("stand-in API server");
    assert!(
        out.status.success() && served.success(),
        "cloud-hypervisor-api.py: {}{}",
        stdout(&out),
        stderr(&out)
    );
    let requests: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .expect("API log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("log line"))
        .collect();
    let lines: Vec<&str> = requests
        .iter()
        .map(|r| r["request"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        lines,
        [
            "PUT /api/v1/vm.create HTTP/1.1",
            "PUT /api/v1/vm.add-net HTTP/1.1",
            "PUT /api/v1/vm.boot HTTP/1.1"
        ]
    );
    assert_eq!(requests[0]["body"]["cpus"]["boot_vcpus"], 2);
    assert_eq!(requests[0]["body"]["payload"]["kernel"], "/vmlinuz");
    assert_eq!(requests[0]["fds"], serde_json::json!([]));
    assert_eq!(
        requests[1]["body"],
        serde_json::json!({"mac": mac, "num_queues": 4, "id": "net0"})
    );
    assert_eq!(requests[1]["fds"], serde_json::json!([tap, tap]));
    podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
}

/// `podtap demo --boot` boots the test guest on the demo pod's TAP (fd
/// handover from podtap itself) and shows it pinging the peer.
#[test]
fn demo_boot_pings_the_peer() {
    let test = "demo_boot_pings_the_peer";
    if !root_or_skip(test) || !tool_or_skip(test, QEMU) {
        return;
    }
    let (kernel, initrd) = guest();
    let out = Command::new(BIN)
        .args(["demo", "--boot"])
        .env("PODTAP_GUEST_KERNEL", kernel)
        .env("PODTAP_GUEST_INITRD", initrd)
        .stdin(Stdio::null())
        .output()
        .expect("run podtap demo --boot");
    let (text, log) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "demo --boot failed: {text}{log}");
    for line in [
        "guest: PODTAP-PING OK 198.18.0.1",
        "guest: PODTAP-PING OK 2001:db8:0:1::1",
        "guest: PODTAP-DONE",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in {text}");
    }
    assert!(log.contains("pod netns is exactly as before"), "{log}");
}

/// `podtap exec` failures before the exec keep podtap's exit codes; a failed
/// exec itself exits 1 with one line.
#[test]
fn exec_reports_failures_with_documented_codes() {
    let test = "exec_reports_failures_with_documented_codes";
    if !root_or_skip(test) {
        return;
    }
    let pod = podtap_testkit::Pod::dual_stack();
    let state = StateDir::new();
    let id = unique("vmexec");
    let code = |args: &[&str]| {
        let out = podtap_cmd(BIN, &state.0)
            .args(args)
            .output()
            .expect("run podtap");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        (out.status.code(), err)
    };
    let (c, err) = code(&["exec", "--id", &id, "--vmm", "qemu", "--", "true"]);
    assert_eq!(c, Some(14), "{err}");
    podtap_ok(
        BIN,
        &state.0,
        &["attach", "--netns", &pod.pod.path_str(), "--id", &id],
    );
    let (c, err) = code(&[
        "exec",
        "--id",
        &id,
        "--vmm",
        "qemu",
        "--",
        "/nonexistent/podtap-vmm",
    ]);
    assert_eq!(c, Some(1), "{err}");
    assert!(err.contains("exec /nonexistent/podtap-vmm"), "{err}");
    if !Path::new("/dev/vhost-net").exists() {
        let (c, err) = code(&[
            "exec", "--id", &id, "--vmm", "qemu", "--vhost", "--", "true",
        ]);
        assert_eq!(c, Some(13), "{err}");
        assert!(err.contains("/dev/vhost-net"), "{err}");
    }
    // --enter-netns really enters: the command sees the pod's interfaces.
    let out = podtap_cmd(BIN, &state.0)
        .args([
            "exec",
            "--id",
            &id,
            "--enter-netns",
            "--",
            "cat",
            "/proc/net/dev",
        ])
        .output()
        .expect("run podtap");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("eth0:"), "{}", stdout(&out));
    // A TAP replaced by another of the same name is not handed over.
    let desc: serde_json::Value = serde_json::from_str(&podtap_ok(
        BIN,
        &state.0,
        &["attach", "--netns", &pod.pod.path_str(), "--id", &id],
    ))
    .expect("description");
    let tap = desc["interfaces"]
        .as_array()
        .and_then(|a| a.iter().find_map(|i| i["tap"]["name"].as_str()))
        .expect("a TAP")
        .to_string();
    pod.pod.ip(&format!("link del {tap}"));
    pod.pod
        .ip(&format!("tuntap add dev {tap} mode tap vnet_hdr"));
    let (c, err) = code(&["exec", "--id", &id, "--vmm", "qemu", "--", "true"]);
    assert_eq!(c, Some(12), "{err}");
    assert!(err.contains("replaced"), "{err}");
    pod.pod.ip(&format!("link del {tap}"));
    // A pod netns replaced under the same path is refused.
    sh(&format!(
        "ip netns del {0} && ip netns add {0}",
        pod.pod.name
    ));
    let (c, err) = code(&["exec", "--id", &id, "--enter-netns", "--", "true"]);
    assert_eq!(c, Some(12), "{err}");
    assert!(err.contains("replaced"), "{err}");
    let _ = podtap_cmd(BIN, &state.0)
        .args(["detach", "--id", &id])
        .output();
}

/// macvtap mode end to end: a dual-stack pod with MTU 9000; `podtap exec
/// --vmm qemu` hands the macvtap's queues to the guest (1 and 2 queues); the
/// guest pings out (IPv4, IPv6, 8000-byte frames) and the node reaches in on
/// both families, answered from the guest's MAC; detach restores the netns.
#[test]
fn macvtap_guest_gets_its_queues_through_exec_both_ways_with_mtu_9000() {
    let test = "macvtap_guest_gets_its_queues_through_exec_both_ways_with_mtu_9000";
    if !vm_prerequisites(test) {
        return;
    }
    let node = Netns::new("vmn");
    let pod = Netns::new("vmp");
    let state = StateDir::new();
    let (p, q) = (&pod.name, &node.name);
    let s = std::process::id() % 200 + 20;
    for ns in [&pod, &node] {
        ns.exec("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");
    }
    sh(&format!(
        "ip -n {q} link add jumbo mtu 9000 type veth peer name eth0 mtu 9000 netns {p}"
    ));
    node.ip("link set jumbo up");
    pod.ip("link set eth0 up");
    let (peer4, peer6) = (format!("198.18.{s}.1"), format!("2001:db8:6:{s:x}::1"));
    node.ip(&format!("addr add {peer4}/24 dev jumbo"));
    node.ip(&format!("addr add {peer6}/64 dev jumbo nodad"));
    pod.ip(&format!("addr add 198.18.{s}.2/24 dev eth0"));
    pod.ip(&format!("addr add 2001:db8:6:{s:x}::2/64 dev eth0 nodad"));
    settle(&pod);
    settle(&node);

    let append = format!("podtap.ping={peer4},{peer6} podtap.pingbig=8000:{peer4} podtap.hold=12");
    for queues in ["1", "2"] {
        let id = unique("vmmvt");
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
                "macvtap",
                "--queues",
                queues,
            ],
        ))
        .expect("attach prints JSON");
        assert_eq!(iface(&desc, "eth0")["wiring"], "macvtap");
        let mac = mac_of(&desc, "eth0");
        let inbound = [
            address_of(&desc, "eth0", "inet"),
            address_of(&desc, "eth0", "inet6"),
        ];
        // qemu-fds.sh runs `podtap exec --vmm qemu`, which opens the macvtap's node.
        let console = boot_reachable(&example("qemu-fds.sh"), &state.0, &id, &append, || {
            for ip in &inbound {
                reach_in(&node, ip, &mac, 5);
            }
        });
        for target in [&peer4, &peer6] {
            assert_line(&console, &format!("PODTAP-PING OK {target}"));
        }
        assert_line(&console, &format!("PODTAP-PINGBIG OK 8000 {peer4}"));
        assert_no_errors(&console);
        let line = nic_line(&console, &mac);
        assert!(
            line.ends_with(&format!(" mtu=9000 queues={queues}")),
            "{line}"
        );
        podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
        assert_eq!(
            before,
            settled_snapshot(&pod),
            "macvtap ({queues} queue(s)): detach left the pod netns changed"
        );
    }
}

#[test]
fn watch_hotplugs_a_late_interface_into_the_running_guest_and_unplugs_it() {
    let test = "watch_hotplugs_a_late_interface_into_the_running_guest_and_unplugs_it";
    if !vm_prerequisites(test) {
        return;
    }
    let pod = Pod::dual_stack();
    let state = StateDir::new();
    let work = TempDir::new();
    let qmp = work.path().join("qmp.sock");
    let id = unique("vmwatch");
    let before = settled_snapshot(&pod.pod);
    let desc: serde_json::Value = serde_json::from_str(&podtap_ok(
        BIN,
        &state.0,
        &["attach", "--netns", &pod.pod.path_str(), "--id", &id],
    ))
    .expect("attach prints JSON");
    let n = pod.net;
    let peer4 = format!("198.18.{n}.1");
    // The late network: 198.19.<n>.0/24, pod side .2 with a MAC chosen here
    // (the guest is told which NIC to wait for and what to give it).
    let (late_ip, late_peer) = (format!("198.19.{n}.2"), format!("198.19.{n}.1"));
    let late_mac = format!("02:5a:{:02x}:{n:02x}:00:02", std::process::id() % 256);
    let append = format!(
        "podtap.ping={peer4} podtap.hold=60 podtap.timeout=140 podtap.late={late_mac},1500,{late_ip}/24,{late_peer}"
    );
    let qmp_arg = format!("unix:{},server=on,wait=off", qmp.display());
    let (p, q) = (&pod.pod.name, &pod.peer.name);
    let console = boot_live(
        &example("qemu-fds.sh"),
        &state.0,
        &id,
        &append,
        &["-qmp", &qmp_arg],
        |live| {
            let qmp = qmp.display().to_string();
            let watch = Watch::start(BIN, &state.0, &id, &["--qmp", &qmp]);
            let ready = watch.next_within("ready", 30);
            assert_eq!(ready["interfaces"], serde_json::json!(["eth0"]));

            // A second network arrives in the pod after the VM booted.
            sh(&format!(
                "ip -n {q} link add late{n} type veth peer name net1 address {late_mac} netns {p}"
            ));
            sh(&format!(
                "ip -n {q} addr add {late_peer}/24 dev late{n} && ip -n {q} link set late{n} up"
            ));
            sh(&format!(
                "ip -n {p} addr add {late_ip}/24 dev net1 && ip -n {p} link set net1 up"
            ));
            let added = watch.next_within("added", 30);
            assert_eq!(added["interface"], "net1", "{added}");
            assert_eq!(added["device"], "podtap-tap_net1", "{added}");
            assert_eq!(added["nic"]["guest_mac"], late_mac.as_str(), "{added}");
            let nic = live
                .wait_for("PODTAP-LATE-NIC", std::time::Duration::from_secs(60))
                .expect("the hotplugged NIC never appeared in the guest");
            assert!(nic.contains(&late_mac), "{nic}");
            let ping = live
                .wait_for("PODTAP-LATE-PING", std::time::Duration::from_secs(60))
                .expect("the guest never pinged through the new NIC");
            assert_eq!(ping, format!("PODTAP-LATE-PING OK {late_peer}"));
            live.wait_for("PODTAP-LATE-UP", std::time::Duration::from_secs(10))
                .expect("PODTAP-LATE-UP");
            // Both directions: the late network reaches the guest too.
            reach_in(&pod.peer, &late_ip, &late_mac, 5);

            // The network leaves: the device leaves the guest, the TAP the pod.
            pod.pod.ip("link del net1");
            let removed = watch.next_within("removed", 60);
            assert_eq!(removed["interface"], "net1", "{removed}");
            assert_eq!(removed["device"], "podtap-tap_net1", "{removed}");
            let gone = live
                .wait_for("PODTAP-LATE-GONE", std::time::Duration::from_secs(60))
                .expect("the unplugged NIC never left the guest");
            assert!(gone.contains(&late_mac), "{gone}");
            assert!(
                !taps(&pod.pod).iter().any(|t| t == "tap_net1"),
                "the late TAP is still in the pod netns"
            );

            watch.signal("TERM");
            let stopped = watch.next_within("stopped", 10);
            assert_eq!(stopped["signal"], "SIGTERM");
            assert_eq!(watch.exit_code(), Some(0), "watch did not exit 0");
        },
    );
    assert_line(&console, &format!("PODTAP-PING OK {peer4}"));
    assert_no_errors(&console);
    assert!(desc["interfaces"].is_array());
    podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
    assert_eq!(
        before,
        settled_snapshot(&pod.pod),
        "detach after watch left the pod netns changed"
    );
}
