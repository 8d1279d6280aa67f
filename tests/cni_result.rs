//! How podtap's CNI result lists the TAP by default: not at all, so
//! that podman, Multus and containerd each read the pod's own interface from
//! it and nothing else (`docs/integration.md`, "How the result lists the TAP").
//! The chain is the repository's conflist, unchanged but for private paths.

use podtap_testkit::{conflist, container_id, taps, Chain, Netns, TempDir, PLUGINS};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

fn ready(test: &str) -> bool {
    podtap_testkit::root_or_skip(test)
        && podtap_testkit::tool_or_skip(test, &format!("{PLUGINS}/bridge"))
}

#[test]
fn default_result_leaves_the_tap_out_and_check_and_del_still_work() {
    let test = "default_result_leaves_the_tap_out_and_check_and_del_still_work";
    if !ready(test) {
        return;
    }
    let node = Netns::new("crn");
    let pod = Netns::new("crp");
    let (state, data) = (TempDir::new(), TempDir::new());
    let net = 60 + (std::process::id() % 40);
    let conf = conflist("bridge-podtap.conflist", state.path(), data.path(), net);
    let chain = Chain::new(BIN, conf, Some(&node));
    let cid = container_id(31);
    let netns = pod.path_str();

    let results = chain.add(&cid, &netns, "eth0");
    let (bridge, result) = (&results[0], &results[1]);
    assert_eq!(
        result["interfaces"], bridge["interfaces"],
        "the default result lists exactly the interfaces of the prevResult"
    );
    assert_eq!(result["ips"], bridge["ips"], "IPs pass through untouched");
    let sandboxed: Vec<&str> = result["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .filter(|i| i["sandbox"] == netns.as_str())
        .filter_map(|i| i["name"].as_str())
        .collect();
    assert_eq!(
        sandboxed,
        ["eth0"],
        "one pod interface for podman and Multus"
    );

    // The TAP is there all the same, and podtap's own record names it.
    let made = taps(&pod);
    assert_eq!(made.len(), 1, "one TAP in the pod netns: {made:?}");
    let listing = podtap_testkit::podtap_state(BIN, state.path(), &["list", "--json"]);
    assert!(
        listing.status.success(),
        "{}",
        podtap_testkit::stderr(&listing)
    );
    assert!(
        podtap_testkit::stdout(&listing).contains(&made[0]),
        "podtap list names the TAP {}: {}",
        made[0],
        podtap_testkit::stdout(&listing)
    );

    // CHECK with the cached result passes for every plugin; DEL takes the TAP.
    for (i, run) in chain.check(&cid, &netns, "eth0", result).iter().enumerate() {
        assert!(
            run.ok(),
            "CHECK of plugin {i} failed: {}",
            podtap_testkit::stdout(&run.out)
        );
    }
    chain.del(&cid, &netns, "eth0", Some(result));
    assert!(taps(&pod).is_empty(), "DEL left a TAP: {:?}", taps(&pod));
}

/// The environment CRI-O's ocicni gives each plugin (`buildCNIRuntimeConf`):
/// the CNI_* variables plus these five `CNI_ARGS` keys.
fn crio_env<'a>(
    cmd: &'a str,
    cid: &'a str,
    netns: &'a str,
    args: &'a str,
) -> Vec<(&'a str, &'a str)> {
    let mut env = Chain::env(cmd, cid, netns, "eth0");
    env.push(("CNI_ARGS", args));
    env
}

/// CRI-O has no package in this machine's archive, so it is driven here the
/// way its ocicni drives a conflist (docs/integration.md, "CRI-O"): `CNI_ARGS` with the pod's namespace, name, infra container id and
/// UID, the pod annotations as the `io.kubernetes.cri.pod-annotations`
/// capability, CHECK with the cached result, GC with the valid attachments (sent
/// to podtap alone at 1.1.0: Debian's bridge plugin stops at 1.0.0).
#[test]
fn crio_shaped_requests_add_check_gc_and_del() {
    let test = "crio_shaped_requests_add_check_gc_and_del";
    if !ready(test) {
        return;
    }
    let node = Netns::new("crn");
    let (pod_a, pod_b) = (Netns::new("cra"), Netns::new("crb"));
    let (state, data) = (TempDir::new(), TempDir::new());
    let net = 100 + (std::process::id() % 40);
    let mut conf = conflist("bridge-podtap.conflist", state.path(), data.path(), net);
    // libcni injects a capability's value only into the plugins that declare it.
    conf["plugins"][1]["runtimeConfig"] = serde_json::json!({
        "io.kubernetes.cri.pod-annotations": { "io.kubernetes.cri-o.ContainerType": "sandbox" }
    });
    let chain = Chain::new(BIN, conf, Some(&node));
    let add = |cid: &str, netns: &str| -> serde_json::Value {
        let args = format!(
            "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=vm-pod;K8S_POD_INFRA_CONTAINER_ID={cid};K8S_POD_UID=6e29ade3-5ec4-436d-a5bd-c53ec3ca816e"
        );
        let mut prev: Option<serde_json::Value> = None;
        for p in chain.plugins() {
            let t = p["type"].as_str().expect("type").to_string();
            let stdin = chain.plugin_conf(&p, prev.as_ref()).to_string();
            let r = chain
                .exec(&t, &stdin, &crio_env("ADD", cid, netns, &args))
                .expect_ok(&format!("ADD {t}"));
            prev = Some(r);
        }
        prev.expect("a result")
    };
    let (a, b) = (container_id(41), container_id(42));
    let result_a = add(&a, &pod_a.path_str());
    add(&b, &pod_b.path_str());
    assert_eq!((taps(&pod_a).len(), taps(&pod_b).len()), (1, 1));
    for run in chain.check(&a, &pod_a.path_str(), "eth0", &result_a) {
        assert!(run.ok(), "CHECK: {}", podtap_testkit::stdout(&run.out));
    }
    // ocicni's GC: every attachment of this network but A's is stale.
    let valid = serde_json::json!({
        "cni.dev/valid-attachments": [{ "containerID": a, "ifname": "eth0" }]
    });
    chain
        .podtap("1.1.0", valid, &[("CNI_COMMAND", "GC")])
        .expect_ok("GC");
    assert_eq!(taps(&pod_a).len(), 1, "GC kept the valid attachment's TAP");
    assert!(taps(&pod_b).is_empty(), "GC removed the stale TAP");
    chain.del(&a, &pod_a.path_str(), "eth0", Some(&result_a));
    assert!(taps(&pod_a).is_empty(), "DEL took the TAP");
}
