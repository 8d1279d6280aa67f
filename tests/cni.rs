//! podtap as a chained CNI plugin, driven exactly as libcni drives a conflist:
//! the real Debian containernetworking-plugins (bridge, macvlan, host-local)
//! followed by podtap, each plugin found through CNI_PATH and given its
//! predecessor's result as `prevResult`. Plugins run inside a private "node"
//! netns (`ip netns exec`), so the bridge never lands in the root netns.
//!
//! These skip without root or without the plugins; podtap alone on bad input
//! is tests/cni_bad_input.rs.

use std::process::Command;

use podtap_testkit::{
    checkpoint_path, conflist, container_id, sh, taps, Chain, Netns, Run, TempDir, PLUGINS,
};
use serde_json::{json, Value};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

fn ready(test: &str) -> bool {
    podtap_testkit::root_or_skip(test)
        && podtap_testkit::tool_or_skip(test, &format!("{PLUGINS}/bridge"))
}

/// The CNI 1.0 result shape (interfaces, ips with interface index, routes, dns).
fn result_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": ["cniVersion", "interfaces", "ips"],
        "properties": {
            "cniVersion": { "enum": ["1.0.0", "1.1.0"] },
            "interfaces": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": { "type": "string", "minLength": 1, "maxLength": 15 },
                        "mac": { "type": "string", "pattern": "^([0-9a-f]{2}:){5}[0-9a-f]{2}$" },
                        "sandbox": { "type": "string", "minLength": 1 },
                        "mtu": { "type": "integer", "minimum": 0 }
                    }
                }
            },
            "ips": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["address"],
                    "properties": {
                        "address": { "type": "string" },
                        "gateway": { "type": "string" },
                        "interface": { "type": "integer", "minimum": 0 }
                    }
                }
            },
            "routes": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["dst"],
                    "properties": { "dst": { "type": "string" }, "gw": { "type": "string" } }
                }
            },
            "dns": { "type": "object" }
        }
    })
}

fn assert_cni_result(result: &Value) {
    let validator = jsonschema::validator_for(&result_schema()).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(result)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "result does not match the CNI 1.0 shape: {errors:?}\n{result:#}"
    );
    let n = result["interfaces"].as_array().map_or(0, Vec::len);
    for ip in result["ips"].as_array().into_iter().flatten() {
        if let Some(i) = ip["interface"].as_u64() {
            let i = usize::try_from(i).unwrap();
            assert!(i < n, "ips[].interface {i} points past interfaces[{n}]");
            assert!(
                result["interfaces"][i]["sandbox"].is_string(),
                "ips[].interface points at a host interface"
            );
        }
    }
}

fn pod_mac(pod: &Netns, ifname: &str) -> String {
    pod.ip_json(&format!("link show {ifname}"))[0]["address"]
        .as_str()
        .expect("mac")
        .to_string()
}

/// Whether `ns` has a link `name`, once no DEL's deferred deletion is pending.
fn has_link(ns: &Netns, name: &str) -> bool {
    podtap_testkit::wait_for_deferred_teardown(ns);
    podtap_testkit::sh_ok(&format!("ip -n {} link show {name}", ns.name))
}

/// The conflist with `resultTap: listed` on podtap: the tests that read the TAP from the result.
fn listing_tap(mut conf: Value) -> Value {
    for p in conf["plugins"].as_array_mut().expect("plugins") {
        if p["type"] == "podtap" {
            p["resultTap"] = json!("listed");
        }
    }
    conf
}

