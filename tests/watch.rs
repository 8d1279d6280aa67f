//! `podtap watch` against real kernel objects: interfaces added to
//! and removed from a pod after attach, in tc, bridge and macvtap mode; a restart and
//! a crash mid-add; detach and SIGTERM while it runs; hotplug through a
//! Cloud Hypervisor API stand-in, also for a NIC another attachment in the
//! netns builds later (the QEMU guest test is in tests/vm_exec.rs).
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use podtap_testkit::*;
use serde_json::Value;

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// Add a veth pair: `ifname` in the pod (198.19.<sub>.2/24), its peer in the node (.1).
fn add_late(pod: &Pod, ifname: &str, sub: u32) {
    let (p, q) = (&pod.pod.name, &pod.peer.name);
    sh(&format!(
        "ip -n {q} link add lt{sub}{ifname} type veth peer name {ifname} netns {p}"
    ));
    sh(&format!(
        "ip -n {q} addr add 198.19.{sub}.1/24 dev lt{sub}{ifname} && ip -n {q} link set lt{sub}{ifname} up"
    ));
    sh(&format!(
        "ip -n {p} addr add 198.19.{sub}.2/24 dev {ifname} && ip -n {p} link set {ifname} up"
    ));
}

/// Names of every link in `ns`.
fn link_names(ns: &Netns) -> Vec<String> {
    ns.ip_json("link show")
        .as_array()
        .expect("links")
        .iter()
        .filter_map(|l| l["ifname"].as_str().map(str::to_string))
        .collect()
}

fn checkpoint(state: &StateDir, id: &str) -> Value {
    let text = std::fs::read_to_string(state.0.join(format!("{id}.json"))).expect("checkpoint");
    serde_json::from_str(&text).expect("checkpoint JSON")
}

#[test]
fn late_interfaces_are_wired_and_undone_in_every_mode() {
    if !root_or_skip("late_interfaces_are_wired_and_undone_in_every_mode") {
        return;
    }
    for (mode, link_kind) in [("tc", "tun"), ("bridge", "bridge"), ("macvtap", "macvtap")] {
        let pod = Pod::dual_stack();
        settle(&pod.pod);
        let state = StateDir::new();
        let id = unique("watch");
        let before = snapshot(&pod.pod);
        attach_json(BIN, &state.0, &pod, &id, mode);
        let watch = Watch::start(BIN, &state.0, &id, &[]);
        let ready = watch.next("ready");
        assert_eq!(ready["interfaces"], serde_json::json!(["eth0"]), "{mode}");

        add_late(&pod, "net1", pod.net);
        let added = watch.next("added");
        assert_eq!(added["interface"], "net1", "{mode}: {added}");
        assert_eq!(added["wiring"], mode, "{mode}: {added}");
        assert!(added.get("device").is_none(), "no VMM, no device: {added}");
        let tap = added["tap"].as_str().expect("tap").to_string();
        // Built exactly as attach builds: TAP (or bridge) in the netns, recorded,
        // described, and `check` vouches for every object.
        assert!(link_names(&pod.pod).contains(&tap), "{mode}: {tap} missing");
        let node = added["nic"]["tap"]["device"].as_str().map(str::to_string);
        assert_eq!(
            node.is_some(),
            mode == "macvtap",
            "{mode}: device node {node:?}"
        );
        if let Some(node) = &node {
            assert!(Path::new(node).exists(), "{mode}: no device node {node}");
        }
        let kinds = pod.pod.ip_json("-d link show");
        assert!(
            kinds
                .as_array()
                .expect("links")
                .iter()
                .any(|l| l["linkinfo"]["info_kind"] == link_kind
                    && l["ifalias"].as_str().is_some_and(|a| a.contains(&id))),
            "{mode}: no marked {link_kind}"
        );
        let cp = checkpoint(&state, &id);
        assert_eq!(cp["late"], serde_json::json!([tap]), "{mode}");
        let desc = &cp["description"];
        assert_eq!(iface(desc, "net1")["tap"]["name"], tap.as_str());
        assert!(desc["attachment"]["revision"].as_u64() >= Some(1));
        let check = podtap_state(BIN, &state.0, &["check", "--id", &id]);
        assert!(check.status.success(), "{mode}: check: {}", stderr(&check));
        if mode == "tc" {
            assert_eq!(
                podtap_testkit::wiring::redirect_kind(&pod.pod, "net1", &tap),
                Some(podtap_testkit::wiring::default_redirect()),
                "{mode}: no redirect on net1"
            );
        }

        // The late interface leaves: its objects go, eth0's stay.
        pod.pod.ip("link del net1");
        let removed = watch.next("removed");
        assert_eq!(removed["tap"], tap.as_str());
        assert!(
            !link_names(&pod.pod).contains(&tap),
            "{mode}: {tap} left behind"
        );
        assert!(
            link_names(&pod.pod).contains(&"tap_eth0".to_string()),
            "{mode}: eth0's TAP went too"
        );
        if let Some(node) = &node {
            assert!(
                !Path::new(node).exists(),
                "{mode}: device node {node} left behind"
            );
        }
        let check = podtap_state(BIN, &state.0, &["check", "--id", &id]);
        assert!(
            check.status.success(),
            "{mode}: check after removal: {}",
            stderr(&check)
        );

        // Detach while watch runs: the netns is exactly as before, and watch ends.
        let out = podtap_state(BIN, &state.0, &["detach", "--id", &id]);
        assert!(out.status.success(), "{}", stderr(&out));
        watch.next("detached");
        assert_eq!(watch.exit_code(), Some(0));
        settle(&pod.pod);
        assert_eq!(before, snapshot(&pod.pod), "{mode}: the pod netns changed");
        let left: Vec<_> = std::fs::read_dir(&state.0)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{mode}: state dir left {left:?}");
    }
}

