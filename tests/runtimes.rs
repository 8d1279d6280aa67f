//! Real container runtimes driving podtap as a chained CNI plugin.
//!
//! Each runtime runs inside a node netns of the test's own and a private mount
//! namespace (see `tests/runtimes/*.sh`); the machine's root netns is checked
//! to be unchanged afterwards.
use podtap_testkit::*;
use std::process::Command;

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

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

/// The host's own podman and libcni state (each path with its mtime, or absent): a
/// podman test runs with private roots, locks and CNI cache and must leave these as
/// they were, and cannot be swayed by them.
fn host_podman_state() -> Vec<(String, Option<std::time::SystemTime>)> {
    [
        "/dev/shm/libpod_lock",
        "/var/lib/containers",
        "/run/containers",
        "/run/libpod",
        "/var/lib/cni/results",
    ]
    .iter()
    .map(|p| {
        let mtime = std::fs::symlink_metadata(p).and_then(|m| m.modified()).ok();
        (p.to_string(), mtime)
    })
    .collect()
}

fn script(name: &str) -> String {
    format!("{}/tests/runtimes/{name}", podtap_testkit::repo().display())
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
    podman_script("podman-cni.sh", &[subnet, mode])
}

/// Run a podman script (`WORK NODE PODTAP` then `args`) in a fresh node netns; the
/// host's podman and CNI cache state must be as it was afterwards.
fn podman_script(name: &str, args: &[&str]) -> (std::process::Output, TempDir, Netns) {
    let node = Netns::new("podtap-rt-");
    let work = TempDir::new();
    let host_before = host_podman_state();
    let out = Command::new("bash")
        .arg(script(name))
        .arg(work.path())
        .arg(&node.name)
        .arg(BIN)
        .args(args)
        .output()
        .expect("run podman");
    assert_eq!(
        host_before,
        host_podman_state(),
        "podman changed the host's podman or CNI cache state"
    );
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

/// One `podman-reload.sh` line (`ROUND 3 reload=ok tap=… check=ok …`) as its fields.
fn reload_fields(line: &str) -> std::collections::BTreeMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|f| f.split_once('='))
        .collect()
}

