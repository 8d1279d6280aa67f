//! Real guests on pods shaped as Calico and Cilium build them, attached
//! through the CNI door with the result each CNI's plugin hands podtap
//! (tests/support/src/shapes.rs). The guest configures itself from
//! `podtap render guest-args` (vmm-examples/qemu-by-name.sh), reaches the
//! node through the pod's gateway, and stays up while the node reaches it:
//! every answer must come from the guest's MAC. On the Cilium pod the
//! default route's MTU, below the link's, must reach the guest and bound
//! what it sends.

use podtap_testkit::shapes::{RoutedPod, Shape, CILIUM_ROUTE_MTU};
use podtap_testkit::vm::{
    assert_line, assert_no_errors, boot_reachable, example, reach_in, vm_prerequisites,
};
use podtap_testkit::{container_id, settle, settled_snapshot, Chain, TempDir};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// ADD through podtap alone with the shape's result, boot, reach both ways,
/// DEL; the guest's console.
fn boot_on(shape: Shape, n: u32, extra_append: &str) -> (RoutedPod, String) {
    let rp = RoutedPod::new(shape, n);
    let before = settled_snapshot(&rp.pod);
    let state = TempDir::new();
    let podtap =
        json!({ "type": "podtap", "stateDir": state.path(), "resultTap": "tc-redirect-tap" });
    let chain = Chain::new(
        BIN,
        json!({ "cniVersion": "0.3.1", "name": "k8s-pod-network", "plugins": [podtap] }),
        Some(&rp.node),
    );
    let (cid, netns) = (container_id(80 + n), rp.pod.path_str());
    let conf = chain.plugin_conf(&chain.plugins()[0], Some(&rp.prev_result()));
    let result = chain
        .exec(
            "podtap",
            &conf.to_string(),
            &Chain::env("ADD", &cid, &netns, "eth0"),
        )
        .expect_ok("ADD");
    settle(&rp.node);
    settle(&rp.pod);
    let guest_mac = rp.mac(&rp.pod, "eth0");
    // Calico's 169.254.1.1 belongs to nobody (the host veth answers ARP for
    // it by proxy), so only the node is pinged through it; Cilium's gateway
    // is the node's own cilium_host address.
    let targets = match shape {
        Shape::Calico => vec![rp.node_address.clone()],
        Shape::Cilium => vec![rp.gateway.clone(), rp.node_address.clone()],
    };
    let append = format!(
        "podtap.ping={} podtap.hold=10 {extra_append}",
        targets.join(",")
    );
    let id = format!("{cid}-eth0");
    let console = boot_reachable(
        BIN,
        &example("qemu-by-name.sh"),
        state.path(),
        &id,
        &append,
        || {
            reach_in(&rp.node, &rp.address, &guest_mac, 3);
        },
    );
    for target in &targets {
        assert_line(&console, &format!("PODTAP-PING OK {target}"));
    }
    assert_no_errors(&console);
    chain.del(&cid, &netns, "eth0", Some(&result));
    assert_eq!(
        settled_snapshot(&rp.pod),
        before,
        "DEL restores the pod netns"
    );
    (rp, console)
}

#[test]
fn a_guest_on_a_calico_shaped_pod_reaches_the_node_and_back() {
    if !vm_prerequisites("a_guest_on_a_calico_shaped_pod_reaches_the_node_and_back") {
        return;
    }
    let (_rp, console) = boot_on(Shape::Calico, 10, "");
    assert!(
        console.contains("default via 169.254.1.1 dev"),
        "the onlink default route in the guest"
    );
}

#[test]
fn a_guest_on_a_cilium_shaped_pod_gets_the_route_mtu() {
    if !vm_prerequisites("a_guest_on_a_cilium_shaped_pod_gets_the_route_mtu") {
        return;
    }
    let n = 11;
    // 28 bytes of IPv4 and ICMP headers: the largest ping the route MTU lets through, and one more.
    let fits = CILIUM_ROUTE_MTU - 28;
    let node = format!("198.19.{}.1", 100 + n);
    let big = format!("podtap.pingbig={fits}:{node},{}:{node}", fits + 8);
    let (rp, console) = boot_on(Shape::Cilium, n, &big);
    let default = format!("default via {} dev", rp.gateway);
    let mtu = format!(" mtu {CILIUM_ROUTE_MTU}");
    assert!(
        console
            .lines()
            .any(|l| l.contains(&default) && l.contains(&mtu)),
        "the default route with its MTU in the guest"
    );
    assert_line(&console, &format!("PODTAP-PINGBIG OK {fits} {node}"));
    assert_line(
        &console,
        &format!("PODTAP-PINGBIG FAIL {} {node}", fits + 8),
    );
}