#[test]
fn bridge_conflist_add_check_del_gc() {
    if !ready("bridge_conflist_add_check_del_gc") {
        return;
    }
    let node = Netns::new("cnd");
    let pod = Netns::new("cpd");
    let (state, data) = (TempDir::new(), TempDir::new());
    let net = 100 + (std::process::id() % 100);
    let chain = Chain::new(
        BIN,
        listing_tap(conflist(
            "bridge-podtap.conflist",
            state.path(),
            data.path(),
            net,
        )),
        Some(&node),
    );
    let cid = container_id(1);
    let netns = pod.path_str();
    let id = format!("{cid}-eth0");

    // ADD: bridge (+ host-local) then podtap.
    let results = chain.add(&cid, &netns, "eth0");
    let (bridge, result) = (&results[0], &results[1]);
    assert_cni_result(bridge);
    assert_cni_result(result);
    assert_eq!(result["ips"], bridge["ips"], "IPs pass through untouched");
    assert_eq!(
        result["routes"], bridge["routes"],
        "routes pass through untouched"
    );
    assert_eq!(result["dns"], bridge["dns"], "DNS passes through untouched");
    let before = bridge["interfaces"].as_array().expect("interfaces");
    let after = result["interfaces"].as_array().expect("interfaces");
    assert_eq!(
        after.len(),
        before.len() + 1,
        "podtap adds exactly one interface"
    );
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "earlier interfaces are kept"
    );
    let tap = after.last().expect("tap entry");
    let tap_name = tap["name"].as_str().expect("tap name").to_string();
    assert_eq!(tap["sandbox"], json!(netns));
    assert_eq!(
        tap["mac"],
        json!(pod_mac(&pod, &tap_name)),
        "the TAP entry carries the TAP's own MAC (the CNI spec's `mac`)"
    );
    assert_ne!(
        tap["mac"],
        json!(pod_mac(&pod, "eth0")),
        "no duplicate MAC in the result"
    );
    assert!(
        has_link(&pod, &tap_name),
        "TAP {tap_name} exists in the pod netns"
    );
    assert!(
        !has_link(&node, &tap_name),
        "nothing podtap made lands in the node netns"
    );
    assert_eq!(
        podtap_testkit::wiring::redirect_kind(&pod, "eth0", &tap_name),
        Some(podtap_testkit::wiring::default_redirect()),
        "eth0 is wired with tc"
    );
    assert!(checkpoint_path(state.path(), &id).exists());

    // A repeated ADD (the runtime retrying) returns the same result and builds nothing new.
    let again = chain
        .podtap(
            "1.0.0",
            json!({ "prevResult": bridge }),
            &Chain::env("ADD", &cid, &netns, "eth0"),
        )
        .expect_ok("ADD again");
    assert_eq!(&again, result);
    // The same id in another netns is a conflict (podtap code 100 + 11).
    let elsewhere = Netns::new("cpx");
    elsewhere.ip("link add eth0 type veth peer name eth0p");
    chain
        .podtap(
            "1.0.0",
            json!({ "prevResult": bridge }),
            &Chain::env("ADD", &cid, &elsewhere.path_str(), "eth0"),
        )
        .expect_err(111);
    let entry: Value = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("cni").join(format!("{id}.json")))
            .expect("registry entry"),
    )
    .expect("entry is JSON");
    assert_eq!(
        entry["netns"],
        json!(netns),
        "a refused ADD leaves the record alone"
    );

    // CHECK: every plugin, with the cached result.
    for (i, r) in chain.check(&cid, &netns, "eth0", result).iter().enumerate() {
        r.expect_ok(&format!("CHECK plugin {i}"));
    }
    // CHECK with a prevResult that lacks the TAP fails with podtap's check code.
    chain
        .podtap(
            "1.0.0",
            json!({ "prevResult": bridge }),
            &Chain::env("CHECK", &cid, &netns, "eth0"),
        )
        .expect_err(112);

    // DEL (reverse order, with prevResult): the TAP and the checkpoint go.
    chain.del(&cid, &netns, "eth0", Some(result));
    assert!(!has_link(&pod, &tap_name), "DEL removes the TAP");
    assert!(
        !checkpoint_path(state.path(), &id).exists(),
        "DEL removes the checkpoint"
    );
    // DEL again, DEL without prevResult, DEL without CNI_NETNS: all succeed.
    chain.del(&cid, &netns, "eth0", Some(result));
    chain.del(&cid, &netns, "eth0", None);
    chain
        .podtap(
            "1.0.0",
            json!({}),
            &[
                ("CNI_COMMAND", "DEL"),
                ("CNI_CONTAINERID", &cid),
                ("CNI_IFNAME", "eth0"),
            ],
        )
        .expect_ok("DEL with no CNI_NETNS");

    // ADD again; someone removes the TAP: CHECK fails, DEL still succeeds.
    let results = chain.add(&cid, &netns, "eth0");
    let tap_name = results[1]["interfaces"]
        .as_array()
        .and_then(|l| l.last())
        .and_then(|t| t["name"].as_str())
        .expect("tap")
        .to_string();
    sh(&format!("ip -n {} link del {tap_name}", pod.name));
    chain
        .podtap(
            "1.0.0",
            json!({ "prevResult": results[1] }),
            &Chain::env("CHECK", &cid, &netns, "eth0"),
        )
        .expect_err(112);
    chain.del(&cid, &netns, "eth0", results.last());
    assert!(!checkpoint_path(state.path(), &id).exists());

    // ADD again, delete the netns, then DEL: must succeed and leave no checkpoint.
    let results = chain.add(&cid, &netns, "eth0");
    assert!(checkpoint_path(state.path(), &id).exists());
    sh(&format!("ip netns del {}", pod.name));
    chain.del(&cid, &netns, "eth0", results.last());
    assert!(
        !checkpoint_path(state.path(), &id).exists(),
        "DEL after the netns is gone removes the checkpoint"
    );
    chain.del(&cid, "", "eth0", None);
    assert_eq!(
        std::fs::read_dir(state.path().join("cni"))
            .map(|d| d.count())
            .unwrap_or(0),
        0,
        "no CNI registry entries left"
    );
}

