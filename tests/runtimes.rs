//! Real container runtimes driving podtap as a chained CNI plugin (issue 15).
//!
//! Each runtime runs inside a node netns of the test's own and a private mount
//! namespace (see `tests/runtimes/*.sh`); the machine's root netns is checked
//! to be unchanged afterwards.
mod common;

use common::*;
use std::process::Command;

/// The root netns's identity and link list (names + ifindex), to prove a test left it alone.
fn root_netns_fingerprint() -> String {
    let ino = std::fs::metadata("/proc/self/ns/net")
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
        .expect("stat /proc/self/ns/net");
    let links: serde_json::Value =
        serde_json::from_str(&sh("ip -j link show")).expect("ip -j output is JSON");
    let mut names: Vec<String> = links
        .as_array()
        .expect("links")
        .iter()
        .map(|l| format!("{}:{}", l["ifindex"], l["ifname"]))
        .collect();
    names.sort();
    format!("{ino} {}", names.join(","))
}

fn script(name: &str) -> String {
    format!("{}/tests/runtimes/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Files left under the podtap state dir (checkpoints, registry entries, locks are dirs or files).
fn leftover_files(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(leftover_files(&p));
        } else {
            out.push(p.display().to_string());
        }
    }
    out
}

/// Run `tests/runtimes/podman-cni.sh` in a fresh node netns; returns its output, the
/// work dir and the node (both still alive for the caller's checks).
fn podman_cni(subnet: &str, mode: &str) -> (std::process::Output, TempDir, Netns) {
    let node = Netns::new("podtap-rt-");
    let work = TempDir::new();
    let out = Command::new("bash")
        .arg(script("podman-cni.sh"))
        .arg(work.path())
        .arg(&node.name)
        .arg(env!("CARGO_BIN_EXE_podtap"))
        .arg(subnet)
        .arg(mode)
        .output()
        .expect("run podman");
    (out, work, node)
}

/// Nothing of podtap's remains: no checkpoint in the state dir, no TAP in the node netns.
fn assert_nothing_left(work: &TempDir, node: &Netns) {
    let left = leftover_files(&work.path().join("state"));
    assert!(
        left.iter().all(|f| !f.ends_with(".json")),
        "podtap state left behind: {left:?}"
    );
    let tuns = node.ip_json("link show type tun");
    assert_eq!(
        tuns.as_array().map(Vec::len),
        Some(0),
        "TAP left in node netns"
    );
}

#[test]
fn podman_cni_backend_attaches_and_cleans_up() {
    let test = "podman_cni_backend_attaches_and_cleans_up";
    if !root_or_skip(test) || !tool_or_skip(test, "podman") || !tool_or_skip(test, "runc") {
        return;
    }
    let before = root_netns_fingerprint();
    let (out, work, node) = podman_cni("198.18.200.0/24", "tc");
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "podman run failed:\nstdout: {text}\nstderr: {}",
        stderr(&out)
    );
    // Inside the container: eth0 (from the bridge plugin) and podtap's TAP beside it.
    assert!(text.contains("LINK eth0"), "no eth0 in the pod: {text}");
    assert!(
        text.contains("TAP "),
        "no TAP next to eth0 in the pod: {text}"
    );
    // `run --rm` tore the pod down: CNI DEL ran, nothing of podtap's remains.
    assert_nothing_left(&work, &node);
    drop(node);
    assert_eq!(before, root_netns_fingerprint(), "root netns changed");
}

#[test]
fn podman_cni_backend_failed_add_rolls_back() {
    let test = "podman_cni_backend_failed_add_rolls_back";
    if !root_or_skip(test) || !tool_or_skip(test, "podman") || !tool_or_skip(test, "runc") {
        return;
    }
    let before = root_netns_fingerprint();
    // An invalid podtap "mode": the chained ADD fails after bridge succeeded.
    let (out, work, node) = podman_cni("198.18.201.0/24", "no-such-mode");
    assert!(
        !out.status.success(),
        "podman run succeeded with an invalid podtap config: {}",
        stdout(&out)
    );
    assert!(
        !stdout(&out).contains("TAP "),
        "container ran despite the failed ADD: {}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("plugin type=\"podtap\" failed (add)"),
        "podman did not report podtap's ADD failure: {}",
        stderr(&out)
    );
    assert_nothing_left(&work, &node);
    // The runtime's rollback DEL also released the bridge plugin's address.
    let reserved: Vec<_> = std::fs::read_dir(work.path().join("ipam/ptrt"))
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        reserved.iter().all(|n| {
            let n = n.to_string_lossy();
            n == "lock" || n.starts_with("last_reserved_ip")
        }),
        "address still reserved after the failed ADD: {reserved:?}"
    );
    drop(node);
    assert_eq!(before, root_netns_fingerprint(), "root netns changed");
}

#[test]
fn podman_hooks_dir_attaches_and_poststop_cleans_up() {
    let test = "podman_hooks_dir_attaches_and_poststop_cleans_up";
    if !root_or_skip(test)
        || !tool_or_skip(test, "podman")
        || !tool_or_skip(test, "runc")
        || !tool_or_skip(test, "jq")
    {
        return;
    }
    let before = root_netns_fingerprint();
    // The conflist is bridge alone; podtap runs from copies of hooks/oci/*.json
    // (path and state dir substituted) given to `podman --hooks-dir`.
    let (out, work, node) = podman_cni("198.18.202.0/24", "hooks");
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "podman run failed:\nstdout: {text}\nstderr: {}",
        stderr(&out)
    );
    assert!(text.contains("LINK eth0"), "no eth0 in the pod: {text}");
    assert!(
        text.contains("TAP "),
        "createRuntime hook made no TAP next to eth0: {text}"
    );
    // poststop detached: no checkpoint, no TAP.
    assert_nothing_left(&work, &node);
    drop(node);
    assert_eq!(before, root_netns_fingerprint(), "root netns changed");
}

#[test]
fn ctr_run_cni_attaches_and_cleans_up() {
    let test = "ctr_run_cni_attaches_and_cleans_up";
    if !root_or_skip(test) || !tool_or_skip(test, "containerd") || !tool_or_skip(test, "ctr") {
        return;
    }
    let before = root_netns_fingerprint();
    let node = Netns::new("podtap-rt-");
    let work = TempDir::new();
    // A private containerd (root, state, socket in `work`, CRI off), a busybox OCI
    // tarball imported with `ctr image import`, then `ctr run --rm --cni`.
    let out = Command::new("bash")
        .arg(script("ctr-cni.sh"))
        .arg(work.path())
        .arg(&node.name)
        .arg(env!("CARGO_BIN_EXE_podtap"))
        .arg("198.18.203.0/24")
        .output()
        .expect("run ctr");
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "ctr run --cni failed:\nstdout: {text}\nstderr: {}",
        stderr(&out)
    );
    assert!(
        text.contains("LINK eth0"),
        "no eth0 in the container: {text}"
    );
    assert!(text.contains("TAP "), "no TAP next to eth0: {text}");
    assert_nothing_left(&work, &node);
    drop(node);
    assert_eq!(before, root_netns_fingerprint(), "root netns changed");
}
