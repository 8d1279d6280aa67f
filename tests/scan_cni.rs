//! `podtap scan` of pods the CNI reference plugins built, compared with iproute2.

use std::process::Output;

use podtap_testkit::scan::{arr, assert_matches_ip, opt_str, route, scan_stable};
use podtap_testkit::{iface, Pod, TempDir, PLUGINS};
use serde_json::{json, Value};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

// ---------------------------------------------------------------------------
// CNI reference plugins
// ---------------------------------------------------------------------------

/// Plugins ADDed into a pod, run in the node netns as a runtime would; DEL on drop.
struct Cni {
    node: String,
    netns: String,
    id: String,
    added: Vec<(String, String, Value)>,
    _dir: TempDir,
}

impl Cni {
    fn call(&self, command: &str, plugin: &str, ifname: &str, conf: &Value) -> Output {
        podtap_testkit::cni_plugin(
            &self.node,
            command,
            plugin,
            &self.id,
            &self.netns,
            ifname,
            conf,
        )
    }

    fn add(&mut self, plugin: &str, ifname: &str, conf: Value) -> Value {
        let out = self.call("ADD", plugin, ifname, &conf);
        self.added.push((plugin.into(), ifname.into(), conf));
        assert!(
            out.status.success(),
            "CNI ADD {plugin} failed: {}{}",
            podtap_testkit::stdout(&out),
            podtap_testkit::stderr(&out)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Cni {
    fn drop(&mut self) {
        for (plugin, ifname, conf) in std::mem::take(&mut self.added).into_iter().rev() {
            let _ = self.call("DEL", &plugin, &ifname, &conf);
        }
    }
}

#[test]
fn cni_bridge_and_macvlan_plugins() {
    let test = "cni_bridge_and_macvlan_plugins";
    if !podtap_testkit::root_or_skip(test) {
        return;
    }
    for plugin in ["bridge", "macvlan", "host-local"] {
        if !podtap_testkit::tool_or_skip(test, &format!("{PLUGINS}/{plugin}")) {
            return;
        }
    }
    let pod = Pod::new();
    let (node, n) = (&pod.peer, pod.net);
    node.ip("link add mvm0 type veth peer name mvm0b");
    node.ip("link set mvm0 up");
    node.ip("link set mvm0b up");
    let dir = TempDir::new();
    let ipam_dir = dir.path().join("ipam").display().to_string();
    let mut cni = Cni {
        node: node.name.clone(),
        netns: pod.pod.path_str(),
        id: podtap_testkit::unique("ctr"),
        added: Vec::new(),
        _dir: dir,
    };
    let bridge = podtap_testkit::unique("ptb");
    let br_result = cni.add(
        "bridge",
        "eth0",
        json!({
            "cniVersion": "1.0.0",
            "name": podtap_testkit::unique("ptnet"),
            "type": "bridge",
            "bridge": bridge,
            "isGateway": true,
            "ipam": {
                "type": "host-local",
                "dataDir": ipam_dir,
                "ranges": [
                    [{"subnet": format!("198.18.{n}.0/24")}],
                    [{"subnet": format!("2001:db8:{n:x}::/64")}]
                ],
                "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]
            }
        }),
    );
    let mv_result = cni.add(
        "macvlan",
        "net1",
        json!({
            "cniVersion": "1.0.0",
            "name": podtap_testkit::unique("ptmv"),
            "type": "macvlan",
            "master": "mvm0",
            "mode": "bridge",
            "ipam": {
                "type": "host-local",
                "dataDir": ipam_dir,
                "ranges": [[{"subnet": format!("198.19.{n}.0/24")}]]
            }
        }),
    );
    // The bridge is the node's: it must not show up in the pod.
    assert!(podtap_testkit::sh_ok(&format!(
        "ip -n {} link show {bridge}",
        node.name
    )));

    let sc = scan_stable(BIN, &pod.pod);
    assert_matches_ip(&sc);
    let d = &sc.desc;
    assert!(arr(&d["interfaces"])
        .iter()
        .all(|i| i["name"] != bridge.as_str()));

    for (result, ifname, kind) in [
        (&br_result, "eth0", "veth"),
        (&mv_result, "net1", "macvlan"),
    ] {
        let cni_ifaces = arr(&result["interfaces"]);
        let pod_ifaces: Vec<&Value> = cni_ifaces
            .iter()
            .filter(|i| i["sandbox"] == pod.pod.path_str().as_str())
            .collect();
        assert_eq!(pod_ifaces.len(), 1, "{result:#}");
        assert_eq!(pod_ifaces[0]["name"], ifname);
        let ours = iface(d, ifname);
        let cni_mac = pod_ifaces[0]["mac"].as_str().unwrap().to_ascii_lowercase();
        assert_eq!(
            ours["mac"],
            cni_mac.as_str(),
            "{ifname}: MAC from the CNI result"
        );
        assert_eq!(ours["guest_mac"], cni_mac.as_str());
        assert_eq!(ours["kind"], kind);
        assert_eq!(ours["eligible"], true);

        let ips = arr(&result["ips"]);
        assert!(!ips.is_empty());
        for ip in ips {
            let idx = usize::try_from(ip["interface"].as_u64().unwrap()).unwrap();
            assert_eq!(cni_ifaces[idx]["name"], ifname, "{ip}");
            assert!(
                arr(&ours["addresses"]).contains(&ip["address"]),
                "{ifname}: {} from the CNI result in {:#}",
                ip["address"],
                ours["addresses"]
            );
        }

        let routes = result
            .get("routes")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for r in &routes {
            let dst = r["dst"].as_str().unwrap();
            let v4 = dst.contains('.');
            // A route without gw goes via the gateway of the same family.
            let gw = opt_str(r, "gw").map(str::to_string).unwrap_or_else(|| {
                ips.iter()
                    .find(|ip| ip["address"].as_str().unwrap().contains('.') == v4)
                    .and_then(|ip| opt_str(ip, "gateway"))
                    .unwrap()
                    .to_string()
            });
            let ours = route(d, dst);
            assert_eq!(ours["gateway"], gw.as_str(), "{dst}");
            assert_eq!(ours["interface"], ifname, "{dst}");
            assert_eq!(ours["family"], if v4 { "inet" } else { "inet6" });
        }
        if ifname == "eth0" {
            assert_eq!(routes.len(), 2, "both default routes in the bridge result");
        }
    }
    drop(cni);
    // DEL removed what ADD made in the pod.
    let left: Vec<String> = arr(&pod.pod.ip_json("link show"))
        .iter()
        .map(|l| l["ifname"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(left, ["lo"], "after CNI DEL");
}
