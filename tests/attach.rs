//! Root integration tests for `podtap attach/detach/check/list` against real
//! kernel objects in private network namespaces, verified with iproute2/tc.
//!
//! Run: `cargo test --test attach -- --test-threads=2`

use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::Output;

use podtap_testkit::{
    attach, detach, iface, json_ok, podtap_state, settle_taps, sh, sh_ok, snapshot, stderr, stdout,
    taps, wait_for, wait_for_drained_bridges, Netns, Pod, StateDir,
};
use serde_json::Value;

use podtap_testkit::{exit_code as code, net_tools_or_skip as ready};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// A dual-stack pod like `Pod::dual_stack`, but with IPv6 DAD off in the pod
/// netns so link-local addresses are not "tentative" in one snapshot and
/// settled in the next. eth0 gets MTU 1450 so the TAP MTU check means something.
fn pod() -> Pod {
    let pod = Pod::stable_dual_stack();
    pod.pod.ip("link set eth0 mtu 1450");
    pod
}

/// `pod()` plus a macvlan `net1` (which cannot be bridged).
fn pod_with_macvlan() -> Pod {
    let pod = pod();
    pod.add_macvlan("net1", pod.net);
    pod
}

fn check(state: &StateDir, id: &str) -> Output {
    podtap_state(BIN, &state.0, &["check", "--id", id])
}

/// `ip -d -j link show dev <name>` in `ns`.
fn link(ns: &Netns, name: &str) -> Value {
    ns.ip_json(&format!("-d link show dev {name}"))[0].clone()
}

/// `tc qdisc show dev <dev> ingress` kinds (ingress / clsact), via `tc -j`.
fn ingress_qdiscs(ns: &Netns, dev: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(&sh(&format!(
        "tc -n {} -j qdisc show dev {dev} ingress",
        ns.name
    )))
    .unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|q| q["kind"].as_str().unwrap().to_string())
        .collect()
}

fn filters(ns: &Netns, dev: &str) -> String {
    sh(&format!("tc -n {} filter show dev {dev} ingress", ns.name))
}

/// The link/qdisc/filter part of a snapshot (addresses and routes start at `1: lo:`).
fn links_part(snap: &str) -> &str {
    &snap[..snap.find("\n1: lo:").expect("snapshot has an addr section")]
}

/// Verify the TAP of pod interface `pod_if` as attach described it, independently.
fn verify_tap(pod: &Pod, desc: &Value, pod_if: &str) -> String {
    let i = iface(desc, pod_if);
    let tap = &i["tap"];
    let name = tap["name"].as_str().unwrap();
    assert!(name.len() <= 15, "TAP name {name} fits IFNAMSIZ");
    let l = link(&pod.pod, name);
    let pod_link = link(&pod.pod, pod_if);
    assert_eq!(
        l["ifindex"], tap["ifindex"],
        "ifindex in JSON is the kernel's"
    );
    assert_eq!(l["linkinfo"]["info_kind"], "tun");
    let data = &l["linkinfo"]["info_data"];
    assert_eq!(data["type"], "tap");
    assert_eq!(data["vnet_hdr"], true);
    assert_eq!(data["persist"], true);
    assert_eq!(data["multi_queue"], false);
    assert_eq!(l["mtu"], pod_link["mtu"], "TAP MTU = pod MTU");
    assert!(
        l["flags"].as_array().unwrap().iter().any(|f| f == "UP"),
        "TAP is up: {l}"
    );
    assert_eq!(tap["queues"], 1);
    assert_eq!(tap["vnet_hdr"], true);
    assert_eq!(tap["multi_queue"], false);
    name.to_string()
}

/// tc: ingress qdiscs on both sides, u32 mirred redirects both ways.
fn verify_tc(pod: &Pod, pod_if: &str, tap: &str) {
    for dev in [pod_if, tap] {
        let kinds = ingress_qdiscs(&pod.pod, dev);
        assert!(
            kinds.iter().any(|k| k == "ingress" || k == "clsact"),
            "{dev} has an ingress hook: {kinds:?}"
        );
    }
    let f = filters(&pod.pod, pod_if);
    assert!(
        f.contains("u32") && f.contains(&format!("Egress Redirect to device {tap})")),
        "{pod_if} -> {tap}:\n{f}"
    );
    let f = filters(&pod.pod, tap);
    assert!(
        f.contains("u32") && f.contains(&format!("Egress Redirect to device {pod_if})")),
        "{tap} -> {pod_if}:\n{f}"
    );
}

fn verify_timings(desc: &Value, id: &str) {
    let a = &desc["attachment"];
    assert_eq!(a["id"], id);
    let t = &a["timings_us"];
    for k in ["scan", "tap", "wiring", "checkpoint", "total"] {
        assert!(t[k].is_u64(), "timings_us.{k} present: {t}");
    }
    assert!(t["total"].as_u64().unwrap() >= t["scan"].as_u64().unwrap());
}

