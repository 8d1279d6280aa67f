//! Root integration tests for `podtap detach` (and rollback) against real kernel objects:
//! renamed, deleted and recreated objects, gone and reused netns, repeated detaches.

use std::fs::File;

use podtap_testkit::wiring::{ingress_qdiscs, link, links_part, pod};
use podtap_testkit::{
    attach, check, detach, iface, json_ok, podtap_state, settle_taps, sh, snapshot, stderr, taps,
    wait_for, StateDir,
};
use serde_json::Value;

use podtap_testkit::{exit_code as code, net_tools_or_skip as ready};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

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

    let c = check(BIN, &state, &id);
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

/// The checkpoint (version 2) leaves out the routes, neighbours and rules; a
/// repeated attach and `render --id` read them again. A version-1 checkpoint
/// (the whole description, as podtap wrote it before) is still checked,
/// rendered, attached again and torn down: a node upgrade with pods running.
#[test]
fn a_checkpoint_without_tables_and_a_version_1_one_both_serve_and_tear_down() {
    if !ready("a_checkpoint_without_tables_and_a_version_1_one_both_serve_and_tear_down") {
        return;
    }
    let pod = pod();
    for i in 0..50 {
        pod.pod.ip(&format!("route add blackhole 198.19.{i}.0/24"));
    }
    let state = StateDir::new();
    let id = podtap_testkit::unique("v1");
    let before = snapshot(&pod.pod);
    let first = attach(BIN, &state.0, &pod, &id, &[]);
    let desc = json_ok(&first);
    assert!(desc["routes"].as_array().unwrap().len() > 50);
    let file = state.0.join(format!("{id}.json"));
    let cp: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(cp["version"], 3);
    assert_eq!(cp["description"]["routes"], serde_json::json!([]));
    assert!(cp["tables_digest"].is_u64(), "{cp}");
    assert_eq!(cp["description"]["interfaces"], desc["interfaces"]);

    let printed = std::env::temp_dir().join(format!("{id}.desc.json"));
    std::fs::write(&printed, &first.stdout).unwrap();
    let render = |args: &[&str]| stdout_ok(podtap_state(BIN, &state.0, args));
    let from_file = render(&[
        "render",
        "cloud-init",
        "--description",
        printed.to_str().unwrap(),
    ]);
    for version in [2, 1] {
        if version == 1 {
            let mut old = cp.clone();
            old["version"] = 1.into();
            old["description"] = desc.clone();
            old.as_object_mut().unwrap().remove("tables_digest");
            std::fs::write(&file, old.to_string()).unwrap();
        }
        let again = attach(BIN, &state.0, &pod, &id, &[]);
        assert_eq!(
            again.stdout, first.stdout,
            "version {version}: the same bytes"
        );
        assert_eq!(render(&["render", "cloud-init", "--id", &id]), from_file);
        let c = check(BIN, &state, &id);
        assert_eq!(code(&c), 0, "version {version}: check: {}", stderr(&c));
    }
    let d = detach(BIN, &state, &id);
    assert_eq!(code(&d), 0, "detach: {}", stderr(&d));
    settle_taps(&pod.pod);
    assert_eq!(
        snapshot(&pod.pod),
        before,
        "detach restores the prior state"
    );
    assert!(!file.exists(), "checkpoint removed");
    let _ = std::fs::remove_file(&printed);
}

/// A repeated attach prints the same bytes while the pod's tables have not
/// changed: a learned gateway neighbour's state (recorded in the checkpoint)
/// changing is no change, and bridge mode's flush of the pod interface's
/// learned neighbours is in the first description already.
#[test]
fn a_repeated_attach_prints_the_same_bytes_with_a_learned_neighbour() {
    if !ready("a_repeated_attach_prints_the_same_bytes_with_a_learned_neighbour") {
        return;
    }
    for mode in ["tc", "bridge"] {
        let pod = pod();
        let gw = format!("198.18.{}.1", pod.net);
        pod.pod.exec(&format!("ping -c1 -W1 {gw}"));
        let mac = link(&pod.peer, "veth0")["address"]
            .as_str()
            .unwrap()
            .to_string();
        let state = StateDir::new();
        let id = podtap_testkit::unique("again");
        let first = attach(BIN, &state.0, &pod, &id, &["--mode", mode]);
        let desc = json_ok(&first);
        let learned = desc["neighbours"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["ip"] == gw.as_str() && n["gateway"] == true);
        assert_eq!(learned, mode == "tc", "{mode}: {}", desc["neighbours"]);
        let file = state.0.join(format!("{id}.json"));
        let cp: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(
            cp["description"]["neighbours"], desc["neighbours"],
            "{mode}"
        );
        if mode == "tc" {
            // The same entry in another state: the recorded one is printed.
            pod.pod.ip(&format!(
                "neigh replace {gw} dev eth0 lladdr {mac} nud stale"
            ));
        }
        let printed = std::env::temp_dir().join(format!("{id}.desc.json"));
        std::fs::write(&printed, &first.stdout).unwrap();
        for _ in 0..2 {
            let again = attach(BIN, &state.0, &pod, &id, &["--mode", mode]);
            assert_eq!(
                String::from_utf8_lossy(&again.stdout),
                String::from_utf8_lossy(&first.stdout),
                "{mode}: the same bytes"
            );
        }
        let render = |args: &[&str]| stdout_ok(podtap_state(BIN, &state.0, args));
        let from_file = render(&[
            "render",
            "guest-args",
            "--description",
            printed.to_str().unwrap(),
        ]);
        assert_eq!(
            render(&["render", "guest-args", "--id", &id]),
            from_file,
            "{mode}"
        );
        let d = detach(BIN, &state, &id);
        assert_eq!(code(&d), 0, "{mode}: detach: {}", stderr(&d));
        let _ = std::fs::remove_file(&printed);
    }
}

fn stdout_ok(o: std::process::Output) -> String {
    assert!(o.status.success(), "podtap failed: {}", stderr(&o));
    String::from_utf8(o.stdout).unwrap()
}
