//! Which pod links become VM NICs: only kinds that carry a pod's traffic
//! (veth, macvlan, ipvlan, vlan, netkit, physical NICs and VFs) by default.
//! A vxlan or an ifb that a CNI leaves in the pod netns is reported with the
//! reason and attached only when named. This kernel has vxlan and ifb.

use podtap_testkit::{attach, detach, iface, json_ok, settled_snapshot, Pod, StateDir, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_podtap");

fn taps(desc: &serde_json::Value) -> Vec<String> {
    desc["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .filter_map(|i| {
            i["tap"]["name"]
                .as_str()
                .map(|_| i["name"].as_str().unwrap_or("").to_string())
        })
        .collect()
}

#[test]
fn tunnel_and_helper_links_are_attached_only_by_name() {
    if !podtap_testkit::root_or_skip("tunnel_and_helper_links_are_attached_only_by_name") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    pod.pod
        .ip("link add vx0 type vxlan id 42 dstport 4789 local 198.18.250.1 nolearning");
    pod.pod.ip("link add ifb0 type ifb");
    pod.pod.ip("link set vx0 up");
    pod.pod.ip("link set ifb0 up");
    let before = settled_snapshot(&pod.pod);
    let state = TempDir::new();

    let desc = json_ok(&attach(BIN, state.path(), &pod, "kinds-a", &[]));
    assert_eq!(taps(&desc), ["eth0"], "only the veth becomes a NIC");
    for (name, kind) in [("vx0", "vxlan"), ("ifb0", "ifb")] {
        let i = iface(&desc, name);
        assert_eq!(i["eligible"], false, "{i}");
        assert_eq!(i["named_only"], true, "{i}");
        let why = i["ineligible_reason"].as_str().expect("reason");
        assert!(
            why.starts_with(&format!("{kind} links carry no pod traffic")),
            "{why}"
        );
    }
    let sd = StateDir(state.path().to_path_buf());
    assert!(detach(BIN, &sd, "kinds-a").status.success());
    assert_eq!(settled_snapshot(&pod.pod), before);

    // Named, the operator gets one anyway.
    let desc = json_ok(&attach(
        BIN,
        state.path(),
        &pod,
        "kinds-b",
        &["--interfaces", "vx0"],
    ));
    assert_eq!(taps(&desc), ["vx0"]);
    assert!(detach(BIN, &sd, "kinds-b").status.success());
    assert_eq!(settled_snapshot(&pod.pod), before);
}
