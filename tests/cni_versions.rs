//! The CNI door at every spec version clusters run, and with the result and
//! pod shapes of the CNIs podtap is chained behind.
//!
//! Chains run as libcni runs them (tests/support/src/cni.rs): ADD in order
//! threading each result, the final result cached, CHECK (from 0.4.0) and
//! DEL with that cached result, DEL in reverse order stopping at the first
//! plugin that fails. The bridge and host-local plugins are Debian's
//! containernetworking-plugins. Calico and Cilium cannot run here, so their
//! pods are built with iproute2 as their CNI plugins build them, and podtap
//! is fed the `prevResult` each sends (tests/support/src/shapes.rs says
//! where each shape comes from).

use podtap_testkit::shapes::{RoutedPod, Shape, CILIUM_ROUTE_MTU};
use podtap_testkit::{
    checkpoint_path, conflist, container_id, settled_snapshot, taps, Chain, Netns, TempDir, PLUGINS,
};
use serde_json::{json, Value};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

const VERSIONS: [&str; 5] = ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

fn ready(test: &str) -> bool {
    podtap_testkit::root_or_skip(test)
        && podtap_testkit::tool_or_skip(test, &format!("{PLUGINS}/bridge"))
}

/// The addresses host-local holds leases for in `data` (one file per address).
fn leases(data: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for net in std::fs::read_dir(data).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(net.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = f.file_name().to_string_lossy().to_string();
            if name.parse::<std::net::IpAddr>().is_ok() {
                out.push(name);
            }
        }
    }
    out
}

/// Each result's `ips[].version` is there exactly before 1.0.0, as libcni's
/// own parser of that version expects.
fn assert_ips_in_version(result: &Value, version: &str) {
    assert_eq!(result["cniVersion"], version, "{result}");
    let ips = result["ips"].as_array().expect("ips");
    assert!(!ips.is_empty(), "{result}");
    for ip in ips {
        if version.starts_with("0.") {
            assert_eq!(ip["version"], "4", "{result}");
        } else {
            assert!(ip.get("version").is_none(), "{result}");
        }
    }
}

/// The versions of [`VERSIONS`] Debian's bridge plugin speaks (its VERSION
/// answer). libcni refuses a conflist one of whose plugins does not speak its
/// version, so a chain at any other is not one a runtime would run; podtap
/// alone at those is tested in tests/cni.rs and tests/cni_bad_input.rs.
fn bridge_versions() -> Vec<&'static str> {
    let out = podtap_testkit::run_with_stdin(
        std::process::Command::new(format!("{PLUGINS}/bridge")).env("CNI_COMMAND", "VERSION"),
        "{}",
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("bridge VERSION");
    let theirs = v["supportedVersions"]
        .as_array()
        .expect("supportedVersions");
    VERSIONS
        .into_iter()
        .filter(|v| theirs.contains(&json!(v)))
        .collect()
}

