//! `podtap cni-install` against the network configurations nodes really
//! have: the conflists of the CNI bridge, ptp and macvlan plugins, a
//! Calico-style and a Flannel-style conflist, and a legacy single-plugin
//! Flannel `.conf`. Install twice (no duplicate), uninstall (byte-identical
//! restore, binary gone), and a CNI ADD through the chain install wrote.
//!
//! Run: `cargo test --test cni_install -- --test-threads=2`

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use podtap_testkit::{container_id, podtap_state, stderr, Chain, Netns, TempDir};
use serde_json::{json, Value};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

fn samples() -> Vec<(&'static str, Value)> {
    vec![
        (
            "10-bridge.conflist",
            json!({"cniVersion": "1.0.0", "name": "cbr0", "plugins": [
                {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
                 "ipam": {"type": "host-local", "ranges": [[{"subnet": "198.18.40.0/24"}]],
                          "routes": [{"dst": "0.0.0.0/0"}]}},
                {"type": "portmap", "capabilities": {"portMappings": true}}]}),
        ),
        (
            "10-ptp.conflist",
            json!({"cniVersion": "1.0.0", "name": "ptp", "plugins": [
                {"type": "ptp", "ipMasq": true,
                 "ipam": {"type": "host-local", "subnet": "198.18.41.0/24"}},
                {"type": "tuning", "sysctl": {"net.core.somaxconn": "512"}}]}),
        ),
        (
            "20-macvlan.conflist",
            json!({"cniVersion": "1.0.0", "name": "mv", "plugins": [
                {"type": "macvlan", "master": "eth0", "mode": "bridge",
                 "ipam": {"type": "host-local", "subnet": "198.18.42.0/24"}}]}),
        ),
        (
            "10-calico.conflist",
            json!({"name": "k8s-pod-network", "cniVersion": "0.3.1", "plugins": [
                {"type": "calico", "log_level": "info", "datastore_type": "kubernetes",
                 "nodename": "node-1", "mtu": 1440, "ipam": {"type": "calico-ipam"},
                 "policy": {"type": "k8s"}, "kubernetes": {"kubeconfig": "/etc/cni/net.d/calico-kubeconfig"}},
                {"type": "portmap", "snat": true, "capabilities": {"portMappings": true}},
                {"type": "bandwidth", "capabilities": {"bandwidth": true}}]}),
        ),
        (
            "10-flannel.conflist",
            json!({"name": "cbr0", "cniVersion": "0.3.1", "plugins": [
                {"type": "flannel", "delegate": {"hairpinMode": true, "isDefaultGateway": true}},
                {"type": "portmap", "capabilities": {"portMappings": true}}]}),
        ),
        (
            "10-flannel.conf",
            json!({"name": "cbr0", "cniVersion": "0.3.1", "type": "flannel",
                   "delegate": {"isDefaultGateway": true}}),
        ),
    ]
}

fn install(conf: &Path, bin: &Path, extra: &[&str]) -> std::process::Output {
    let (c, b) = (conf.display().to_string(), bin.display().to_string());
    let mut args = vec!["cni-install", "--conf-dir", &c, "--bin-dir", &b];
    args.extend_from_slice(extra);
    podtap_state(BIN, conf, &args)
}

fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn install_is_idempotent_and_uninstall_restores_every_byte() {
    for (name, conf) in samples() {
        let (conf_dir, bin_dir) = (TempDir::new(), TempDir::new());
        std::fs::create_dir_all(conf_dir.path()).unwrap();
        std::fs::create_dir_all(bin_dir.path()).unwrap();
        // The way an operator or a plugin's installer writes it: pretty, with a newline.
        let text = serde_json::to_string_pretty(&conf).unwrap() + "\n";
        std::fs::write(conf_dir.path().join(name), &text).unwrap();
        // A later file the runtime does not use stays untouched.
        std::fs::write(
            conf_dir.path().join("99-other.conflist"),
            b"{\"plugins\":[]}\n",
        )
        .unwrap();
        let before = snapshot(conf_dir.path());

        let out = install(conf_dir.path(), bin_dir.path(), &[]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let chained_name = name
            .replace(".conf", ".conflist")
            .replace(".conflistlist", ".conflist");
        let chain: Value =
            serde_json::from_slice(&std::fs::read(conf_dir.path().join(&chained_name)).unwrap())
                .unwrap();
        let plugins = chain["plugins"].as_array().expect("plugins");
        assert_eq!(
            plugins.last().unwrap()["type"],
            "podtap",
            "{name}: podtap last"
        );
        assert_eq!(
            plugins.iter().filter(|p| p["type"] == "podtap").count(),
            1,
            "{name}"
        );
        let bin = bin_dir.path().join("podtap");
        assert!(bin.exists(), "{name}: binary installed");
        assert_eq!(
            std::fs::metadata(&bin).unwrap().permissions().mode() & 0o111,
            0o111
        );
        let other = std::fs::read(conf_dir.path().join("99-other.conflist")).unwrap();
        assert_eq!(
            other, b"{\"plugins\":[]}\n",
            "{name}: only the runtime's file is edited"
        );

        let installed = snapshot(conf_dir.path());
        let again = install(conf_dir.path(), bin_dir.path(), &[]);
        assert!(again.status.success(), "{name}: {}", stderr(&again));
        assert_eq!(
            snapshot(conf_dir.path()),
            installed,
            "{name}: a second run changes nothing"
        );

        let out = install(conf_dir.path(), bin_dir.path(), &["--uninstall"]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        assert_eq!(
            snapshot(conf_dir.path()),
            before,
            "{name}: byte-identical restore"
        );
        assert!(!bin.exists(), "{name}: binary removed");
        // Uninstalling twice is fine.
        let out = install(conf_dir.path(), bin_dir.path(), &["--uninstall"]);
        assert!(out.status.success(), "{name}: {}", stderr(&out));
    }
}

#[test]
fn an_edited_chain_keeps_its_edits_on_uninstall() {
    let (conf_dir, bin_dir) = (TempDir::new(), TempDir::new());
    std::fs::create_dir_all(conf_dir.path()).unwrap();
    std::fs::create_dir_all(bin_dir.path()).unwrap();
    let (name, conf) = samples().remove(0);
    let file = conf_dir.path().join(name);
    std::fs::write(&file, serde_json::to_vec_pretty(&conf).unwrap()).unwrap();
    assert!(install(conf_dir.path(), bin_dir.path(), &[])
        .status
        .success());
    let mut chain: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    chain["plugins"][0]["ipMasq"] = json!(false);
    std::fs::write(&file, serde_json::to_vec_pretty(&chain).unwrap()).unwrap();
    assert!(install(conf_dir.path(), bin_dir.path(), &["--uninstall"])
        .status
        .success());
    let now: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(
        now["plugins"][0]["ipMasq"], false,
        "the operator's edit stays"
    );
    assert!(now["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["type"] != "podtap"));
}

#[test]
fn a_cni_add_through_the_installed_chain_builds_the_tap() {
    if !podtap_testkit::net_tools_or_skip("a_cni_add_through_the_installed_chain_builds_the_tap")
        || !podtap_testkit::tool_or_skip(
            "a_cni_add_through_the_installed_chain_builds_the_tap",
            &format!("{}/bridge", podtap_testkit::PLUGINS),
        )
    {
        return;
    }
    let (conf_dir, bin_dir, state, data) = (
        TempDir::new(),
        TempDir::new(),
        TempDir::new(),
        TempDir::new(),
    );
    std::fs::create_dir_all(conf_dir.path()).unwrap();
    std::fs::create_dir_all(bin_dir.path()).unwrap();
    let net = 200 + (std::process::id() % 50);
    let mut conf =
        podtap_testkit::conflist("bridge-podtap.conflist", state.path(), data.path(), net);
    // The node's own configuration: the same chain without podtap.
    conf["plugins"]
        .as_array_mut()
        .unwrap()
        .retain(|p| p["type"] != "podtap");
    std::fs::write(
        conf_dir.path().join("10-node.conflist"),
        serde_json::to_vec_pretty(&conf).unwrap(),
    )
    .unwrap();
    let state_dir = state.path().display().to_string();
    let out = install(
        conf_dir.path(),
        bin_dir.path(),
        &["--plugin-state-dir", &state_dir],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let chain: Value =
        serde_json::from_slice(&std::fs::read(conf_dir.path().join("10-node.conflist")).unwrap())
            .unwrap();
    let node = Netns::new("cin");
    let pod = Netns::new("cip");
    let runner = Chain::new(BIN, chain, Some(&node));
    let cid = container_id(9);
    let results = runner.add(&cid, &pod.path_str(), "eth0");
    let last = results.last().expect("a result");
    assert_eq!(
        last["interfaces"], results[0]["interfaces"],
        "the installed entry leaves the TAP out of the result (the default)"
    );
    assert_eq!(
        podtap_testkit::taps(&pod).len(),
        1,
        "the TAP exists in the pod netns"
    );
    runner.del(&cid, &pod.path_str(), "eth0", Some(last));
    assert!(!pod.ip("-d link show").contains("tun"), "DEL took the TAP");
}