/// `podman network reload` twenty times on a running pod, then `podman restart`
/// and `podman rm`: after every step podtap's check passes and the
/// guest stand-in on the TAP reaches the pod's gateway and is reached from the
/// node; podman re-runs the chain for `eth0` each time, never for the TAP.
fn podman_reload_keeps_the_wiring(mode: &str, subnet: &str) {
    let test = format!("podman_reload_keeps_the_wiring_{mode}");
    if !root_or_skip(&test)
        || !tool_or_skip(&test, "podman")
        || !tool_or_skip(&test, "runc")
        || !tool_or_skip(&test, "jq")
        || !tool_or_skip(&test, "ping")
    {
        return;
    }
    let before = root_netns_fingerprint();
    let (out, _work, node) = podman_script("podman-reload.sh", &[subnet, mode, "20"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\nstderr: {}", stderr(&out));
    let steps: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("START") || l.starts_with("ROUND") || l.starts_with("RESTART"))
        .collect();
    assert_eq!(steps.len(), 22, "start, 20 reloads and a restart: {text}");
    let first = reload_fields(steps[0]);
    for step in &steps {
        let f = reload_fields(step);
        for (key, want) in [
            ("reload", "ok"),
            ("check", "ok"),
            ("out", "ok"),
            ("in", "ok"),
            ("ifname", "\"eth0\""),
        ] {
            assert_eq!(f.get(key), Some(&want), "{mode}: {step}\n{text}");
        }
        assert_eq!(f.get("tap"), first.get("tap"), "{mode}: TAP name: {step}");
        if mode == "tc" && !step.starts_with("RESTART") {
            // tc mode leaves the pod interface's MAC alone, and podman re-runs the
            // chain with it: the guest keeps its MAC across reloads (a restart
            // makes a new pod netns and a new veth).
            assert_eq!(f.get("mac"), first.get("mac"), "{mode}: guest MAC: {step}");
        }
    }
    assert!(
        text.lines()
            .any(|l| l == "LEFT checkpoints=0 taps=0 ipam=0"),
        "podman rm left something: {text}"
    );
    drop(node);
    assert_eq!(before, root_netns_fingerprint(), "root netns changed");
}

#[test]
fn podman_network_reload_keeps_tc_wiring() {
    podman_reload_keeps_the_wiring("tc", "198.18.205.0/24");
}

#[test]
fn podman_network_reload_keeps_bridge_wiring() {
    podman_reload_keeps_the_wiring("bridge", "198.18.206.0/24");
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
        .arg(BIN)
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

// ---- containerd's CRI plugin over gRPC (tests/runtimes/cri.sh, tests/runtimes/cri/cri.py) ----

/// Whether python3 has grpcio and grpcio-tools (the CRI client). Under CI=true
/// their absence fails the test instead of skipping it, as with [`tool_or_skip`].
fn python_grpc_or_skip(test: &str) -> bool {
    if sh_ok("python3 -c 'import grpc, grpc_tools'") {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: python3 modules grpc/grpc_tools are missing (CI=true: install them with tests/install-deps.sh)");
    }
    eprintln!("SKIP {test}: python3 has no grpcio/grpcio-tools (run tests/install-deps.sh)");
    false
}

fn cri_or_skip(test: &str) -> bool {
    root_or_skip(test)
        && tool_or_skip(test, "containerd")
        && tool_or_skip(test, "ctr")
        && tool_or_skip(test, "runc")
        && tool_or_skip(test, "python3")
        && python_grpc_or_skip(test)
}

/// The pid in `file` if that process is alive and its command line contains `needle`.
fn live_pid(file: &std::path::Path, needle: &str) -> Option<String> {
    let pid = std::fs::read_to_string(file).ok()?.trim().to_string();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    String::from_utf8_lossy(&cmdline)
        .contains(needle)
        .then_some(pid)
}

/// Kill what a failed `cri.sh` may have left running: its containerd, shims and
/// pod processes, all recorded under `work` (the script's own trap normally did it).
fn kill_cri_leftovers(work: &std::path::Path) {
    let w = work.display().to_string();
    let mut pids: Vec<String> = live_pid(&work.join("containerd.pid"), &w)
        .into_iter()
        .collect();
    let tasks = work.join("run/io.containerd.runtime.v2.task/k8s.io");
    for e in std::fs::read_dir(tasks).into_iter().flatten().flatten() {
        pids.extend(live_pid(&e.path().join("shim.pid"), &w));
        pids.extend(live_pid(&e.path().join("init.pid"), "sleep"));
    }
    // The test guest's QEMU (scenario portforward).
    pids.extend(live_pid(&work.join("qemu.pid"), "qemu-system"));
    for pid in pids {
        eprintln!("killing leftover process {pid} of {w}");
        let _ = Command::new("kill").args(["-9", &pid]).output();
    }
}

/// Run `tests/runtimes/cri.sh SCENARIO` in a fresh node netns; returns its output,
/// the work dir and the node. Leftover processes are killed whatever happened.
fn cri(scenario: &str, subnet: &str) -> (std::process::Output, TempDir, Netns) {
    cri_with(scenario, subnet, &[])
}

/// [`cri`] with more environment for the script.
fn cri_with(
    scenario: &str,
    subnet: &str,
    env: &[(&str, &str)],
) -> (std::process::Output, TempDir, Netns) {
    let node = Netns::new("podtap-rt-");
    let work = TempDir::new();
    let out = Command::new("bash")
        .arg(script("cri.sh"))
        .arg(work.path())
        .arg(&node.name)
        .arg(BIN)
        .arg(subnet)
        .arg(scenario)
        .envs(env.iter().copied())
        .output()
        .expect("run cri.sh");
    kill_cri_leftovers(work.path());
    (out, work, node)
}

/// The lines of `text` that start with `prefix ` (without it).
fn facts<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix)?.strip_prefix(' '))
        .collect()
}

/// A pod's lifecycle went as planned and left nothing: after StopPodSandbox the
/// pod netns (held open by the script) has only `lo`, no checkpoint remains, a
/// second StopPodSandbox and RemovePodSandbox succeed, no pod or netns is left.
fn assert_cri_stopped_clean(text: &str, work: &TempDir, node: &Netns) {
    assert_eq!(facts(text, "STOP"), ["ok"], "StopPodSandbox: {text}");
    assert_eq!(
        facts(text, "STATE").last(),
        Some(&"SANDBOX_NOTREADY"),
        "{text}"
    );
    assert_eq!(
        facts(text, "HELD"),
        ["lo -"],
        "the pod netns still has links after StopPodSandbox: {text}"
    );
    assert_eq!(facts(text, "CHECKPOINTS-LEFT"), ["0"], "{text}");
    assert_eq!(facts(text, "NETNS-FILE"), ["gone"], "{text}");
    assert_eq!(
        facts(text, "STOP2"),
        ["ok"],
        "second StopPodSandbox: {text}"
    );
    assert_eq!(facts(text, "REMOVE"), ["ok"], "RemovePodSandbox: {text}");
    assert_eq!(facts(text, "PODS-LEFT"), ["0"], "{text}");
    assert_eq!(facts(text, "NETNS-LEFT"), ["0"], "{text}");
    assert_nothing_left(work, node);
}

fn cri_success(out: &std::process::Output) -> String {
    let text = stdout(out);
    assert!(
        out.status.success(),
        "cri.sh failed:\nstdout: {text}\nstderr: {}",
        stderr(out)
    );
    text
}

