//! Fidelity without a guest, against real kernel objects: in bridge mode the
//! pod netns answers neither ARP nor ND for the pod's (the guest's) addresses
//! and takes no part in IPv6 on podtap's objects; permanent neighbours survive
//! the MAC changes; `check` sees MTU, link state and neighbours; a down
//! interface is not attached.
//!
//! Run: `cargo test --test fidelity -- --test-threads=2`

use podtap_testkit::{
    attach, attach_json, exit_code as code, iface, json_ok, net_tools_or_skip as ready,
    podtap_state, snapshot, stderr, Pod, StateDir,
};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

fn permanent_neighbours(pod: &Pod) -> String {
    pod.pod.ip("neigh show dev eth0 nud permanent")
}

#[test]
fn bridge_mode_never_answers_for_the_guest_nor_speaks_ipv6() {
    let test = "bridge_mode_never_answers_for_the_guest_nor_speaks_ipv6";
    if !ready(test) || !podtap_testkit::tool_or_skip(test, "ping") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let n = pod.net;
    let state = StateDir::new();
    let desc = attach_json(BIN, &state.0, &pod, "b1", "bridge");
    let br = iface(&desc, "eth0")["bridge"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let tap = iface(&desc, "eth0")["tap"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    // No guest is attached to the TAP: whatever answers is the pod netns.
    let (v4, v6) = (format!("198.18.{n}.2"), format!("2001:db8:{n:x}::2"));
    for _ in 0..3 {
        pod.peer.ip(&format!("neigh flush to {v4}"));
        assert!(
            !podtap_testkit::sh_ok(&format!(
                "ip netns exec {} ping -c1 -W1 {v4}",
                pod.peer.name
            )),
            "the pod netns answered for {v4} while bridged"
        );
        assert!(
            !podtap_testkit::sh_ok(&format!(
                "ip netns exec {} ping -6 -c1 -W1 {v6}",
                pod.peer.name
            )),
            "the pod netns answered for {v6} while bridged"
        );
    }
    let peer_neigh = pod.peer.ip(&format!("neigh show {v4}"));
    let br_mac = pod.pod.ip_json(&format!("link show {br}"))[0]["address"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !peer_neigh.contains(&br_mac),
        "the peer learned the bridge's MAC: {peer_neigh}"
    );
    for link in [&br, &tap] {
        assert_eq!(
            pod.pod
                .exec(&format!("cat /proc/sys/net/ipv6/conf/{link}/disable_ipv6"))
                .trim(),
            "1",
            "{link}: IPv6 off"
        );
        assert!(
            pod.pod
                .ip(&format!("-6 addr show dev {link}"))
                .trim()
                .is_empty(),
            "{link} has no IPv6 address"
        );
    }
    assert!(
        pod.pod.ip(&format!("link show {br}")).contains("NOARP"),
        "ARP off on the bridge"
    );
    assert_eq!(
        code(&podtap_state(BIN, &state.0, &["detach", "--id", "b1"])),
        0
    );
}

#[test]
fn permanent_neighbours_survive_every_mac_change_and_check_sees_them() {
    if !ready("permanent_neighbours_survive_every_mac_change_and_check_sees_them") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let n = pod.net;
    pod.pod.ip(&format!(
        "neigh add 198.18.{n}.1 lladdr 02:00:00:00:0a:01 dev eth0 nud permanent"
    ));
    pod.pod.ip(&format!(
        "-6 neigh add 2001:db8:{n:x}::1 lladdr 02:00:00:00:0a:01 dev eth0 nud permanent"
    ));
    let before_neigh = permanent_neighbours(&pod);
    assert_eq!(before_neigh.lines().count(), 2, "{before_neigh}");
    let before = snapshot(&pod.pod);
    for mode in ["bridge", "tc"] {
        let state = StateDir::new();
        attach_json(BIN, &state.0, &pod, "n1", mode);
        assert_eq!(
            permanent_neighbours(&pod),
            before_neigh,
            "{mode}: kept while attached"
        );
        let c = podtap_state(BIN, &state.0, &["check", "--id", "n1"]);
        assert_eq!(code(&c), 0, "{mode}: {}", stderr(&c));
        pod.pod.ip(&format!("neigh del 198.18.{n}.1 dev eth0"));
        let c = podtap_state(BIN, &state.0, &["check", "--id", "n1"]);
        assert_eq!(code(&c), 12, "{mode}: {}", stderr(&c));
        assert!(
            stderr(&c).contains(&format!("198.18.{n}.1")),
            "{}",
            stderr(&c)
        );
        pod.pod.ip(&format!(
            "neigh add 198.18.{n}.1 lladdr 02:00:00:00:0a:01 dev eth0 nud permanent"
        ));
        assert_eq!(
            code(&podtap_state(BIN, &state.0, &["detach", "--id", "n1"])),
            0
        );
        assert_eq!(
            permanent_neighbours(&pod),
            before_neigh,
            "{mode}: back after detach"
        );
        assert_eq!(snapshot(&pod.pod), before, "{mode}: netns as before");
    }
}

#[test]
fn check_sees_mtu_and_link_state_of_the_pod_interface() {
    if !ready("check_sees_mtu_and_link_state_of_the_pod_interface") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let state = StateDir::new();
    attach_json(BIN, &state.0, &pod, "m1", "tc");
    let check = || podtap_state(BIN, &state.0, &["check", "--id", "m1"]);
    assert_eq!(code(&check()), 0);
    pod.pod.ip("link set eth0 mtu 1400");
    let c = check();
    assert_eq!(code(&c), 12, "{}", stderr(&c));
    assert!(stderr(&c).contains("MTU 1400"), "{}", stderr(&c));
    pod.pod.ip("link set eth0 mtu 1500");
    pod.pod.ip("link set eth0 down");
    let c = check();
    assert_eq!(code(&c), 12, "{}", stderr(&c));
    assert!(stderr(&c).contains("eth0 is down"), "{}", stderr(&c));
    pod.pod.ip("link set eth0 up");
    assert_eq!(code(&check()), 0);
    assert_eq!(
        code(&podtap_state(BIN, &state.0, &["detach", "--id", "m1"])),
        0
    );
}

#[test]
fn an_administratively_down_interface_gets_no_nic() {
    if !ready("an_administratively_down_interface_gets_no_nic") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    pod.add_veth("net1", "veth1", pod.net + 1, false);
    pod.pod.ip("link set net1 down");
    let state = StateDir::new();
    let desc = attach_json(BIN, &state.0, &pod, "d1", "tc");
    let net1 = iface(&desc, "net1");
    assert_eq!(net1["eligible"], false);
    assert!(
        net1["ineligible_reason"].as_str().unwrap().contains("down"),
        "{net1}"
    );
    assert!(net1.get("tap").is_none_or(serde_json::Value::is_null));
    assert!(iface(&desc, "eth0")["tap"].is_object());
    let only = attach(BIN, &state.0, &pod, "d2", &["--interfaces", "net1"]);
    assert_eq!(code(&only), 13, "{}", stderr(&only));
    assert!(
        stderr(&only).contains("administratively down"),
        "{}",
        stderr(&only)
    );
    assert_eq!(
        code(&podtap_state(BIN, &state.0, &["detach", "--id", "d1"])),
        0
    );
}

#[test]
fn policy_rules_and_the_tables_they_use_are_scanned() {
    if !ready("policy_rules_and_the_tables_they_use_are_scanned") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let n = pod.net;
    pod.pod.ip(&format!(
        "rule add from 198.18.{n}.0/24 fwmark 7 lookup 100 pref 100"
    ));
    pod.pod.ip(&format!(
        "route add default via 198.18.{n}.1 dev eth0 table 100"
    ));
    // A table no rule points to stays out of the description.
    pod.pod.ip(&format!(
        "route add 198.19.{n}.0/24 via 198.18.{n}.1 dev eth0 table 200"
    ));
    let desc = json_ok(&podtap_state(
        BIN,
        &StateDir::new().0,
        &["scan", "--netns", &pod.pod.path_str()],
    ));
    assert_eq!(desc["schema"], "podtap/v2");
    let rules = desc["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), 1, "only the pod's own rule: {rules:?}");
    assert_eq!(rules[0]["priority"], 100);
    assert_eq!(rules[0]["table"], 100);
    assert_eq!(rules[0]["fwmark"], 7);
    assert_eq!(rules[0]["from"], format!("198.18.{n}.0/24"));
    let routes = desc["routes"].as_array().unwrap();
    assert!(routes
        .iter()
        .any(|r| r["table"] == 100 && r["destination"] == "0.0.0.0/0"));
    assert!(
        !routes.iter().any(|r| r["table"] == 200),
        "table 200 has no rule"
    );
    // The guest formats carry it; a NIC-only format is unaffected.
    let state = StateDir::new();
    json_ok(&podtap_state(
        BIN,
        &state.0,
        &["attach", "--netns", &pod.pod.path_str(), "--id", "r1"],
    ));
    let args = podtap_state(BIN, &state.0, &["render", "guest-args", "--id", "r1"]);
    assert!(
        podtap_testkit::stdout(&args).contains(&format!("podtap.rule=100,198.18.{n}.0/24,-,7,100")),
        "{}",
        podtap_testkit::stdout(&args)
    );
    let kernel = podtap_state(BIN, &state.0, &["render", "kernel-cmdline", "--id", "r1"]);
    assert_eq!(code(&kernel), 15, "{}", stderr(&kernel));
    assert_eq!(
        code(&podtap_state(BIN, &state.0, &["detach", "--id", "r1"])),
        0
    );
}