#[test]
fn gc_and_status() {
    if !ready("gc_and_status") {
        return;
    }
    let node = Netns::new("cnd");
    let (pod_a, pod_b) = (Netns::new("cpa"), Netns::new("cpb"));
    let (state, data) = (TempDir::new(), TempDir::new());
    let net = 200 + (std::process::id() % 50);
    let chain = Chain::new(
        BIN,
        listing_tap(conflist(
            "bridge-podtap.conflist",
            state.path(),
            data.path(),
            net,
        )),
        Some(&node),
    );
    let (a, b) = (container_id(2), container_id(3));
    let ra = chain.add(&a, &pod_a.path_str(), "eth0");
    let rb = chain.add(&b, &pod_b.path_str(), "eth0");
    let tap_b = rb[1]["interfaces"]
        .as_array()
        .and_then(|l| l.last())
        .and_then(|t| t["name"].as_str())
        .expect("tap")
        .to_string();
    assert!(has_link(&pod_b, &tap_b));

    // A checkpoint podtap's CLI made in the same state dir is not GC's business.
    let cli_pod = podtap_testkit::Pod::dual_stack();
    podtap_testkit::json_ok(&podtap_testkit::podtap_state(
        BIN,
        state.path(),
        &[
            "attach",
            "--netns",
            &cli_pod.pod.path_str(),
            "--id",
            "cli-made",
        ],
    ));

    // STATUS (1.1): /dev/net/tun and tc mirred work here.
    chain
        .podtap("1.1.0", json!({}), &[("CNI_COMMAND", "STATUS")])
        .expect_ok("STATUS");
    // Without privileges neither works: error 50, plugin not available.
    if podtap_testkit::tool_or_skip("gc_and_status", "setpriv") {
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "echo '{{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"podtap\"}}' | CNI_COMMAND=STATUS setpriv --reuid 65534 --regid 65534 --clear-groups {}",
                BIN
            ))
            .output()
            .expect("run STATUS unprivileged");
        Run { out }.expect_err(50);
    }

    // GC (1.1) on another network name touches nothing.
    let other = chain.podtap(
        "1.1.0",
        json!({ "name": "another-net", "cni.dev/valid-attachments": [] }),
        &[("CNI_COMMAND", "GC")],
    );
    other.expect_ok("GC other network");
    assert!(checkpoint_path(state.path(), &format!("{a}-eth0")).exists());
    assert!(checkpoint_path(state.path(), &format!("{b}-eth0")).exists());

    // GC keeping only A removes B's checkpoint and TAP.
    let valid = json!({ "cni.dev/valid-attachments": [{ "containerID": a, "ifname": "eth0" }] });
    chain
        .podtap("1.1.0", valid.clone(), &[("CNI_COMMAND", "GC")])
        .expect_ok("GC");
    assert!(
        checkpoint_path(state.path(), &format!("{a}-eth0")).exists(),
        "valid attachment kept"
    );
    assert!(
        !checkpoint_path(state.path(), &format!("{b}-eth0")).exists(),
        "stale attachment collected"
    );
    assert!(!has_link(&pod_b, &tap_b), "stale TAP removed");
    assert!(
        checkpoint_path(state.path(), "cli-made").exists(),
        "GC leaves non-CNI checkpoints alone"
    );
    // GC again is a no-op; so is a GC without a list (nothing is known to
    // be stale); libcni 1.2.3 and later send the list under both keys.
    chain
        .podtap("1.1.0", valid.clone(), &[("CNI_COMMAND", "GC")])
        .expect_ok("GC again");
    chain
        .podtap("1.1.0", json!({}), &[("CNI_COMMAND", "GC")])
        .expect_ok("GC without a list");
    let mut both = valid.clone();
    both["cni.dev/attachments"] = valid["cni.dev/valid-attachments"].clone();
    chain
        .podtap("1.1.0", both, &[("CNI_COMMAND", "GC")])
        .expect_ok("GC with both keys");
    assert!(
        checkpoint_path(state.path(), &format!("{a}-eth0")).exists(),
        "valid attachment kept by GCs without a list or with both keys"
    );

    // B's remaining plugins clean up as the runtime would; A is still checkable.
    chain.del(&b, &pod_b.path_str(), "eth0", rb.last());
    for r in chain.check(&a, &pod_a.path_str(), "eth0", &ra[1]) {
        r.expect_ok("CHECK A after GC");
    }
    chain.del(&a, &pod_a.path_str(), "eth0", ra.last());
    assert!(
        podtap_testkit::podtap_state(BIN, state.path(), &["detach", "--id", "cli-made"])
            .status
            .success()
    );
}