#[test]
fn tc_attach_wires_both_ways_and_detach_restores() {
    if !ready("tc_attach_wires_both_ways_and_detach_restores") {
        return;
    }
    let pod = pod_with_macvlan();
    let state = StateDir::new();
    let id = podtap_testkit::unique("tc");
    let before = snapshot(&pod.pod);

    let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &[]));
    verify_timings(&desc, &id);
    assert_eq!(desc["attachment"]["mode"], "tc");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| {
            std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
        };
        assert_eq!(mode(&state.0), 0o700, "state dir is 0700");
        assert_eq!(
            mode(&state.0.join(format!("{id}.json"))),
            0o600,
            "checkpoint is 0600"
        );
    }
    for pod_if in ["eth0", "net1"] {
        let tap = verify_tap(&pod, &desc, pod_if);
        assert_eq!(iface(&desc, pod_if)["wiring"], "tc");
        verify_tc(&pod, pod_if, &tap);
        // Guest MAC is the pod interface's MAC, which tc mode leaves alone.
        assert_eq!(
            iface(&desc, pod_if)["guest_mac"],
            link(&pod.pod, pod_if)["address"]
        );
    }
    let mut found = taps(&pod.pod);
    found.sort();
    let mut described: Vec<String> = ["eth0", "net1"]
        .iter()
        .map(|i| iface(&desc, i)["tap"]["name"].as_str().unwrap().to_string())
        .collect();
    described.sort();
    assert_eq!(found, described, "exactly the described TAPs exist");

    let c = check(&state, &id);
    assert_eq!(code(&c), 0, "check: {}", stderr(&c));
    let l = podtap_state(BIN, &state.0, &["list", "--json"]);
    let rows = json_ok(&l);
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == id.as_str()),
        "list shows {id}: {rows}"
    );

    let d = detach(BIN, &state, &id);
    assert_eq!(code(&d), 0, "detach: {}", stderr(&d));
    assert_eq!(
        snapshot(&pod.pod),
        before,
        "detach restores the exact prior state"
    );
    assert!(
        !state.0.join(format!("{id}.json")).exists(),
        "checkpoint removed"
    );
}

#[test]
fn bridge_attach_swaps_mac_falls_back_for_macvlan_and_detach_restores() {
    if !ready("bridge_attach_swaps_mac_falls_back_for_macvlan_and_detach_restores") {
        return;
    }
    let pod = pod_with_macvlan();
    let state = StateDir::new();
    let id = podtap_testkit::unique("br");
    let before = snapshot(&pod.pod);
    let orig_mac = link(&pod.pod, "eth0")["address"]
        .as_str()
        .unwrap()
        .to_string();

    let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &["--mode", "bridge"]));
    verify_timings(&desc, &id);
    assert_eq!(desc["attachment"]["mode"], "bridge");

    // eth0 (veth): a bridge holding eth0 and its TAP; eth0 carries a generated LAA MAC.
    let eth0 = iface(&desc, "eth0");
    assert_eq!(eth0["wiring"], "bridge");
    let tap = verify_tap(&pod, &desc, "eth0");
    let br = eth0["bridge"]["name"].as_str().unwrap();
    let br_link = link(&pod.pod, br);
    assert_eq!(br_link["linkinfo"]["info_kind"], "bridge");
    assert_eq!(br_link["ifindex"], eth0["bridge"]["ifindex"]);
    let members: Vec<String> = pod
        .pod
        .ip_json(&format!("link show master {br}"))
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["ifname"].as_str().unwrap().to_string())
        .collect();
    assert!(
        members.contains(&"eth0".to_string()) && members.contains(&tap),
        "bridge {br} members: {members:?}"
    );
    let bridged_mac = link(&pod.pod, "eth0")["address"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(eth0["bridge"]["pod_interface_mac"], bridged_mac.as_str());
    assert_ne!(
        bridged_mac, orig_mac,
        "pod interface MAC swapped while bridged"
    );
    let first = u8::from_str_radix(&bridged_mac[..2], 16).unwrap();
    assert_eq!(
        first & 0x03,
        0x02,
        "locally administered unicast: {bridged_mac}"
    );
    assert_eq!(
        eth0["guest_mac"],
        orig_mac.as_str(),
        "guest keeps the pod's own MAC"
    );
    assert!(
        ingress_qdiscs(&pod.pod, "eth0").is_empty(),
        "no tc on a bridged interface"
    );

    // net1 (macvlan): tc fallback, said so.
    let net1 = iface(&desc, "net1");
    assert_eq!(net1["wiring"], "tc");
    assert!(
        net1["wiring_note"]
            .as_str()
            .is_some_and(|n| n.contains("macvlan")),
        "{net1}"
    );
    assert!(net1.get("bridge").is_none_or(Value::is_null));
    let tap1 = verify_tap(&pod, &desc, "net1");
    verify_tc(&pod, "net1", &tap1);

    let c = check(&state, &id);
    assert_eq!(code(&c), 0, "check: {}", stderr(&c));

    let d = detach(BIN, &state, &id);
    assert_eq!(code(&d), 0, "detach: {}", stderr(&d));
    assert_eq!(
        link(&pod.pod, "eth0")["address"],
        orig_mac.as_str(),
        "original MAC back"
    );
    assert_eq!(
        snapshot(&pod.pod),
        before,
        "detach restores the exact prior state"
    );
}