#[test]
fn every_version_through_a_real_bridge_chain() {
    if !ready("every_version_through_a_real_bridge_chain") {
        return;
    }
    let versions = bridge_versions();
    for must in ["0.3.0", "0.3.1", "0.4.0", "1.0.0"] {
        assert!(
            versions.contains(&must),
            "bridge speaks {must}: {versions:?}"
        );
    }
    let node = Netns::new("cvn");
    for (i, version) in versions.iter().enumerate() {
        let pod = Netns::new("cvp");
        let (state, data) = (TempDir::new(), TempDir::new());
        let net = 150 + (std::process::id() % 20) * 5 + u32::try_from(i).expect("index");
        let mut conf = conflist("bridge-podtap.conflist", state.path(), data.path(), net);
        conf["cniVersion"] = json!(version);
        let chain = Chain::new(BIN, conf, Some(&node));
        let cid = container_id(40 + u32::try_from(i).expect("index"));
        let netns = pod.path_str();

        let results = chain.add(&cid, &netns, "eth0");
        let (bridge, result) = (&results[0], &results[1]);
        assert_ips_in_version(bridge, version);
        assert_ips_in_version(result, version);
        assert_eq!(result["ips"], bridge["ips"], "at {version}");
        assert_eq!(taps(&pod).len(), 1, "one TAP at {version}");
        assert!(checkpoint_path(state.path(), &format!("{cid}-eth0")).exists());
        assert_eq!(
            leases(data.path()).len(),
            1,
            "host-local leased one address"
        );

        if chain.version_at_least("0.4.0") {
            for (p, run) in chain
                .plugins()
                .iter()
                .zip(chain.check(&cid, &netns, "eth0", result))
            {
                run.expect_ok(&format!("CHECK {} at {version}", p["type"]));
            }
        }
        // The reverse DEL reaches host-local only if podtap's DEL succeeds.
        chain
            .try_del(&cid, &netns, "eth0", Some(result))
            .unwrap_or_else(|(t, run)| {
                run.expect_ok(&format!("DEL {t} at {version}"));
            });
        assert!(taps(&pod).is_empty(), "TAP removed at {version}");
        assert!(!checkpoint_path(state.path(), &format!("{cid}-eth0")).exists());
        assert!(
            leases(data.path()).is_empty(),
            "address released at {version}"
        );
    }
}

/// A pod made before podtap was chained into the conflist is deleted with the
/// conflist that now ends in podtap: every plugin's DEL succeeds and the IP
/// is released, at the version Flannel, Calico and Cilium write.
#[test]
fn pods_from_before_podtap_was_chained_are_deleted() {
    if !ready("pods_from_before_podtap_was_chained_are_deleted") {
        return;
    }
    let node = Netns::new("cwn");
    let pod = Netns::new("cwp");
    let (state, data) = (TempDir::new(), TempDir::new());
    let net = 60 + std::process::id() % 40;
    let mut with_podtap = conflist("bridge-podtap.conflist", state.path(), data.path(), net);
    with_podtap["cniVersion"] = json!("0.3.1");
    let mut without = with_podtap.clone();
    without["plugins"] = json!([with_podtap["plugins"][0].clone()]);
    let cid = container_id(60);
    let netns = pod.path_str();
    let before = Chain::new(BIN, without, Some(&node)).add(&cid, &netns, "eth0");
    assert_eq!(leases(data.path()).len(), 1);

    let chain = Chain::new(BIN, with_podtap, Some(&node));
    chain
        .try_del(&cid, &netns, "eth0", before.last())
        .unwrap_or_else(|(t, run)| {
            run.expect_ok(&format!("DEL {t}"));
        });
    assert!(
        leases(data.path()).is_empty(),
        "host-local released the address"
    );
    // The netns may be gone already: DEL with an empty CNI_NETNS succeeds too.
    chain
        .try_del(&cid, "", "eth0", None)
        .unwrap_or_else(|(t, run)| {
            run.expect_ok(&format!("DEL {t} without a netns"));
        });
}

/// podtap alone (the runtime runs it after Calico's or Cilium's plugin).
fn podtap_chain(state: &std::path::Path, node: &Netns, version: &str, extra: Value) -> Chain {
    let mut podtap = json!({ "type": "podtap", "stateDir": state });
    for (k, v) in extra.as_object().expect("extra keys") {
        podtap[k] = v.clone();
    }
    Chain::new(
        BIN,
        json!({ "cniVersion": version, "name": "k8s-pod-network", "plugins": [podtap] }),
        Some(node),
    )
}

