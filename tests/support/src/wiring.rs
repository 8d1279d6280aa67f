//! Wiring, read back independently with iproute2 and tc: the attach tests'
//! pods and the checks of a TAP and its tc redirects.

use serde_json::Value;

use crate::netns::Netns;
use crate::pod::Pod;
use crate::podtap::iface;
use crate::run::sh;

/// The attach tests' pod: a dual-stack pod like `Pod::dual_stack`, but with IPv6 DAD off in the pod
/// netns so link-local addresses are not "tentative" in one snapshot and
/// settled in the next. eth0 gets MTU 1450 so the TAP MTU check means something.
pub fn pod() -> Pod {
    let pod = Pod::stable_dual_stack();
    pod.pod.ip("link set eth0 mtu 1450");
    pod
}

/// `pod()` plus a macvlan `net1` (which cannot be bridged).
pub fn pod_with_macvlan() -> Pod {
    let pod = pod();
    pod.add_macvlan("net1", pod.net);
    pod
}

/// `ip -d -j link show dev <name>` in `ns`.
pub fn link(ns: &Netns, name: &str) -> Value {
    ns.ip_json(&format!("-d link show dev {name}"))[0].clone()
}

/// `tc qdisc show dev <dev> ingress` kinds (ingress / clsact), via `tc -j`.
pub fn ingress_qdiscs(ns: &Netns, dev: &str) -> Vec<String> {
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

pub fn filters(ns: &Netns, dev: &str) -> String {
    sh(&format!("tc -n {} filter show dev {dev} ingress", ns.name))
}

/// The link/qdisc/filter part of a snapshot (addresses and routes start at `1: lo:`).
pub fn links_part(snap: &str) -> &str {
    &snap[..snap.find("\n1: lo:").expect("snapshot has an addr section")]
}

/// Verify the TAP of pod interface `pod_if` as attach described it, independently.
pub fn verify_tap(pod: &Pod, desc: &Value, pod_if: &str) -> String {
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

/// The tags of the BPF redirect program an earlier podtap attached (SHA-256
/// on Linux 6.18+, SHA-1 before).
const REDIRECT_TAGS: [&str; 2] = ["351a1612fd39ee2f", "fd42edd02e5de648"];

/// Which redirect `from`'s ingress carries to `to`, read with tc: `"bpf"`
/// (a direct-action cls_bpf filter running that program, with `to`'s
/// ifindex as classid), `"u32"` (u32 with a mirred redirect to `to`), or
/// `None`.
pub fn redirect_kind(ns: &Netns, from: &str, to: &str) -> Option<&'static str> {
    let f = filters(ns, from);
    if f.contains(" u32 ") && f.contains(&format!("Egress Redirect to device {to})")) {
        return Some("u32");
    }
    let ifindex = link(ns, to)["ifindex"].as_u64().expect("an ifindex");
    let bpf = f.lines().any(|l| {
        l.contains(" bpf ")
            && l.contains(&format!(" flowid :{ifindex:x} "))
            && l.contains(" direct-action ")
            && l.contains(" name podtap_redir ")
            && REDIRECT_TAGS
                .iter()
                .any(|t| l.contains(&format!(" tag {t}")))
    });
    bpf.then_some("bpf")
}

/// The redirect kind attach makes: u32 + mirred.
pub fn default_redirect() -> &'static str {
    "u32"
}

/// tc: ingress qdiscs on both sides, redirects both ways, of the default kind.
pub fn verify_tc(pod: &Pod, pod_if: &str, tap: &str) {
    for dev in [pod_if, tap] {
        let kinds = ingress_qdiscs(&pod.pod, dev);
        assert!(
            kinds.iter().any(|k| k == "ingress" || k == "clsact"),
            "{dev} has an ingress hook: {kinds:?}"
        );
    }
    let want = Some(default_redirect());
    assert_eq!(
        redirect_kind(&pod.pod, pod_if, tap),
        want,
        "{pod_if} -> {tap}:\n{}",
        filters(&pod.pod, pod_if)
    );
    assert_eq!(
        redirect_kind(&pod.pod, tap, pod_if),
        want,
        "{tap} -> {pod_if}:\n{}",
        filters(&pod.pod, tap)
    );
}

pub fn verify_timings(desc: &Value, id: &str) {
    let a = &desc["attachment"];
    assert_eq!(a["id"], id);
    let t = &a["timings_us"];
    for k in ["scan", "tap", "wiring", "checkpoint", "total"] {
        assert!(t[k].is_u64(), "timings_us.{k} present: {t}");
    }
    assert!(t["total"].as_u64().unwrap() >= t["scan"].as_u64().unwrap());
}