#[test]
fn detach_follows_a_renamed_pod_interface() {
    if !ready("detach_follows_a_renamed_pod_interface") {
        return;
    }
    for mode in ["tc", "bridge"] {
        let pod = pod();
        let state = StateDir::new();
        let id = podtap_testkit::unique("ren");
        let before = snapshot(&pod.pod);
        let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &["--mode", mode]));
        let tap = iface(&desc, "eth0")["tap"]["name"]
            .as_str()
            .unwrap()
            .to_string();

        pod.pod.ip("link set eth0 down");
        pod.pod.ip("link set eth0 name renamed0");
        pod.pod.ip("link set renamed0 up");
        wait_for(|| {
            !link(&pod.pod, "renamed0")["flags"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f == "NO-CARRIER")
        });

        let d = detach(BIN, &state, &id);
        assert_eq!(code(&d), 0, "{mode}: detach: {}", stderr(&d));
        assert!(taps(&pod.pod).is_empty(), "{mode}: TAP {tap} gone");
        let after = snapshot(&pod.pod);
        // Bringing a link down flushes its IPv6 addresses and routes, so compare
        // links, MACs, qdiscs and filters (the part podtap touches).
        let expected = links_part(&before).replace("eth0", "renamed0");
        assert_eq!(
            links_part(&after),
            expected,
            "{mode}: state restored modulo the rename"
        );
    }
}

#[test]
fn detach_follows_a_renamed_tap() {
    if !ready("detach_follows_a_renamed_tap") {
        return;
    }
    for mode in ["tc", "bridge"] {
        let pod = pod();
        let state = StateDir::new();
        let id = podtap_testkit::unique("rent");
        let before = snapshot(&pod.pod);
        let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &["--mode", mode]));
        let tap = iface(&desc, "eth0")["tap"]["name"]
            .as_str()
            .unwrap()
            .to_string();
        pod.pod.ip(&format!("link set {tap} down"));
        pod.pod.ip(&format!("link set {tap} name guestnic0"));
        pod.pod.ip("link set guestnic0 up");

        let d = detach(BIN, &state, &id);
        assert_eq!(code(&d), 0, "{mode}: detach: {}", stderr(&d));
        assert!(taps(&pod.pod).is_empty(), "{mode}: renamed TAP removed");
        assert_eq!(snapshot(&pod.pod), before, "{mode}: restored");
    }
}

#[test]
fn failed_attach_rolls_back_and_names_step_interface_and_errno() {
    if !ready("failed_attach_rolls_back_and_names_step_interface_and_errno") {
        return;
    }
    for mode in ["tc", "bridge"] {
        let pod = pod();
        // A veth takes MTU 65535; a TAP tops out below that, so configuring the TAP fails
        // after it (and, in bridge mode, its bridge) already exists.
        pod.pod.ip("link set eth0 mtu 65535");
        let max_tap_mtu = {
            let probe = podtap_testkit::unique("probe");
            pod.pod.ip(&format!("tuntap add dev {probe} mode tap"));
            let m = link(&pod.pod, &probe)["max_mtu"].as_u64().unwrap();
            pod.pod.ip(&format!("link del {probe}"));
            m
        };
        assert!(
            max_tap_mtu < 65535,
            "this kernel's TAP max MTU {max_tap_mtu} must be below 65535"
        );
        let state = StateDir::new();
        let id = podtap_testkit::unique("fail");
        let before = snapshot(&pod.pod);
        let o = attach(BIN, &state.0, &pod, &id, &["--mode", mode]);
        assert_eq!(code(&o), 10, "{mode}: {}", stderr(&o));
        let msg = stderr(&o);
        assert!(
            msg.contains("configure TAP") && msg.contains("tap_eth0") && msg.contains("EINVAL"),
            "{mode}: names step, interface and errno: {msg}"
        );
        assert_eq!(snapshot(&pod.pod), before, "{mode}: everything rolled back");
        assert!(
            !state.0.join(format!("{id}.json")).exists(),
            "{mode}: no checkpoint left"
        );
    }
}

#[test]
fn tap_deleted_by_someone_else_check_fails_and_detach_warns() {
    if !ready("tap_deleted_by_someone_else_check_fails_and_detach_warns") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let id = podtap_testkit::unique("gone");
    let before = snapshot(&pod.pod);
    let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &[]));
    let tap = iface(&desc, "eth0")["tap"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    pod.pod.ip(&format!("link del {tap}"));

    let c = check(&state, &id);
    assert_eq!(code(&c), 12, "check exit code: {}", stderr(&c));
    assert!(
        stderr(&c).contains(&tap) && stderr(&c).contains("missing"),
        "check names what is missing: {}",
        stderr(&c)
    );

    let d = detach(BIN, &state, &id);
    assert_eq!(code(&d), 0, "detach: {}", stderr(&d));
    assert!(
        stderr(&d).contains("warning") && stderr(&d).contains(&tap),
        "warns about {tap}: {}",
        stderr(&d)
    );
    assert_eq!(snapshot(&pod.pod), before);
}

#[test]
fn detach_after_netns_deleted_succeeds_and_drops_checkpoint() {
    if !ready("detach_after_netns_deleted_succeeds_and_drops_checkpoint") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let id = podtap_testkit::unique("nsdel");
    json_ok(&attach(BIN, &state.0, &pod, &id, &[]));
    let file = state.0.join(format!("{id}.json"));
    assert!(file.exists());
    sh(&format!("ip netns del {}", pod.pod.name));

    let d = detach(BIN, &state, &id);
    assert_eq!(code(&d), 0, "detach: {}", stderr(&d));
    assert!(
        stderr(&d).contains("gone"),
        "says the netns is gone: {}",
        stderr(&d)
    );
    assert!(!file.exists(), "checkpoint removed");
    let l = podtap_state(BIN, &state.0, &["list", "--json"]);
    assert_eq!(json_ok(&l), serde_json::json!([]));
}