#[test]
fn macvlan_conflist() {
    if !ready("macvlan_conflist")
        || !podtap_testkit::tool_or_skip("macvlan_conflist", &format!("{PLUGINS}/macvlan"))
    {
        return;
    }
    let node = Netns::new("cnd");
    let pod = Netns::new("cpm");
    node.ip("link add uplink0 type veth peer name uplink0p");
    node.ip("link set uplink0 up");
    node.ip("link set uplink0p up");
    let (state, data) = (TempDir::new(), TempDir::new());
    let net = 150 + (std::process::id() % 50);
    let mut conf = listing_tap(conflist(
        "macvlan-podtap.conflist",
        state.path(),
        data.path(),
        net,
    ));
    conf["plugins"][0]["master"] = json!("uplink0");
    let chain = Chain::new(BIN, conf, Some(&node));
    let cid = container_id(4);
    let netns = pod.path_str();
    let results = chain.add(&cid, &netns, "net1");
    let result = &results[1];
    assert_cni_result(result);
    let tap = result["interfaces"]
        .as_array()
        .and_then(|l| l.last())
        .expect("tap")
        .clone();
    let tap_name = tap["name"].as_str().expect("name");
    assert_eq!(
        tap["mac"],
        json!(pod_mac(&pod, tap_name)),
        "the TAP's own MAC"
    );
    assert!(has_link(&pod, tap_name));
    for r in chain.check(&cid, &netns, "net1", result) {
        r.expect_ok("CHECK");
    }
    chain.del(&cid, &netns, "net1", Some(result));
    chain.del(&cid, &netns, "net1", None);
    assert!(!checkpoint_path(state.path(), &format!("{cid}-net1")).exists());
}

#[test]
fn bridge_mode_result_reports_the_pod_mac_change() {
    if !ready("bridge_mode_result_reports_the_pod_mac_change") {
        return;
    }
    let node = Netns::new("cnd");
    let pod = Netns::new("cpr");
    let (state, data) = (TempDir::new(), TempDir::new());
    let net = 50 + (std::process::id() % 50);
    let mut conf = listing_tap(conflist(
        "bridge-podtap.conflist",
        state.path(),
        data.path(),
        net,
    ));
    // The runtime asks for bridge wiring through the podtap capability.
    conf["plugins"][1]["runtimeConfig"] = json!({ "podtap": { "mode": "bridge" } });
    let chain = Chain::new(BIN, conf, Some(&node));
    let cid = container_id(5);
    let netns = pod.path_str();
    let results = chain.add(&cid, &netns, "eth0");
    let (bridge, result) = (&results[0], &results[1]);
    assert_cni_result(result);
    let orig = bridge["interfaces"]
        .as_array()
        .and_then(|l| l.iter().find(|i| i["name"] == "eth0"))
        .expect("eth0")["mac"]
        .clone();
    let tap = result["interfaces"]
        .as_array()
        .and_then(|l| l.last())
        .expect("tap")
        .clone();
    let tap_name = tap["name"].as_str().expect("name");
    assert_eq!(
        tap["mac"],
        json!(pod_mac(&pod, tap_name)),
        "the TAP's own MAC"
    );
    assert_ne!(tap["mac"], orig);
    let eth0 = result["interfaces"]
        .as_array()
        .and_then(|l| l.iter().find(|i| i["name"] == "eth0"))
        .expect("eth0")
        .clone();
    assert_eq!(
        eth0["mac"],
        json!(pod_mac(&pod, "eth0")),
        "the result shows eth0's MAC as it is now"
    );
    assert_ne!(eth0["mac"], orig);
    for r in chain.check(&cid, &netns, "eth0", result) {
        r.expect_ok("CHECK bridge mode");
    }
    // podtap's DEL (the first of the reverse walk) gives eth0 its MAC back.
    chain
        .podtap(
            "1.0.0",
            json!({ "prevResult": result }),
            &Chain::env("DEL", &cid, &netns, "eth0"),
        )
        .expect_ok("DEL podtap");
    assert_eq!(
        json!(pod_mac(&pod, "eth0")),
        orig,
        "DEL gives eth0 its MAC back"
    );
    chain.del(&cid, &netns, "eth0", Some(result));
}