/// The pod netns right after RunPodSandbox: eth0 from bridge, podtap's TAP beside
/// it, and podtap's checkpoint (mode `mode`) in the state dir.
fn assert_cri_attached(text: &str, mode: &str) {
    let podns = facts(text, "PODNS");
    assert!(
        podns.contains(&"eth0 veth"),
        "no eth0 in the pod netns: {text}"
    );
    assert!(
        podns.contains(&"tap_eth0 tun"),
        "no TAP next to eth0 in the pod netns: {text}"
    );
    let checkpoints = facts(text, "CHECKPOINT");
    assert!(
        checkpoints
            .iter()
            .any(|c| c.ends_with(&format!("-eth0.json {mode} created=tap"))
                || c.ends_with(&format!("-eth0.json {mode} created=tap,bridge"))),
        "no podtap checkpoint in {mode} mode: {text}"
    );
}

#[test]
fn cri_run_pod_sandbox_attaches_and_stop_cleans_up() {
    let test = "cri_run_pod_sandbox_attaches_and_stop_cleans_up";
    if !cri_or_skip(test) {
        return;
    }
    let before = root_netns_fingerprint();
    // RunPodSandbox (no annotations: containerd sends them as null), an app
    // container in the pod, StopPodSandbox twice, RemovePodSandbox.
    let (out, work, node) = cri("lifecycle", "198.19.220.0/24");
    let text = cri_success(&out);
    assert_eq!(facts(&text, "STATE")[0], "SANDBOX_READY", "{text}");
    assert_cri_attached(&text, "tc");
    // The app container shares the pause container's netns and sees both links.
    assert_eq!(facts(&text, "CTR-NETNS"), ["same"], "{text}");
    let ctr = facts(&text, "CTR");
    assert!(
        ctr.contains(&"LINK eth0"),
        "no eth0 in the container: {text}"
    );
    assert!(
        ctr.contains(&"TAP tap_eth0"),
        "no TAP in the container: {text}"
    );
    assert_cri_stopped_clean(&text, &work, &node);
    drop(node);
    assert_eq!(before, root_netns_fingerprint(), "root netns changed");
}

#[test]
fn cri_containerd_restart_between_add_and_del() {
    let test = "cri_containerd_restart_between_add_and_del";
    if !cri_or_skip(test) {
        return;
    }
    let before = root_netns_fingerprint();
    // RunPodSandbox, containerd SIGTERMed and started again on the same root and
    // state, then StopPodSandbox/RemovePodSandbox from the new containerd.
    let (out, work, node) = cri("restart", "198.19.221.0/24");
    let text = cri_success(&out);
    assert_cri_attached(&text, "tc");
    assert_eq!(
        facts(&text, "CONTAINERD"),
        ["stopped", "restarted"],
        "{text}"
    );
    // The pod survived the restart with its TAP, and the new containerd knows it.
    assert_eq!(
        facts(&text, "STATE")[..2],
        ["SANDBOX_READY", "SANDBOX_READY"],
        "{text}"
    );
    assert!(
        facts(&text, "RESTARTED-PODNS").contains(&"tap_eth0 tun"),
        "TAP gone across the restart: {text}"
    );
    assert_cri_stopped_clean(&text, &work, &node);
    drop(node);
    assert_eq!(before, root_netns_fingerprint(), "root netns changed");
}

#[test]
fn cri_pod_annotation_selects_bridge_mode() {
    let test = "cri_pod_annotation_selects_bridge_mode";
    if !cri_or_skip(test) {
        return;
    }
    let before = root_netns_fingerprint();
    // The conflist says tc; the pod annotation io.podtap.mode=bridge reaches podtap
    // through the capability io.kubernetes.cri.pod-annotations.
    let (out, work, node) = cri("bridge", "198.19.222.0/24");
    let text = cri_success(&out);
    assert_cri_attached(&text, "bridge");
    assert!(
        facts(&text, "PODNS").contains(&"br_eth0 bridge"),
        "no bridge made by podtap in the pod netns: {text}"
    );
    assert_cri_stopped_clean(&text, &work, &node);
    drop(node);
    assert_eq!(before, root_netns_fingerprint(), "root netns changed");
}