#[test]
fn detach_leaves_a_reused_netns_path_untouched() {
    if !ready("detach_leaves_a_reused_netns_path_untouched") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let id = podtap_testkit::unique("reuse");
    let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &[]));
    let tap = iface(&desc, "eth0")["tap"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    // Hold the old netns so its inode number cannot be recycled for the new one.
    let old = File::open(pod.pod.path()).unwrap();
    sh(&format!(
        "ip netns del {0} && ip netns add {0}",
        pod.pod.name
    ));
    // Markers podtap would recognise if it looked: a TAP with the planned name, a bridge.
    pod.pod.ip(&format!("tuntap add dev {tap} mode tap"));
    pod.pod.ip("link add marker0 type bridge");
    settle_taps(&pod.pod);
    let before = snapshot(&pod.pod);

    let d = detach(BIN, &state, &id);
    assert_eq!(code(&d), 0, "detach: {}", stderr(&d));
    assert!(
        stderr(&d).contains("warning") && stderr(&d).contains("different"),
        "warns: {}",
        stderr(&d)
    );
    assert_eq!(
        snapshot(&pod.pod),
        before,
        "nothing touched in the new netns"
    );
    assert!(
        !state.0.join(format!("{id}.json")).exists(),
        "checkpoint removed"
    );
    drop(old);
}

#[test]
fn double_detach_and_unknown_id_exit_zero() {
    if !ready("double_detach_and_unknown_id_exit_zero") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let id = podtap_testkit::unique("dd");
    let before = snapshot(&pod.pod);
    json_ok(&attach(BIN, &state.0, &pod, &id, &[]));
    let d1 = detach(BIN, &state, &id);
    assert_eq!(code(&d1), 0, "{}", stderr(&d1));
    let d2 = detach(BIN, &state, &id);
    assert_eq!(code(&d2), 0, "{}", stderr(&d2));
    assert!(stderr(&d2).contains("nothing to detach"), "{}", stderr(&d2));
    assert_eq!(snapshot(&pod.pod), before);
    let d3 = detach(BIN, &state, &podtap_testkit::unique("never-attached"));
    assert_eq!(code(&d3), 0, "{}", stderr(&d3));
}

#[test]
fn existing_clsact_filter_survives_attach_and_detach() {
    if !ready("existing_clsact_filter_survives_attach_and_detach") {
        return;
    }
    let pod = pod();
    let n = &pod.pod.name;
    sh(&format!("tc -n {n} qdisc add dev eth0 clsact"));
    // A CNI plugin's own filter. (This kernel lacks act_gact, so `classid` stands in for `action pass`.)
    let action = if sh_ok(&format!(
        "tc -n {n} filter add dev eth0 ingress prio 1 u32 match u8 0 0 action pass"
    )) {
        "gact action pass"
    } else {
        sh(&format!(
            "tc -n {n} filter add dev eth0 ingress prio 1 u32 match u8 0 0 classid 1:1"
        ));
        "flowid 1:1"
    };
    let theirs = filters(&pod.pod, "eth0");
    let before = snapshot(&pod.pod);
    let state = StateDir::new();
    let id = podtap_testkit::unique("cls");

    let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &[]));
    let tap = iface(&desc, "eth0")["tap"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    verify_tc(&pod, "eth0", &tap);
    assert_eq!(
        ingress_qdiscs(&pod.pod, "eth0"),
        ["clsact"],
        "podtap used the existing clsact"
    );
    let during = filters(&pod.pod, "eth0");
    assert!(
        during.contains("pref 1 u32") && during.contains(action),
        "their filter kept:\n{during}"
    );
    let c = check(&state, &id);
    assert_eq!(code(&c), 0, "{}", stderr(&c));

    let d = detach(BIN, &state, &id);
    assert_eq!(code(&d), 0, "{}", stderr(&d));
    assert_eq!(
        ingress_qdiscs(&pod.pod, "eth0"),
        ["clsact"],
        "clsact not removed"
    );
    assert_eq!(
        filters(&pod.pod, "eth0"),
        theirs,
        "their filter intact, ours gone"
    );
    assert_eq!(snapshot(&pod.pod), before);
}

#[test]
fn attach_is_idempotent_and_refuses_another_netns() {
    if !ready("attach_is_idempotent_and_refuses_another_netns") {
        return;
    }
    let pod = pod();
    let other = pod_with_macvlan();
    let state = StateDir::new();
    let id = podtap_testkit::unique("idem");
    let first = attach(BIN, &state.0, &pod, &id, &[]);
    json_ok(&first);
    let tap_set = taps(&pod.pod);
    let second = attach(BIN, &state.0, &pod, &id, &[]);
    assert_eq!(code(&second), 0, "{}", stderr(&second));
    assert_eq!(stdout(&second), stdout(&first), "same description");
    assert_eq!(taps(&pod.pod), tap_set, "no new objects");

    let before_other = snapshot(&other.pod);
    let conflict = attach(BIN, &state.0, &other, &id, &[]);
    assert_eq!(code(&conflict), 11, "{}", stderr(&conflict));
    let msg = stderr(&conflict);
    assert!(
        msg.contains(&id)
            && msg.contains(&pod.pod.path_str())
            && msg.contains(&other.pod.path_str()),
        "{msg}"
    );
    assert_eq!(snapshot(&other.pod), before_other, "other netns untouched");
    let c = check(&state, &id);
    assert_eq!(code(&c), 0, "first attachment intact: {}", stderr(&c));
    assert_eq!(code(&detach(BIN, &state, &id)), 0);
}