#[test]
fn a_restarted_watch_resumes_without_duplicates_and_undoes_a_half_built_nic() {
    if !root_or_skip("a_restarted_watch_resumes_without_duplicates_and_undoes_a_half_built_nic") {
        return;
    }
    let pod = Pod::dual_stack();
    let state = StateDir::new();
    let id = unique("watchre");
    attach_json(BIN, &state.0, &pod, &id, "tc");
    let watch = Watch::start(BIN, &state.0, &id, &[]);
    watch.next("ready");
    add_late(&pod, "net1", pod.net);
    let added = watch.next("added");
    let tap = added["tap"].as_str().expect("tap").to_string();
    // Killed outright: nothing runs on the way out.
    watch.signal("KILL");
    assert_eq!(watch.exit_code(), None);

    let again = Watch::start(BIN, &state.0, &id, &[]);
    let ready = again.next("ready");
    assert_eq!(ready["interfaces"], serde_json::json!(["eth0", "net1"]));
    let extra = again.drain(Duration::from_millis(500));
    assert!(
        extra.iter().all(|e| e["event"] != "added"),
        "the resumed watch added again: {extra:?}"
    );
    assert_eq!(
        taps(&pod.pod).iter().filter(|t| **t == tap).count(),
        1,
        "one TAP for net1"
    );
    again.signal("TERM");
    let stopped = again.next("stopped");
    assert_eq!(stopped["signal"], "SIGTERM");
    assert_eq!(again.exit_code(), Some(0));

    // A watch that died between recording a NIC and finishing it: the
    // checkpoint still says `pending`. The next watch undoes it (by name:
    // its ifindex was never recorded) and builds it afresh.
    let file = state.0.join(format!("{id}.json"));
    let mut cp = checkpoint(&state, &id);
    cp["pending"] = serde_json::json!([tap]);
    cp["late"] = serde_json::json!([]);
    cp["created"]
        .as_array_mut()
        .expect("created")
        .retain(|c| c["name"] != tap.as_str());
    std::fs::write(&file, serde_json::to_string(&cp).expect("JSON")).expect("write checkpoint");
    let before_ifindex = pod.pod.ip_json(&format!("link show {tap}"))[0]["ifindex"].clone();
    let third = Watch::start(BIN, &state.0, &id, &[]);
    let added = third.next("added");
    assert_eq!(added["interface"], "net1");
    let ready = third.next("ready");
    assert_eq!(ready["interfaces"], serde_json::json!(["eth0", "net1"]));
    let after_ifindex = pod.pod.ip_json(&format!("link show {tap}"))[0]["ifindex"].clone();
    assert_ne!(
        before_ifindex, after_ifindex,
        "the half-built TAP was not rebuilt"
    );
    assert_eq!(taps(&pod.pod).iter().filter(|t| **t == tap).count(), 1);
    let cp = checkpoint(&state, &id);
    assert_eq!(cp["pending"], Value::Null, "pending cleared: {cp}");
    let check = podtap_state(BIN, &state.0, &["check", "--id", &id]);
    assert!(check.status.success(), "check: {}", stderr(&check));
    third.signal("INT");
    assert_eq!(third.next("stopped")["signal"], "SIGINT");
    let out = podtap_state(BIN, &state.0, &["detach", "--id", &id]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(taps(&pod.pod).is_empty(), "detach left TAPs");
}

#[test]
fn watch_refuses_bad_input_with_documented_codes() {
    if !root_or_skip("watch_refuses_bad_input_with_documented_codes") {
        return;
    }
    let state = StateDir::new();
    let unknown = podtap_state(BIN, &state.0, &["watch", "--id", "nobody"]);
    assert_eq!(exit_code(&unknown), 14, "{}", stderr(&unknown));
    assert_eq!(
        stderr(&unknown).trim().lines().count(),
        1,
        "{}",
        stderr(&unknown)
    );
    let bad = podtap_state(BIN, &state.0, &["watch", "--id", "../etc"]);
    assert_eq!(exit_code(&bad), 7, "{}", stderr(&bad));

    let pod = Pod::dual_stack();
    let id = unique("watch2");
    attach_json(BIN, &state.0, &pod, &id, "tc");
    let first = Watch::start(BIN, &state.0, &id, &[]);
    first.next("ready");
    let second = podtap_state(BIN, &state.0, &["watch", "--id", &id]);
    assert_eq!(exit_code(&second), 9, "{}", stderr(&second));
    assert!(
        stderr(&second).contains("another watch follows it"),
        "{}",
        stderr(&second)
    );
    first.signal("TERM");
    assert_eq!(first.exit_code(), Some(0));
    let out = podtap_state(BIN, &state.0, &["detach", "--id", &id]);
    assert!(out.status.success());
}

/// A stand-in for Cloud Hypervisor's API (no KVM here): answers vm.info with
/// the NICs added so far, records vm.add-net (body and the TAP names of the
/// fds that came with it as SCM_RIGHTS) and vm.remove-device, one JSON line each.
const CH_STANDIN: &str = r#"
import json, os, re, socket, sys
path, out = sys.argv[1], sys.argv[2]
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(4)
srv.settimeout(60)
nets = {}
log = open(out, "w")
while True:
    conn, _ = srv.accept()
    msg, fds, _, _ = socket.recv_fds(conn, 65536, 16)
    while b"\r\n\r\n" not in msg:
        msg += conn.recv(65536)
    head, _, body = msg.partition(b"\r\n\r\n")
    m = re.search(rb"(?i)content-length: *(\d+)", head)
    length = int(m.group(1)) if m else 0
    while len(body) < length:
        body += conn.recv(65536)
    line = head.split(b"\r\n")[0].decode()
    req = json.loads(body) if body else None
    taps = []
    for fd in fds:
        info = open(f"/proc/self/fdinfo/{fd}").read()
        t = re.search(r"iff:\s*(\S+)", info)
        taps.append(t.group(1) if t else "not-a-tap")
        os.close(fd)
    log.write(json.dumps({"request": line, "body": req, "fds": taps}) + "\n")
    log.flush()
    if "vm.info" in line:
        reply = json.dumps({"config": {"net": [{"id": i} for i in nets]}}).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(reply), reply))
    elif "vm.add-net" in line:
        nets[req["id"]] = req
        reply = json.dumps({"id": req["id"], "bdf": "0000:00:06.0"}).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(reply), reply))
    elif "vm.remove-device" in line:
        nets.pop(req["id"], None)
        conn.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
    else:
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    conn.close()
"#;