/// Run ADD with `prev` as the previous plugin's result, then CHECK and DEL
/// with the cached result; returns podtap's result. The pod netns is exactly
/// as it was after DEL.
fn add_check_del(chain: &Chain, rp: &RoutedPod, prev: &Value, cid: &str) -> Value {
    let netns = rp.pod.path_str();
    let before = settled_snapshot(&rp.pod);
    let conf = chain.plugin_conf(&chain.plugins()[0], Some(prev));
    let result = chain
        .exec(
            "podtap",
            &conf.to_string(),
            &Chain::env("ADD", cid, &netns, "eth0"),
        )
        .expect_ok("ADD");
    assert_eq!(taps(&rp.pod).len(), 1);
    for run in chain.check(cid, &netns, "eth0", &result) {
        run.expect_ok("CHECK with the previous plugin's own entry names");
    }
    chain.del(cid, &netns, "eth0", Some(&result));
    assert_eq!(
        settled_snapshot(&rp.pod),
        before,
        "DEL restores the pod netns"
    );
    result
}

/// ADD with `resultTap: tc-redirect-tap` at 0.3.1, CHECK and DEL, on `rp`
/// with its CNI's result; podtap's result and its VM interface's index.
fn through_tc_redirect_tap(rp: &RoutedPod, n: u32) -> (Value, usize) {
    let state = TempDir::new();
    let extra = json!({ "resultTap": "tc-redirect-tap" });
    let chain = podtap_chain(state.path(), &rp.node, "0.3.1", extra);
    let cid = container_id(n);
    let result = add_check_del(&chain, rp, &rp.prev_result(), &cid);
    let vm = result["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .position(|i| i["sandbox"] == json!(cid))
        .expect("VM interface");
    (result, vm)
}

/// The `ips` of `result` that name interface `vm`.
fn vm_ips(result: &Value, vm: usize) -> Vec<Value> {
    result["ips"]
        .as_array()
        .expect("ips")
        .iter()
        .filter(|ip| ip["interface"] == json!(vm))
        .cloned()
        .collect()
}

#[test]
fn calico_shaped_pods_attach_check_and_detach() {
    if !ready("calico_shaped_pods_attach_check_and_detach") {
        return;
    }
    let rp = RoutedPod::new(Shape::Calico, 1);
    let pod_mac = rp.mac(&rp.pod, "eth0");
    // tc-redirect-tap's shape: the VM interface gets the pod's /32 and the
    // default route's gateway from the scan (tc-redirect-tap#7 gave none).
    let (result, vm) = through_tc_redirect_tap(&rp, 61);
    assert_eq!(result["cniVersion"], "0.3.1");
    assert_eq!(
        result["interfaces"][vm]["mac"],
        json!(pod_mac),
        "the guest keeps the pod's MAC"
    );
    assert_eq!(
        vm_ips(&result, vm),
        [
            json!({ "version": "4", "address": format!("{}/32", rp.address),
                 "gateway": "169.254.1.1", "interface": vm })
        ]
    );

    // Bridge mode gives the pod interface a new MAC: Calico's entry (named
    // after the host veth) says so, and CHECK passes (it returned 112 while
    // it looked for an entry named CNI_IFNAME). At 1.1.0, which has CHECK.
    let mut prev = rp.prev_result();
    prev["cniVersion"] = json!("1.1.0");
    prev["ips"][0]
        .as_object_mut()
        .expect("ip")
        .remove("version");
    let state = TempDir::new();
    let chain = podtap_chain(
        state.path(),
        &rp.node,
        "1.1.0",
        json!({ "mode": "bridge", "resultTap": "listed" }),
    );
    let cid = container_id(62);
    let netns = rp.pod.path_str();
    let conf = chain.plugin_conf(&chain.plugins()[0], Some(&prev));
    let result = chain
        .exec(
            "podtap",
            &conf.to_string(),
            &Chain::env("ADD", &cid, &netns, "eth0"),
        )
        .expect_ok("ADD bridge");
    let now = rp.mac(&rp.pod, "eth0");
    assert_ne!(now, pod_mac, "bridge mode moved the pod's MAC to the guest");
    assert_eq!(result["interfaces"][0]["name"], json!(rp.host));
    assert_eq!(
        result["interfaces"][0]["mac"],
        json!(now),
        "no stale pod MAC"
    );
    for run in chain.check(&cid, &netns, "eth0", &result) {
        run.expect_ok("CHECK bridge mode");
    }
    chain.del(&cid, &netns, "eth0", Some(&result));
    assert_eq!(rp.mac(&rp.pod, "eth0"), pod_mac, "DEL gives the MAC back");
}

#[test]
fn cilium_shaped_pods_attach_check_and_detach() {
    if !ready("cilium_shaped_pods_attach_check_and_detach") {
        return;
    }
    let rp = RoutedPod::new(Shape::Cilium, 2);
    let gw = rp.gateway.clone();
    let (result, vm) = through_tc_redirect_tap(&rp, 63);
    let [vm_ip] = vm_ips(&result, vm)
        .try_into()
        .expect("the VM interface has the pod's address");
    assert_eq!(vm_ip["address"], json!(format!("{}/32", rp.address)));
    assert_eq!(vm_ip["gateway"], json!(gw));
    assert_eq!(
        result["routes"],
        rp.prev_result()["routes"],
        "routes pass through"
    );

    // The attach's description carries the route MTU for the guest.
    let out = podtap_testkit::sh(&format!("{BIN} scan --netns {}", rp.pod.path_str()));
    let desc: Value = serde_json::from_str(&out).expect("scan JSON");
    let default = desc["routes"]
        .as_array()
        .expect("routes")
        .iter()
        .find(|r| r["destination"] == "0.0.0.0/0")
        .cloned()
        .expect("default route");
    assert_eq!(default["mtu"], CILIUM_ROUTE_MTU);
    assert_eq!(default["gateway"], json!(gw));
}

/// The `CNI_ARGS` example of docs/integration.md, through the real bridge
/// chain: every plugin gets it, and the reference plugins accept it only
/// because it says `IgnoreUnknown=1`.
#[test]
fn the_documented_cni_args_pass_a_real_chain() {
    if !ready("the_documented_cni_args_pass_a_real_chain") {
        return;
    }
    let doc = std::fs::read_to_string(podtap_testkit::repo().join("docs/integration.md"))
        .expect("docs/integration.md");
    let example = doc
        .split('`')
        .find(|s| s.starts_with("IgnoreUnknown=1;PODTAP_"))
        .expect("the CNI_ARGS example");
    let node = Netns::new("can");
    let pod = Netns::new("cap");
    let (state, data) = (TempDir::new(), TempDir::new());
    let net = 20 + std::process::id() % 30;
    let mut conf = conflist("bridge-podtap.conflist", state.path(), data.path(), net);
    conf["plugins"][1]["podPolicy"] = json!({ "modes": ["bridge"], "maxQueues": 4 });
    let chain = Chain::new(BIN, conf, Some(&node));
    let cid = container_id(64);
    let netns = pod.path_str();
    let mut prev: Option<Value> = None;
    for p in chain.plugins() {
        let t = p["type"].as_str().expect("type");
        let mut env = Chain::env("ADD", &cid, &netns, "eth0");
        env.push(("CNI_ARGS", example));
        let stdin = chain.plugin_conf(&p, prev.as_ref()).to_string();
        prev = Some(
            chain
                .exec(t, &stdin, &env)
                .expect_ok(&format!("ADD {t} with {example}")),
        );
    }
    let tap = taps(&pod).pop().expect("a TAP");
    assert!(pod
        .ip(&format!("-d link show {tap}"))
        .contains("multi_queue"));
    assert!(
        !pod.ip("link show type bridge").trim().is_empty(),
        "bridge mode"
    );
    chain.del(&cid, &netns, "eth0", prev.as_ref());
}

/// Multus: the cluster network's chain for `eth0` (0.3.1), then a
/// NetworkAttachmentDefinition's own chain for `net1` at 0.3.0, the version
/// of Multus's examples (docs/quickstart.md): macvlan, then podtap. Each
/// interface is its own attachment; deleting `net1` leaves `eth0` wired.
#[test]
fn multus_calls_podtap_for_net1() {
    if !ready("multus_calls_podtap_for_net1")
        || !podtap_testkit::tool_or_skip(
            "multus_calls_podtap_for_net1",
            &format!("{PLUGINS}/macvlan"),
        )
    {
        return;
    }
    let node = Netns::new("cmn");
    let pod = Netns::new("cmp");
    node.ip("link add uplink0 type veth peer name uplink0p");
    node.ip("link set uplink0 up");
    node.ip("link set uplink0p up");
    let before = settled_snapshot(&pod);
    let (state, data) = (TempDir::new(), TempDir::new());
    let net = 10 + std::process::id() % 40;
    let mut cluster = conflist("bridge-podtap.conflist", state.path(), data.path(), net);
    cluster["cniVersion"] = json!("0.3.1");
    let mut nad = conflist(
        "macvlan-podtap.conflist",
        state.path(),
        data.path(),
        net + 50,
    );
    nad["cniVersion"] = json!("0.3.0");
    nad["name"] = json!("macvlan-conf");
    nad["plugins"][0]["master"] = json!("uplink0");
    nad["plugins"][0]["ipam"]
        .as_object_mut()
        .expect("ipam")
        .remove("routes");
    let (eth0, net1) = (
        Chain::new(BIN, cluster, Some(&node)),
        Chain::new(BIN, nad, Some(&node)),
    );
    let cid = container_id(65);
    let netns = pod.path_str();
    let r0 = eth0.add(&cid, &netns, "eth0");
    let r1 = net1.add(&cid, &netns, "net1");
    assert_ips_in_version(r1.last().expect("result"), "0.3.0");
    assert_eq!(taps(&pod).len(), 2, "one TAP per network");
    for ifname in ["eth0", "net1"] {
        assert!(checkpoint_path(state.path(), &format!("{cid}-{ifname}")).exists());
    }
    net1.del(&cid, &netns, "net1", r1.last());
    assert_eq!(taps(&pod).len(), 1, "net1's TAP gone, eth0's kept");
    podtap_testkit::podtap_ok(
        BIN,
        state.path(),
        &["check", "--id", &format!("{cid}-eth0")],
    );
    eth0.del(&cid, &netns, "eth0", r0.last());
    assert_eq!(settled_snapshot(&pod), before, "the pod netns as it was");
}

/// STATUS probes what the configured mode needs and no more: containerd
/// turns a STATUS error into a NotReady node. With `/dev/net/tun` hidden
/// (a private mount namespace with an empty /dev/net), tc and bridge mode
/// are not available (error 50) while macvtap mode, which opens no TUN
/// device, still is.
#[test]
fn status_asks_for_what_the_mode_needs() {
    if !ready("status_asks_for_what_the_mode_needs")
        || !podtap_testkit::tool_or_skip("status_asks_for_what_the_mode_needs", "unshare")
    {
        return;
    }
    let state = TempDir::new();
    let status = |mode: &str, hide_tun: bool| {
        let conf = json!({ "cniVersion": "1.1.0", "name": "n", "type": "podtap",
                           "mode": mode, "stateDir": state.path() });
        let hide = if hide_tun {
            "mount -t tmpfs none /dev/net && "
        } else {
            ""
        };
        let script = format!("{hide}exec {BIN}");
        let mut cmd = std::process::Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .env("CNI_COMMAND", "STATUS");
        podtap_testkit::Run {
            out: podtap_testkit::run_with_stdin(&mut cmd, &conf.to_string()),
        }
    };
    for mode in ["tc", "bridge", "macvtap"] {
        status(mode, false).expect_ok(&format!("STATUS in {mode} mode"));
    }
    for mode in ["tc", "bridge"] {
        let e = status(mode, true).expect_err(50);
        assert!(
            e["msg"].as_str().unwrap_or("").contains("/dev/net/tun"),
            "{e}"
        );
    }
    status("macvtap", true).expect_ok("STATUS in macvtap mode without /dev/net/tun");
}