#[test]
fn a_second_id_cannot_wire_an_already_wired_pod_interface() {
    if !ready("a_second_id_cannot_wire_an_already_wired_pod_interface") {
        return;
    }
    let pod = pod_with_macvlan();
    let state = StateDir::new();
    let before = snapshot(&pod.pod);
    let (a, b) = (
        podtap_testkit::unique("first"),
        podtap_testkit::unique("second"),
    );
    json_ok(&attach(BIN, &state.0, &pod, &a, &["--interfaces", "eth0"]));
    settle_taps(&pod.pod);
    let wired = snapshot(&pod.pod);

    let o = attach(BIN, &state.0, &pod, &b, &["--interfaces", "eth0"]);
    assert_eq!(code(&o), 13, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("eth0") && stderr(&o).contains("already wired"),
        "{}",
        stderr(&o)
    );
    assert_eq!(snapshot(&pod.pod), wired, "refused attach changed nothing");
    // Another interface of the same netns is fine for another id.
    let desc = json_ok(&attach(BIN, &state.0, &pod, &b, &["--interfaces", "net1"]));
    assert_eq!(iface(&desc, "net1")["wiring"], "tc");

    for id in [&a, &b] {
        let d = detach(BIN, &state, id);
        assert_eq!(code(&d), 0, "{}", stderr(&d));
    }
    assert_eq!(snapshot(&pod.pod), before);
}

#[test]
fn bad_inputs_have_their_exit_codes_and_messages() {
    if !ready("bad_inputs_have_their_exit_codes_and_messages") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let before = snapshot(&pod.pod);
    let long = "a".repeat(200);
    for bad in ["a/b", "..", long.as_str()] {
        let o = attach(BIN, &state.0, &pod, bad, &[]);
        assert_eq!(code(&o), 7, "attach --id {bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("invalid sandbox id"), "{}", stderr(&o));
        let o = detach(BIN, &state, bad);
        assert_eq!(code(&o), 7, "detach --id {bad}: {}", stderr(&o));
    }
    let missing = format!("/run/netns/{}", podtap_testkit::unique("nonexistent"));
    let o = podtap_state(
        BIN,
        &state.0,
        &["attach", "--netns", &missing, "--id", "x1"],
    );
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&missing) && stderr(&o).contains("does not exist"),
        "{}",
        stderr(&o)
    );

    let o = podtap_state(
        BIN,
        &state.0,
        &["attach", "--netns", "/proc/self/ns/net", "--id", "x2"],
    );
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    assert!(stderr(&o).contains("host"), "{}", stderr(&o));

    let o = attach(BIN, &state.0, &pod, "x3", &["--mode", "foo"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("foo"), "{}", stderr(&o));

    let o = attach(BIN, &state.0, &pod, "x4", &["--interfaces", "nope"]);
    assert_eq!(code(&o), 13, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("nope") && stderr(&o).contains("not found"),
        "{}",
        stderr(&o)
    );

    for (extra, what) in [
        (&["--queues", "0"][..], "--queues"),
        (&["--queues", "300"][..], "--queues"),
        (&["--tap-owner", "bob"][..], "--tap-owner"),
        (&["--interfaces", "lo"][..], "not eligible"),
    ] {
        let o = attach(BIN, &state.0, &pod, "x5", extra);
        assert_eq!(code(&o), 13, "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(what), "{extra:?}: {}", stderr(&o));
    }

    // Not a netns: a regular file.
    let plain = state.0.with_extension("plain");
    std::fs::write(&plain, b"").unwrap();
    let o = podtap_state(
        BIN,
        &state.0,
        &["attach", "--netns", plain.to_str().unwrap(), "--id", "x6"],
    );
    std::fs::remove_file(&plain).unwrap();
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not a network namespace"),
        "{}",
        stderr(&o)
    );

    // A state dir that is a symlink is refused.
    let real = StateDir::new();
    std::fs::create_dir_all(&real.0).unwrap();
    let link_dir = real.0.with_extension("link");
    std::os::unix::fs::symlink(&real.0, &link_dir).unwrap();
    let o = podtap_state(
        BIN,
        &link_dir,
        &["attach", "--netns", &pod.pod.path_str(), "--id", "x7"],
    );
    std::fs::remove_file(&link_dir).unwrap();
    assert_ne!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains("symlink"), "{}", stderr(&o));

    assert_eq!(
        snapshot(&pod.pod),
        before,
        "failed attaches changed nothing"
    );
    let l = podtap_state(BIN, &state.0, &["list", "--json"]);
    assert_eq!(json_ok(&l), serde_json::json!([]), "and left no checkpoint");
}