#[test]
fn watch_hotplugs_through_the_cloud_hypervisor_api() {
    let test = "watch_hotplugs_through_the_cloud_hypervisor_api";
    if !root_or_skip(test) || !tool_or_skip(test, "python3") {
        return;
    }
    let work = TempDir::new();
    let (mut standin, sock, log) = start_standin(&work);

    // DAD off: its address events would be news to the watch, not rest.
    let pod = Pod::stable_dual_stack();
    let state = StateDir::new();
    let id = unique("watchch");
    attach_json(BIN, &state.0, &pod, &id, "tc");
    let sock_arg = sock.display().to_string();
    let watch = Watch::start(BIN, &state.0, &id, &["--cloud-hypervisor-api", &sock_arg]);
    watch.next("ready");
    // At rest a watch asks the VMM nothing: no round without news. (The
    // kernel's last announcements about attach's own objects may still wake
    // it once: rest begins after them.)
    let logged = || std::fs::read_to_string(&log).map_or(0, |t| t.lines().count());
    std::thread::sleep(Duration::from_millis(1500));
    let at_ready = logged();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        logged(),
        at_ready,
        "an idle watch called the VMM: {:?}",
        std::fs::read_to_string(&log)
    );
    add_late(&pod, "net1", pod.net);
    let added = watch.next("added");
    assert_eq!(added["device"], "podtap-tap_net1", "{added}");
    let mac = added["nic"]["guest_mac"]
        .as_str()
        .expect("guest MAC")
        .to_string();
    pod.pod.ip("link del net1");
    let removed = watch.next("removed");
    assert_eq!(removed["device"], "podtap-tap_net1", "{removed}");

    watch.signal("TERM");
    assert_eq!(watch.exit_code(), Some(0));
    let _ = standin.kill();
    let _ = standin.wait();

    let requests = requests(&log);
    let add = requests
        .iter()
        .find(|r| r["request"] == "PUT /api/v1/vm.add-net HTTP/1.1")
        .unwrap_or_else(|| panic!("no vm.add-net in {requests:?}"));
    assert_eq!(add["body"]["id"], "podtap-tap_net1");
    assert_eq!(add["body"]["mac"], mac.as_str());
    assert_eq!(add["body"]["num_queues"], 2);
    assert_eq!(
        add["fds"],
        serde_json::json!(["tap_net1"]),
        "the fd is the TAP's queue"
    );
    let remove = requests
        .iter()
        .position(|r| r["request"] == "PUT /api/v1/vm.remove-device HTTP/1.1")
        .unwrap_or_else(|| panic!("no vm.remove-device in {requests:?}"));
    assert_eq!(requests[remove]["body"]["id"], "podtap-tap_net1");
    let out = podtap_state(BIN, &state.0, &["detach", "--id", &id]);
    assert!(out.status.success());
}