#[test]
fn cri_failed_add_rolls_back() {
    let test = "cri_failed_add_rolls_back";
    if !cri_or_skip(test) {
        return;
    }
    let before = root_netns_fingerprint();
    // An invalid io.podtap.mode annotation: podtap's ADD fails after bridge's.
    let (out, work, node) = cri("badmode", "198.19.223.0/24");
    let text = cri_success(&out);
    assert_eq!(facts(&text, "RUN-POD"), ["failed"], "{text}");
    assert_eq!(
        facts(&text, "ERROR"),
        ["plugin type=\"podtap\" failed (add)"],
        "containerd did not report podtap's ADD failure: {text}"
    );
    assert_eq!(facts(&text, "CHECKPOINTS-LEFT"), ["0"], "{text}");
    assert_eq!(facts(&text, "PODS-LEFT"), ["0"], "{text}");
    assert_eq!(facts(&text, "NETNS-LEFT"), ["0"], "{text}");
    assert_nothing_left(&work, &node);
    // containerd's rollback DEL also released the bridge plugin's address.
    let reserved: Vec<_> = std::fs::read_dir(work.path().join("ipam/ptcri"))
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
fn cri_port_forward_reaches_a_server_in_an_l3_guest() {
    let test = "cri_port_forward_reaches_a_server_in_an_l3_guest";
    if !(cri_or_skip(test)
        && podtap_testkit::vm::vm_prerequisites(test)
        && tool_or_skip(test, "nft"))
    {
        return;
    }
    let before = root_netns_fingerprint();
    let (kernel, initrd) = podtap_testkit::vm::guest();
    // CRI PortForward: containerd's streaming server dials `localhost:8080`
    // (tcp4 first) inside the pod netns. In l3 mode podtap's nftables table
    // there DNATs 127.0.0.1 to the guest's IPv4 address and SNATs it from
    // 169.254.0.1 (the netns's address on the TAP), so the connection reaches
    // the guest's httpd. First, a pod in tc mode: there the pod netns's
    // 127.0.0.1 is the netns's own loopback, and tc only redirects what
    // crosses eth0 and the TAP, so a port-forward reaches whatever listens in
    // the pod netns, never the guest (nothing listens: refused). A guest
    // attached in tc mode would change nothing, so none is booted for it.
    let (out, work, node) = cri_with(
        "portforward",
        "198.19.224.0/24",
        &[("GUEST_KERNEL", kernel), ("GUEST_INITRD", initrd)],
    );
    let text = cri_success(&out);
    eprintln!("{text}\n--- stderr:\n{}", stderr(&out));

    // tc: the conflist's mode, the port-forward fails, the pod is gone.
    assert!(
        facts(&text, "TC-CHECKPOINT")
            .iter()
            .any(|c| c.ends_with("-eth0.json tc created=tap")),
        "no tc checkpoint for the first pod: {text}"
    );
    assert_eq!(facts(&text, "TC-PF-EXIT"), ["/ 1"], "{text}");
    let tc_error = facts(&text, "TC-PF-ERROR").join(" ");
    assert!(
        tc_error.contains("connect: connection refused"),
        "tc: the port-forward did not fail for want of a listener: {text}"
    );
    assert_eq!(facts(&text, "TC-REMOVE"), ["ok"], "{text}");

    // l3: attached by the annotation, podtap's table in the pod netns.
    assert_eq!(facts(&text, "STATE")[0], "SANDBOX_READY", "{text}");
    assert_cri_attached(&text, "l3");
    assert!(
        facts(&text, "NFT")
            .iter()
            .any(|t| t.starts_with("inet podtap_")),
        "no podtap nftables table in the l3 pod netns: {text}"
    );
    assert_eq!(facts(&text, "GUEST"), ["READY"], "{text}");
    assert_eq!(
        facts(&text, "PF-EXIT"),
        ["/ 0", "/cgi-bin/ip 0"],
        "port-forward to the l3 guest failed: {text}"
    );
    for status in facts(&text, "PF-STATUS") {
        assert!(status.contains(" 200 "), "not 200: {status}: {text}");
    }
    // The guest's httpd answered, and saw the connection from the SNAT's
    // source (busybox httpd listens on a dual-stack socket: it may name the
    // peer in its IPv4-mapped form).
    let body = facts(&text, "PF-BODY");
    assert_eq!(body.len(), 2, "{text}");
    assert_eq!(body[0], "/ podtap-guest-httpd", "{text}");
    assert!(
        [
            "/cgi-bin/ip from 169.254.0.1",
            "/cgi-bin/ip from [::ffff:169.254.0.1]"
        ]
        .contains(&body[1]),
        "the guest did not see the connection from 169.254.0.1: {text}"
    );
    assert!(
        facts(&text, "CONSOLE")
            .iter()
            .all(|l| !l.starts_with("PODTAP-ERROR")),
        "the guest reported errors: {text}"
    );
    assert_eq!(facts(&text, "QEMU"), ["stopped"], "{text}");

    // StopPodSandbox removed podtap's table from the (held) pod netns too.
    assert_eq!(
        facts(&text, "HELD-NFT"),
        Vec::<&str>::new(),
        "nftables tables left in the pod netns: {text}"
    );
    assert_cri_stopped_clean(&text, &work, &node);
    drop(node);
    assert_eq!(before, root_netns_fingerprint(), "root netns changed");
}