#[test]
fn corrupt_checkpoint_is_kept_and_force_cleans_up() {
    if !ready("corrupt_checkpoint_is_kept_and_force_cleans_up") {
        return;
    }
    for mode in ["tc", "bridge"] {
        let pod = pod();
        let state = StateDir::new();
        let id = podtap_testkit::unique("corrupt");
        let orig_mac = link(&pod.pod, "eth0")["address"].clone();
        let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &["--mode", mode]));
        let tap = iface(&desc, "eth0")["tap"]["name"]
            .as_str()
            .unwrap()
            .to_string();
        let file = state.0.join(format!("{id}.json"));
        std::fs::write(&file, b"{\"version\": 1, \"id\": \x00garbage").unwrap();

        let d = detach(BIN, &state, &id);
        assert_eq!(code(&d), 8, "{mode}: {}", stderr(&d));
        assert!(
            stderr(&d).contains(&file.display().to_string()),
            "{mode}: names the file: {}",
            stderr(&d)
        );
        assert!(file.exists(), "{mode}: corrupt checkpoint kept");
        for cmd in ["attach", "check"] {
            let o = if cmd == "attach" {
                attach(BIN, &state.0, &pod, &id, &[])
            } else {
                check(&state, &id)
            };
            assert_eq!(
                code(&o),
                8,
                "{mode}: {cmd} on a corrupt checkpoint: {}",
                stderr(&o)
            );
            assert!(
                stderr(&o).contains(&file.display().to_string()),
                "{}",
                stderr(&o)
            );
        }
        let l = podtap_state(BIN, &state.0, &["list"]);
        assert!(
            stdout(&l).contains("corrupt"),
            "{mode}: list shows it: {}",
            stdout(&l)
        );
        assert!(file.exists(), "{mode}: still kept");
        assert_eq!(
            taps(&pod.pod),
            vec![tap.clone()],
            "{mode}: nothing torn down"
        );

        let ns = pod.pod.path_str();
        let f = podtap_state(
            BIN,
            &state.0,
            &["detach", "--force", "--id", &id, "--netns", &ns],
        );
        assert_eq!(code(&f), 0, "{mode}: --force: {}", stderr(&f));
        assert!(
            taps(&pod.pod).is_empty(),
            "{mode}: --force removed the TAPs"
        );
        assert!(
            !filters(&pod.pod, "eth0").contains("mirred"),
            "{mode}: and podtap's filters"
        );
        wait_for_drained_bridges(&pod.pod);
        assert!(
            pod.pod
                .ip_json("link show type bridge")
                .as_array()
                .unwrap()
                .is_empty(),
            "{mode}: and podtap's bridges (deleted right after --force returns)"
        );
        assert_eq!(
            link(&pod.pod, "eth0")["address"],
            orig_mac,
            "{mode}: pod MAC restored"
        );
        assert!(
            link(&pod.pod, "eth0").get("master").is_none(),
            "{mode}: pod interface released"
        );
        assert!(
            !file.exists(),
            "{mode}: --force removed the corrupt checkpoint"
        );
    }
}

#[test]
fn queues_4_gives_a_multi_queue_tap_that_4_opens_attach_to() {
    if !ready("queues_4_gives_a_multi_queue_tap_that_4_opens_attach_to") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let id = podtap_testkit::unique("mq");
    let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &["--queues", "4"]));
    let tap = &iface(&desc, "eth0")["tap"];
    assert_eq!(tap["queues"], 4);
    assert_eq!(tap["multi_queue"], true);
    let name = tap["name"].as_str().unwrap().to_string();
    let data = link(&pod.pod, &name)["linkinfo"]["info_data"].clone();
    assert_eq!(data["multi_queue"], true, "{data}");
    assert_eq!(data["persist"], true);

    let mq = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_MULTI_QUEUE;
    let fds = in_netns(&pod.pod.path_str(), move || {
        (0..4).map(|_| open_tap(&name, mq)).collect::<Vec<_>>()
    });
    assert_eq!(fds.len(), 4);
    for (n, r) in fds.iter().enumerate() {
        assert!(r.is_ok(), "queue {n}: {:?}", r.as_ref().err());
    }
    // A single-queue open of the same TAP is refused: the kernel holds it as multi-queue.
    let name = tap["name"].as_str().unwrap().to_string();
    let single = in_netns(&pod.pod.path_str(), move || {
        open_tap(&name, IFF_TAP | IFF_NO_PI | IFF_VNET_HDR)
    });
    assert!(single.is_err(), "a non-multi-queue open must fail");
    drop(fds);
    let c = check(&state, &id);
    assert_eq!(code(&c), 0, "{}", stderr(&c));
    assert_eq!(code(&detach(BIN, &state, &id)), 0);
    assert!(taps(&pod.pod).is_empty());
}

#[test]
fn tap_owner_and_no_vnet_hdr_show_in_ip_link() {
    if !ready("tap_owner_and_no_vnet_hdr_show_in_ip_link") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let id = podtap_testkit::unique("own");
    let desc = json_ok(&attach(
        BIN,
        &state.0,
        &pod,
        &id,
        &[
            "--tap-owner",
            "1000:1000",
            "--no-vnet-hdr",
            "--interfaces",
            "eth0",
        ],
    ));
    let tap = &iface(&desc, "eth0")["tap"];
    assert_eq!(tap["vnet_hdr"], false);
    let name = tap["name"].as_str().unwrap();
    // iproute2 prints names when the ids resolve; compare with what they resolve to here.
    let user = sh("getent passwd 1000 | cut -d: -f1 || true")
        .trim()
        .to_string();
    let group = sh("getent group 1000 | cut -d: -f1 || true")
        .trim()
        .to_string();
    let user = if user.is_empty() {
        "1000".to_string()
    } else {
        user
    };
    let group = if group.is_empty() {
        "1000".to_string()
    } else {
        group
    };
    let text = pod.pod.ip(&format!("-d link show dev {name}"));
    assert!(
        text.contains(&format!(
            "tun type tap pi off vnet_hdr off persist on user {user} group {group}"
        )),
        "{text}"
    );
    // And numerically, from the pod netns's sysfs.
    let owner = pod.pod.exec(&format!(
        "cat /sys/class/net/{name}/owner /sys/class/net/{name}/group"
    ));
    assert_eq!(
        owner.split_whitespace().collect::<Vec<_>>(),
        ["1000", "1000"]
    );
    assert_eq!(code(&detach(BIN, &state, &id)), 0);
}