/// Start [`CH_STANDIN`] in `work`: the process, its socket and its request log.
fn start_standin(work: &TempDir) -> (Child, std::path::PathBuf, std::path::PathBuf) {
    let sock = work.path().join("ch.sock");
    let log = work.path().join("requests.jsonl");
    let standin = Command::new("python3")
        .args(["-c", CH_STANDIN])
        .arg(&sock)
        .arg(&log)
        .spawn()
        .expect("start the API stand-in");
    assert!(poll(
        Duration::from_secs(10),
        Duration::from_millis(20),
        || sock.exists()
    ));
    (standin, sock, log)
}

/// The requests the stand-in logged.
fn requests(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .expect("request log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}

#[test]
fn a_network_a_later_cni_add_attaches_joins_the_vm_and_leaves_on_del() {
    let test = "a_network_a_later_cni_add_attaches_joins_the_vm_and_leaves_on_del";
    if !root_or_skip(test) || !tool_or_skip(test, "python3") {
        return;
    }
    let work = TempDir::new();
    let (mut standin, sock, log) = start_standin(&work);
    let pod = Pod::dual_stack();
    let state = StateDir::new();
    // As the CNI door does: one attachment per network, each limited to its interface.
    let first = unique("cnifirst");
    let out = attach(BIN, &state.0, &pod, &first, &["--interfaces", "eth0"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let sock_arg = sock.display().to_string();
    let watch = Watch::start(
        BIN,
        &state.0,
        &first,
        &["--cloud-hypervisor-api", &sock_arg],
    );
    watch.next("ready");

    // The second network arrives, and its CNI ADD attaches it under its own id.
    add_late(&pod, "net1", pod.net);
    let second = unique("cnisecond");
    let out = attach(BIN, &state.0, &pod, &second, &["--interfaces", "net1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plugged = watch.next("plugged");
    assert_eq!(plugged["id"], second.as_str(), "{plugged}");
    assert_eq!(plugged["interface"], "net1", "{plugged}");
    assert_eq!(plugged["device"], "podtap-tap_net1", "{plugged}");
    // watch built nothing of its own for net1: the first attachment is limited to eth0.
    assert_eq!(checkpoint(&state, &first)["late"], Value::Null);
    assert_eq!(
        taps(&pod.pod).iter().filter(|t| *t == "tap_net1").count(),
        1
    );

    // Its DEL: the NIC leaves the VM.
    let out = podtap_state(BIN, &state.0, &["detach", "--id", &second]);
    assert!(out.status.success(), "{}", stderr(&out));
    let unplugged = watch.next("unplugged");
    assert_eq!(unplugged["device"], "podtap-tap_net1");
    watch.signal("TERM");
    assert_eq!(watch.exit_code(), Some(0));
    let _ = standin.kill();
    let _ = standin.wait();
    let log = requests(&log);
    let add = log
        .iter()
        .find(|r| r["request"] == "PUT /api/v1/vm.add-net HTTP/1.1")
        .unwrap_or_else(|| panic!("no vm.add-net in {log:?}"));
    assert_eq!(add["fds"], serde_json::json!(["tap_net1"]));
    assert!(
        log.iter()
            .any(|r| r["request"] == "PUT /api/v1/vm.remove-device HTTP/1.1"
                && r["body"]["id"] == "podtap-tap_net1"),
        "no vm.remove-device in {log:?}"
    );
    let out = podtap_state(BIN, &state.0, &["detach", "--id", &first]);
    assert!(out.status.success());
    assert!(taps(&pod.pod).is_empty());
}

/// With the netns's `nexthop_compat_mode` at 0 the kernel announces no
/// route when the next-hop object it uses changes: the watch follows the
/// objects too, and reports the change of the pod's tables.
#[test]
fn a_changed_next_hop_object_is_reported_with_compat_mode_off() {
    let test = "a_changed_next_hop_object_is_reported_with_compat_mode_off";
    if !net_tools_or_skip(test) {
        return;
    }
    let pod = Pod::dual_stack();
    let (p, sub) = (&pod.pod.name, pod.net);
    if !sh_ok(&format!(
        "ip -n {p} nexthop add id 5 via 198.18.{sub}.1 dev eth0"
    )) {
        eprintln!("SKIP {test}: the kernel has no next-hop objects");
        return;
    }
    sh(&format!(
        "ip netns exec {p} sysctl -qw net.ipv4.nexthop_compat_mode=0 && \
         ip -n {p} route add 198.19.1.0/24 nhid 5"
    ));
    let state = StateDir::new();
    let id = unique("nhwatch");
    attach_json(BIN, &state.0, &pod, &id, "tc");
    let watch = Watch::start(BIN, &state.0, &id, &[]);
    watch.next("ready");
    // Nothing else may wake the watch: the links' addresses settled, and
    // what their settling announced is read.
    settle(&pod.pod);
    settle_taps(&pod.pod);
    watch.drain(Duration::from_millis(500));
    sh(&format!(
        "ip -n {p} nexthop replace id 5 via 198.18.{sub}.3 dev eth0"
    ));
    let changed = watch.next_within("changed", 5);
    assert_eq!(changed["interfaces"], serde_json::json!([]), "{changed}");
    let o = detach(BIN, &state, &id);
    assert_eq!(exit_code(&o), 0, "detach: {}", stderr(&o));
}