/// The `Deleted` link names `ip monitor link` printed, in order.
fn deleted_links(monitor: &str) -> Vec<String> {
    monitor
        .lines()
        .filter_map(|l| l.strip_prefix("Deleted "))
        .filter_map(|l| l.split(": ").nth(1))
        .map(|name| name.split('@').next().unwrap_or(name).to_string())
        .collect()
}

/// A CNI DEL puts the pod's interface back before it returns, and deletes
/// its TAP only after the chain's next plugin has deleted the pod's veth,
/// so that plugin's own wait in the kernel does not queue behind the TAP's.
/// An ADD right after the chain's DEL (a network reload) finds nothing of
/// the old attachment; with no plugin after podtap, the TAP still goes.
#[test]
fn del_deletes_the_tap_after_the_pods_veth_and_a_reload_finds_nothing() {
    if !ready("del_deletes_the_tap_after_the_pods_veth_and_a_reload_finds_nothing") {
        return;
    }
    let (node, pod) = (Netns::new("cdn"), Netns::new("cdp"));
    let (state, data) = (TempDir::new(), TempDir::new());
    let net = 60 + (std::process::id() % 20);
    let chain = Chain::new(
        BIN,
        conflist("bridge-podtap.conflist", state.path(), data.path(), net),
        Some(&node),
    );
    let (cid, netns) = (container_id(7), pod.path_str());
    let qdiscs = || sh(&format!("tc -n {} qdisc show dev eth0", pod.name));
    let qdiscs_before_podtap = {
        // The bridge plugin alone, as the pod was before podtap's ADD.
        let bridge = &chain.plugins()[0];
        let stdin = chain.plugin_conf(bridge, None).to_string();
        let run = |cmd| chain.exec("bridge", &stdin, &Chain::env(cmd, &cid, &netns, "eth0"));
        run("ADD").expect_ok("ADD bridge");
        let q = qdiscs();
        run("DEL").expect_ok("DEL bridge");
        q
    };
    assert!(taps(&pod).is_empty());

    // The chain's DEL, watched: eth0 goes first, then the TAP.
    let results = chain.add(&cid, &netns, "eth0");
    let mut monitor = Command::new("ip")
        .args(["-n", &pod.name, "monitor", "link"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("ip monitor");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let podtap = chain.plugins().last().cloned().expect("podtap");
    let stdin = chain.plugin_conf(&podtap, Some(&results[1])).to_string();
    chain
        .exec("podtap", &stdin, &Chain::env("DEL", &cid, &netns, "eth0"))
        .expect_ok("DEL podtap");
    assert_eq!(qdiscs(), qdiscs_before_podtap, "eth0 put back at once");
    chain.del(&cid, &netns, "eth0", Some(&results[1]));
    assert!(taps(&pod).is_empty(), "the TAP is gone after the chain");
    let _ = monitor.kill();
    let seen = monitor.wait_with_output().expect("monitor output");
    let deleted = deleted_links(&String::from_utf8_lossy(&seen.stdout));
    assert_eq!(deleted, ["eth0", "tap_eth0"], "the veth first");

    // A reload: DEL and ADD back to back; one TAP, the result as before.
    let results = chain.add(&cid, &netns, "eth0");
    chain.del(&cid, &netns, "eth0", Some(&results[1]));
    let again = chain.add(&cid, &netns, "eth0");
    assert_eq!(taps(&pod), ["tap_eth0"]);
    assert_eq!(
        again[1]["interfaces"].as_array().map(Vec::len),
        results[1]["interfaces"].as_array().map(Vec::len)
    );

    // podtap's DEL with nothing after it: the TAP goes all the same.
    chain
        .exec("podtap", &stdin, &Chain::env("DEL", &cid, &netns, "eth0"))
        .expect_ok("DEL podtap alone");
    assert!(
        taps(&pod).is_empty(),
        "the TAP is gone without a next plugin"
    );
    assert!(has_link(&pod, "eth0"), "eth0 is the bridge plugin's");
    assert!(!checkpoint_path(state.path(), &format!("{cid}-eth0")).exists());
    chain.del(&cid, &netns, "eth0", Some(&again[1]));
}