#[test]
fn dns_from_a_resolv_conf_is_recorded_and_rendered() {
    if !ready("dns_from_a_resolv_conf_is_recorded_and_rendered") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let dir = podtap_testkit::TempDir::new();
    let conf = dir.path().join("resolv.conf");
    std::fs::write(
        &conf,
        "# test\nnameserver 198.18.0.53\nsearch pod.example svc.example\noptions ndots:5\n",
    )
    .unwrap();
    let id = podtap_testkit::unique("dns");
    let desc = json_ok(&attach(
        BIN,
        &state.0,
        &pod,
        &id,
        &["--dns-from", conf.to_str().unwrap()],
    ));
    assert_eq!(
        desc["dns"],
        serde_json::json!({
            "nameservers": ["198.18.0.53"],
            "search": ["pod.example", "svc.example"],
            "options": ["ndots:5"]
        })
    );
    // A repeated attach returns the recorded description, dns included.
    assert_eq!(json_ok(&attach(BIN, &state.0, &pod, &id, &[])), desc);
    let args = podtap_state(BIN, &state.0, &["render", "guest-args", "--id", &id]);
    assert!(
        stdout(&args).contains(" podtap.dns=198.18.0.53 podtap.search=pod.example,svc.example\n"),
        "{}",
        stdout(&args)
    );
    assert_eq!(code(&detach(BIN, &state, &id)), 0);

    // A bad file is exit 13, one line naming it, before anything is built.
    let before = snapshot(&pod.pod);
    let bad = dir.path().join("bad.conf");
    std::fs::write(&bad, "nameserver dns.example\n").unwrap();
    let missing = dir.path().join("missing.conf");
    for (path, what) in [
        (
            bad.as_path(),
            "line 1: nameserver \"dns.example\" is not an IP address",
        ),
        (missing.as_path(), "No such file"),
        (dir.path(), "not a regular file"),
    ] {
        let o = attach(
            BIN,
            &state.0,
            &pod,
            &id,
            &["--dns-from", path.to_str().unwrap()],
        );
        assert_eq!(code(&o), 13, "{path:?}: {}", stderr(&o));
        let msg = stderr(&o);
        assert!(
            msg.lines().count() == 1
                && msg.contains(&format!("--dns-from {}: ", path.display()))
                && msg.contains(what),
            "{msg}"
        );
    }
    assert_eq!(
        snapshot(&pod.pod),
        before,
        "refused attaches changed nothing"
    );
}

#[test]
fn check_of_unknown_id_and_list_of_empty_dir() {
    if !ready("check_of_unknown_id_and_list_of_empty_dir") {
        return;
    }
    let state = StateDir::new();
    let o = check(&state, "nobody");
    assert_eq!(code(&o), 14, "{}", stderr(&o));
    let l = podtap_state(BIN, &state.0, &["list"]);
    assert_eq!(code(&l), 0, "{}", stderr(&l));
}

// --- TUNSETIFF from the test, independent of podtap's own code -------------

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TAP: i16 = 0x0002;
const IFF_NO_PI: i16 = 0x1000;
const IFF_VNET_HDR: i16 = 0x4000;
const IFF_MULTI_QUEUE: i16 = 0x0100;

/// Open `/dev/net/tun` and attach to TAP `name` with `flags` in this thread's netns.
fn open_tap(name: &str, flags: i16) -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open("/dev/net/tun")?;
    // struct ifreq: 16 bytes of name, then the flags, padded to 40 bytes.
    let mut req = [0u8; 40];
    req[..name.len()].copy_from_slice(name.as_bytes());
    req[16..18].copy_from_slice(&flags.to_ne_bytes());
    // SAFETY: TUNSETIFF reads and writes a 40-byte struct ifreq we own.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), TUNSETIFF as _, req.as_mut_ptr()) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(f.into())
}

/// Run `f` on a fresh thread that has entered the netns at `path`.
fn in_netns<R: Send + 'static>(path: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let path = path.to_string();
    std::thread::spawn(move || {
        let ns = File::open(&path).expect("open netns");
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .expect("netns thread")
}

#[test]
fn a_tap_the_user_recreates_under_the_planned_name_survives_detach() {
    if !ready("a_tap_the_user_recreates_under_the_planned_name_survives_detach") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let id = podtap_testkit::unique("usr");
    let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &[]));
    let tap = iface(&desc, "eth0")["tap"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    pod.pod.ip(&format!("link del {tap}"));
    pod.pod.ip(&format!("tuntap add dev {tap} mode tap"));

    let d = detach(BIN, &state, &id);
    assert_eq!(code(&d), 0, "detach: {}", stderr(&d));
    assert_eq!(
        taps(&pod.pod),
        vec![tap.clone()],
        "the user's {tap} is not podtap's to delete"
    );
    assert!(
        ingress_qdiscs(&pod.pod, "eth0").is_empty(),
        "podtap's own qdisc is gone"
    );
}

/// detach returns once the kernel has unlisted podtap's TAPs, and leaves the
/// kernel's own cleanup (an RCU barrier, the last references) and, in bridge
/// mode, the deletion of the emptied bridges to a child. When it returns: no
/// TAP is listed, every pod interface is out of any bridge with its own MAC,
/// and the same id and interfaces can be attached again at once (in bridge
/// mode while the previous bridges may still be being deleted).
#[test]
fn detach_returns_with_everything_unlisted_and_an_immediate_reattach_works() {
    if !ready("detach_returns_with_everything_unlisted_and_an_immediate_reattach_works") {
        return;
    }
    for mode in ["tc", "bridge"] {
        let pod = pod();
        pod.add_veth("eth1", "veth1", pod.net + 1, false);
        let state = StateDir::new();
        let id = podtap_testkit::unique("early");
        let before = snapshot(&pod.pod);
        let macs: Vec<Value> = ["eth0", "eth1"]
            .iter()
            .map(|n| link(&pod.pod, n)["address"].clone())
            .collect();
        for round in 0..10 {
            json_ok(&attach(BIN, &state.0, &pod, &id, &["--mode", mode]));
            // Output() reads stdout and stderr to EOF: the child holds neither.
            let d = detach(BIN, &state, &id);
            assert_eq!(code(&d), 0, "{mode} round {round}: {}", stderr(&d));
            let links = pod.pod.ip("-o link show");
            assert!(taps(&pod.pod).is_empty(), "{mode} round {round}: {links}");
            for (name, mac) in ["eth0", "eth1"].iter().zip(&macs) {
                let l = link(&pod.pod, name);
                assert!(l.get("master").is_none(), "{mode} round {round}: {links}");
                assert_eq!(&l["address"], mac, "{mode} round {round}: {name}'s MAC");
            }
        }
        assert_eq!(snapshot(&pod.pod), before, "{mode}: after ten rounds");
    }
}

#[test]
fn macvtap_attach_makes_an_owned_node_falls_back_for_macvlan_and_detach_restores() {
    let test = "macvtap_attach_makes_an_owned_node_falls_back_for_macvlan_and_detach_restores";
    if !ready(test) {
        return;
    }
    let pod = pod_with_macvlan();
    let state = StateDir::new();
    let id = podtap_testkit::unique("mvt");
    let before = snapshot(&pod.pod);
    let orig = link(&pod.pod, "eth0");

    let desc = json_ok(&attach(
        BIN,
        &state.0,
        &pod,
        &id,
        &["--mode", "macvtap", "--tap-owner", "4242:4343"],
    ));
    assert_eq!(desc["attachment"]["mode"], "macvtap");
    let eth0 = iface(&desc, "eth0");
    assert_eq!(eth0["wiring"], "macvtap");
    let name = eth0["tap"]["name"].as_str().unwrap();
    let mv = link(&pod.pod, name);
    assert_eq!(mv["linkinfo"]["info_kind"], "macvtap");
    assert_eq!(mv["linkinfo"]["info_data"]["mode"], "passthru");
    assert_eq!(mv["link"], "eth0", "the macvtap sits on eth0");
    assert_eq!(mv["ifindex"], eth0["tap"]["ifindex"]);
    // Passthru: the guest keeps the pod's MAC, and the MTU is carried.
    assert_eq!(mv["address"], orig["address"]);
    assert_eq!(eth0["guest_mac"], orig["address"]);
    assert_eq!(mv["mtu"], 1450);
    assert!(mv["flags"].to_string().contains("UP"), "{mv}");
    assert_eq!(link(&pod.pod, "eth0")["promiscuity"], 1);
    // podtap's own node, owned as asked, with the device number of this macvtap.
    let node = eth0["tap"]["device"].as_str().unwrap();
    assert_eq!(node, format!("/dev/podtap/{id}/{name}"));
    let stat = sh(&format!("stat -c '%F %u %g %a %t:%T' {node}"));
    let ifindex = mv["ifindex"].as_u64().unwrap();
    let sysfs = pod.pod.exec(&format!(
        "cat /sys/class/net/{name}/macvtap/tap{ifindex}/dev"
    ));
    let (major, minor) = sysfs.trim().split_once(':').unwrap();
    let hex = |n: &str| format!("{:x}", n.parse::<u64>().unwrap());
    assert_eq!(
        stat.trim(),
        format!(
            "character special file 4242 4343 660 {}:{}",
            hex(major),
            hex(minor)
        )
    );
    // A macvlan cannot carry a passthru macvtap: tc, with a note.
    let net1 = iface(&desc, "net1");
    assert_eq!(net1["wiring"], "tc");
    assert!(net1["wiring_note"]
        .as_str()
        .unwrap()
        .contains("tc redirect instead"));
    assert!(check(&state, &id).status.success());
    // Formats that open TAPs by name refuse it, naming what works.
    let r = podtap_state(BIN, &state.0, &["render", "qemu", "--id", &id]);
    assert_eq!(code(&r), 15, "{}", stderr(&r));
    assert!(
        stderr(&r).contains("podtap exec --vmm qemu"),
        "{}",
        stderr(&r)
    );
    // A scan now shows the macvtap as podtap's, not as a pod interface.
    let scan = json_ok(&podtap_state(
        BIN,
        &state.0,
        &["scan", "--netns", &pod.pod.path_str()],
    ));
    assert_eq!(iface(&scan, name)["eligible"], false);

    // check notices a missing node.
    std::fs::remove_file(node).unwrap();
    let c = check(&state, &id);
    assert!(!c.status.success());
    assert!(stderr(&c).contains("device node"), "{}", stderr(&c));

    assert!(detach(BIN, &state, &id).status.success());
    assert_eq!(before, snapshot(&pod.pod), "detach must restore the netns");
    assert_eq!(link(&pod.pod, "eth0")["promiscuity"], 0);
    assert!(!std::path::Path::new(&format!("/dev/podtap/{id}")).exists());
}
