//! End-to-end VM tests of the fd handover and hotplug (root + QEMU): the
//! launchers of KVM-only VMMs (with stand-ins), `podtap exec` and its
//! documented failures, a macvtap guest whose queues come through exec, and
//! `podtap watch` hotplugging a late interface into a running guest.
//! See tests/vm.rs for the boots through the VMM launchers.

use std::path::Path;
use std::process::{Command, Stdio};

use podtap_testkit::vm::{
    address_of, assert_line, assert_no_errors, boot_live, boot_reachable, example, mac_of,
    nic_line, reach_in, vm_prerequisites,
};
use podtap_testkit::{
    iface, podtap_cmd, podtap_ok, root_or_skip, settle, settled_snapshot, sh, stderr, stdout, taps,
    tool_or_skip, unique, Netns, Pod, StateDir, TempDir, Watch,
};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// A stand-in for Cloud Hypervisor's API server: logs each request line, JSON
/// body and the TAP names of the fds that came with it (SCM_RIGHTS), answers
/// 204, and exits after vm.boot.
const MOCK_CH_API: &str = r#"
import json, os, re, socket, sys
path, out = sys.argv[1], sys.argv[2]
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(4)
srv.settimeout(120)  # never outlive a launcher that died half-way
log = open(out, "w")
while True:
    conn, _ = srv.accept()
    msg, fds, _, _ = socket.recv_fds(conn, 65536, 16)
    while b"\r\n\r\n" not in msg:
        msg += conn.recv(65536)
    head, _, body = msg.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    while len(body) < length:
        body += conn.recv(65536)
    taps = []
    for fd in fds:
        info = open(f"/proc/self/fdinfo/{fd}").read()
        m = re.search(r"iff:\s*(\S+)", info)
        taps.append(m.group(1) if m else os.readlink(f"/proc/self/fd/{fd}"))
        os.close(fd)
    line = head.split(b"\r\n")[0].decode()
    log.write(json.dumps({"request": line, "body": json.loads(body) if body else None, "fds": taps}) + "\n")
    log.flush()
    conn.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
    conn.close()
    if "vm.boot" in line:
        break
"#;

/// A stand-in VMM binary: prints its netns, its argv (one per line) and its open fds.
fn fake_vmm(dir: &Path, name: &str) -> String {
    let path = dir.join(name);
    std::fs::write(
        &path,
        "#!/bin/sh\necho \"NETNS $(readlink /proc/self/ns/net)\"\n\
         for a in \"$@\"; do echo \"ARG $a\"; done\n\
         for f in /proc/self/fd/*; do echo \"FD ${f##*/} $(readlink \"$f\")\"; done\n\
         [ \"$1\" = --no-api ] && cat \"$3\"\nexit 0\n",
    )
    .expect("write fake VMM");
    sh(&format!("chmod +x {}", path.display()));
    path.display().to_string()
}

/// The launchers that need KVM (Cloud Hypervisor CLI and API, Firecracker)
/// run against stand-ins: right netns, right arguments, real TAP fds.
#[test]
fn kvm_only_launchers_hand_over_the_taps() {
    let test = "kvm_only_launchers_hand_over_the_taps";
    if !root_or_skip(test) || !tool_or_skip(test, "jq") || !tool_or_skip(test, "python3") {
        return;
    }
    let pod = podtap_testkit::Pod::dual_stack();
    let state = StateDir::new();
    let tmp = TempDir::new();
    let dir = tmp.path();
    let pod_netns = pod
        .pod
        .exec("readlink /proc/self/ns/net")
        .trim()
        .to_string();
    let own_netns = sh("readlink /proc/self/ns/net").trim().to_string();
    let run = |script: &str, env: &[(&str, &str)], args: &[&str]| -> String {
        let out = Command::new(example(script))
            .args(args)
            .env("PODTAP", BIN)
            .env("PODTAP_STATE_DIR", &state.0)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .expect("run launcher");
        assert!(
            out.status.success(),
            "{script}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    };

    // Single queue: Firecracker's only mode.
    let id = unique("vmfake");
    let desc: serde_json::Value = serde_json::from_str(&podtap_ok(
        BIN,
        &state.0,
        &["attach", "--netns", &pod.pod.path_str(), "--id", &id],
    ))
    .expect("attach prints JSON");
    let tap = iface(&desc, "eth0")["tap"]["name"]
        .as_str()
        .expect("tap name")
        .to_string();
    let mac = mac_of(&desc, "eth0");

    let fc = fake_vmm(dir, "firecracker");
    let config = dir.join("fc.json").display().to_string();
    let out = run(
        "firecracker-config.sh",
        &[("FIRECRACKER", &fc)],
        &[&id, "/vmlinux", "/initrd", &config],
    );
    assert!(out.contains(&format!("NETNS {pod_netns}")), "{out}");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).expect("config")).expect("JSON");
    assert_eq!(
        config["network-interfaces"],
        serde_json::json!([{"iface_id": "net0", "host_dev_name": tap, "guest_mac": mac}])
    );
    assert_eq!(config["boot-source"]["kernel_image_path"], "/vmlinux");
    assert!(config["boot-source"]["boot_args"]
        .as_str()
        .expect("boot_args")
        .contains(&format!("podtap.nic={mac},1500,")));

    let ch = fake_vmm(dir, "cloud-hypervisor");
    let out = run(
        "cloud-hypervisor-cli.sh",
        &[("CLOUD_HYPERVISOR", &ch)],
        &[&id, "/vmlinuz", "/initrd"],
    );
    assert!(out.contains(&format!("NETNS {pod_netns}")), "{out}");
    assert!(
        out.contains(&format!(
            "ARG tap={tap},mac={mac},mtu=1500,num_queues=2,id=net0"
        )),
        "{out}"
    );
    podtap_ok(BIN, &state.0, &["detach", "--id", &id]);

    // Two queues, fd handover: Cloud Hypervisor CLI with FDS=1, then the API.
    let id = unique("vmfake");
    podtap_ok(
        BIN,
        &state.0,
        &[
            "attach",
            "--netns",
            &pod.pod.path_str(),
            "--id",
            &id,
            "--queues",
            "2",
        ],
    );
    let out = run(
        "cloud-hypervisor-cli.sh",
        &[("CLOUD_HYPERVISOR", &ch), ("FDS", "1")],
        &[&id, "/vmlinuz", "/initrd"],
    );
    assert!(out.contains(&format!("NETNS {own_netns}")), "{out}");
    assert!(out.contains("ARG boot=2"), "{out}");
    let net = out
        .lines()
        .find_map(|l| l.strip_prefix("ARG fd=["))
        .unwrap_or_else(|| panic!("no --net fd=[..] value: {out}"));
    assert!(
        net.ends_with(&format!("],mac={mac},num_queues=4,id=net0")),
        "{net}"
    );
    let fds: Vec<&str> = net.split(']').next().unwrap_or("").split(',').collect();
    assert_eq!(fds.len(), 2, "{net}");
    for fd in fds {
        assert!(
            out.contains(&format!("FD {fd} /dev/net/tun")),
            "fd {fd} is not an inherited TAP queue: {out}"
        );
    }

    let api = dir.join("api.sock");
    let log = dir.join("api.log");
    let mut server = Command::new("python3")
        .args(["-c", MOCK_CH_API])
        .arg(&api)
        .arg(&log)
        .spawn()
        .expect("start the stand-in API server");
    for _ in 0..100 {
        if log.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = podtap_cmd(BIN, &state.0)
        .args([
            "exec",
            "--id",
            &id,
            "--vmm",
            "cloud-hypervisor",
            "--",
            "python3",
        ])
        .arg(example("cloud-hypervisor-api.py"))
        .args(["--no-start", "--api-socket"])
        .arg(&api)
        .args(["--kernel", "/vmlinuz", "--initramfs", "/initrd"])
        .stdin(Stdio::null())
        .output()
        .expect("run cloud-hypervisor-api.py");
    if !out.status.success() {
        // It will never send vm.boot: don't wait for the server to see one.
        let _ = server.kill();
    }
    let served = server.wait().expect("stand-in API server");
    assert!(
        out.status.success() && served.success(),
        "cloud-hypervisor-api.py: {}{}",
        stdout(&out),
        stderr(&out)
    );
    let requests: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .expect("API log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("log line"))
        .collect();
    let lines: Vec<&str> = requests
        .iter()
        .map(|r| r["request"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        lines,
        [
            "PUT /api/v1/vm.create HTTP/1.1",
            "PUT /api/v1/vm.add-net HTTP/1.1",
            "PUT /api/v1/vm.boot HTTP/1.1"
        ]
    );
    assert_eq!(requests[0]["body"]["cpus"]["boot_vcpus"], 2);
    assert_eq!(requests[0]["body"]["payload"]["kernel"], "/vmlinuz");
    assert_eq!(requests[0]["fds"], serde_json::json!([]));
    assert_eq!(
        requests[1]["body"],
        serde_json::json!({"mac": mac, "num_queues": 4, "id": "net0"})
    );
    assert_eq!(requests[1]["fds"], serde_json::json!([tap, tap]));
    podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
}

/// `podtap exec` failures before the exec keep podtap's exit codes; a failed
/// exec itself exits 1 with one line.
#[test]
fn exec_reports_failures_with_documented_codes() {
    let test = "exec_reports_failures_with_documented_codes";
    if !root_or_skip(test) {
        return;
    }
    let pod = podtap_testkit::Pod::dual_stack();
    let state = StateDir::new();
    let id = unique("vmexec");
    let code = |args: &[&str]| {
        let out = podtap_cmd(BIN, &state.0)
            .args(args)
            .output()
            .expect("run podtap");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        (out.status.code(), err)
    };
    let (c, err) = code(&["exec", "--id", &id, "--vmm", "qemu", "--", "true"]);
    assert_eq!(c, Some(14), "{err}");
    podtap_ok(
        BIN,
        &state.0,
        &["attach", "--netns", &pod.pod.path_str(), "--id", &id],
    );
    let (c, err) = code(&[
        "exec",
        "--id",
        &id,
        "--vmm",
        "qemu",
        "--",
        "/nonexistent/podtap-vmm",
    ]);
    assert_eq!(c, Some(1), "{err}");
    assert!(err.contains("exec /nonexistent/podtap-vmm"), "{err}");
    if !Path::new("/dev/vhost-net").exists() {
        let (c, err) = code(&[
            "exec", "--id", &id, "--vmm", "qemu", "--vhost", "--", "true",
        ]);
        assert_eq!(c, Some(13), "{err}");
        assert!(err.contains("/dev/vhost-net"), "{err}");
    }
    // --enter-netns really enters: the command sees the pod's interfaces.
    let out = podtap_cmd(BIN, &state.0)
        .args([
            "exec",
            "--id",
            &id,
            "--enter-netns",
            "--",
            "cat",
            "/proc/net/dev",
        ])
        .output()
        .expect("run podtap");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("eth0:"), "{}", stdout(&out));
    // A TAP replaced by another of the same name is not handed over.
    let desc: serde_json::Value = serde_json::from_str(&podtap_ok(
        BIN,
        &state.0,
        &["attach", "--netns", &pod.pod.path_str(), "--id", &id],
    ))
    .expect("description");
    let tap = desc["interfaces"]
        .as_array()
        .and_then(|a| a.iter().find_map(|i| i["tap"]["name"].as_str()))
        .expect("a TAP")
        .to_string();
    pod.pod.ip(&format!("link del {tap}"));
    pod.pod
        .ip(&format!("tuntap add dev {tap} mode tap vnet_hdr"));
    let (c, err) = code(&["exec", "--id", &id, "--vmm", "qemu", "--", "true"]);
    assert_eq!(c, Some(12), "{err}");
    assert!(err.contains("replaced"), "{err}");
    pod.pod.ip(&format!("link del {tap}"));
    // A pod netns replaced under the same path is refused.
    sh(&format!(
        "ip netns del {0} && ip netns add {0}",
        pod.pod.name
    ));
    let (c, err) = code(&["exec", "--id", &id, "--enter-netns", "--", "true"]);
    assert_eq!(c, Some(12), "{err}");
    assert!(err.contains("replaced"), "{err}");
    let _ = podtap_cmd(BIN, &state.0)
        .args(["detach", "--id", &id])
        .output();
}

/// macvtap mode end to end: a dual-stack pod with MTU 9000; `podtap exec
/// --vmm qemu` hands the macvtap's queues to the guest (1 and 2 queues); the
/// guest pings out (IPv4, IPv6, 8000-byte frames) and the node reaches in on
/// both families, answered from the guest's MAC; detach restores the netns.
#[test]
fn macvtap_guest_gets_its_queues_through_exec_both_ways_with_mtu_9000() {
    let test = "macvtap_guest_gets_its_queues_through_exec_both_ways_with_mtu_9000";
    if !vm_prerequisites(test) {
        return;
    }
    let node = Netns::new("vmn");
    let pod = Netns::new("vmp");
    let state = StateDir::new();
    let (p, q) = (&pod.name, &node.name);
    let s = std::process::id() % 200 + 20;
    for ns in [&pod, &node] {
        ns.exec("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");
    }
    sh(&format!(
        "ip -n {q} link add jumbo mtu 9000 type veth peer name eth0 mtu 9000 netns {p}"
    ));
    node.ip("link set jumbo up");
    pod.ip("link set eth0 up");
    let (peer4, peer6) = (format!("198.18.{s}.1"), format!("2001:db8:6:{s:x}::1"));
    node.ip(&format!("addr add {peer4}/24 dev jumbo"));
    node.ip(&format!("addr add {peer6}/64 dev jumbo nodad"));
    pod.ip(&format!("addr add 198.18.{s}.2/24 dev eth0"));
    pod.ip(&format!("addr add 2001:db8:6:{s:x}::2/64 dev eth0 nodad"));
    settle(&pod);
    settle(&node);

    let append = format!("podtap.ping={peer4},{peer6} podtap.pingbig=8000:{peer4} podtap.hold=12");
    for queues in ["1", "2"] {
        let id = unique("vmmvt");
        let before = settled_snapshot(&pod);
        let desc: serde_json::Value = serde_json::from_str(&podtap_ok(
            BIN,
            &state.0,
            &[
                "attach",
                "--netns",
                &pod.path_str(),
                "--id",
                &id,
                "--mode",
                "macvtap",
                "--queues",
                queues,
            ],
        ))
        .expect("attach prints JSON");
        assert_eq!(iface(&desc, "eth0")["wiring"], "macvtap");
        let mac = mac_of(&desc, "eth0");
        let inbound = [
            address_of(&desc, "eth0", "inet"),
            address_of(&desc, "eth0", "inet6"),
        ];
        // qemu-fds.sh runs `podtap exec --vmm qemu`, which opens the macvtap's node.
        let console = boot_reachable(BIN, &example("qemu-fds.sh"), &state.0, &id, &append, || {
            for ip in &inbound {
                reach_in(&node, ip, &mac, 5);
            }
        });
        for target in [&peer4, &peer6] {
            assert_line(&console, &format!("PODTAP-PING OK {target}"));
        }
        assert_line(&console, &format!("PODTAP-PINGBIG OK 8000 {peer4}"));
        assert_no_errors(&console);
        let line = nic_line(&console, &mac);
        assert!(
            line.ends_with(&format!(" mtu=9000 queues={queues}")),
            "{line}"
        );
        podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
        assert_eq!(
            before,
            settled_snapshot(&pod),
            "macvtap ({queues} queue(s)): detach left the pod netns changed"
        );
    }
}

#[test]
fn watch_hotplugs_a_late_interface_into_the_running_guest_and_unplugs_it() {
    let test = "watch_hotplugs_a_late_interface_into_the_running_guest_and_unplugs_it";
    if !vm_prerequisites(test) {
        return;
    }
    let pod = Pod::dual_stack();
    let state = StateDir::new();
    let work = TempDir::new();
    let qmp = work.path().join("qmp.sock");
    let id = unique("vmwatch");
    let before = settled_snapshot(&pod.pod);
    let desc: serde_json::Value = serde_json::from_str(&podtap_ok(
        BIN,
        &state.0,
        &["attach", "--netns", &pod.pod.path_str(), "--id", &id],
    ))
    .expect("attach prints JSON");
    let n = pod.net;
    let peer4 = format!("198.18.{n}.1");
    // The late network: 198.19.<n>.0/24, pod side .2 with a MAC chosen here
    // (the guest is told which NIC to wait for and what to give it).
    let (late_ip, late_peer) = (format!("198.19.{n}.2"), format!("198.19.{n}.1"));
    let late_mac = format!("02:5a:{:02x}:{n:02x}:00:02", std::process::id() % 256);
    let append = format!(
        "podtap.ping={peer4} podtap.hold=60 podtap.timeout=140 podtap.late={late_mac},1500,{late_ip}/24,{late_peer}"
    );
    let qmp_arg = format!("unix:{},server=on,wait=off", qmp.display());
    let (p, q) = (&pod.pod.name, &pod.peer.name);
    let console = boot_live(
        BIN,
        &example("qemu-fds.sh"),
        &state.0,
        &id,
        &append,
        &["-qmp", &qmp_arg],
        |live| {
            let qmp = qmp.display().to_string();
            let watch = Watch::start(BIN, &state.0, &id, &["--qmp", &qmp]);
            let ready = watch.next_within("ready", 30);
            assert_eq!(ready["interfaces"], serde_json::json!(["eth0"]));

            // A second network arrives in the pod after the VM booted.
            sh(&format!(
                "ip -n {q} link add late{n} type veth peer name net1 address {late_mac} netns {p}"
            ));
            sh(&format!(
                "ip -n {q} addr add {late_peer}/24 dev late{n} && ip -n {q} link set late{n} up"
            ));
            sh(&format!(
                "ip -n {p} addr add {late_ip}/24 dev net1 && ip -n {p} link set net1 up"
            ));
            let added = watch.next_within("added", 30);
            assert_eq!(added["interface"], "net1", "{added}");
            assert_eq!(added["device"], "podtap-tap_net1", "{added}");
            assert_eq!(added["nic"]["guest_mac"], late_mac.as_str(), "{added}");
            let nic = live
                .wait_for("PODTAP-LATE-NIC", std::time::Duration::from_secs(60))
                .expect("the hotplugged NIC never appeared in the guest");
            assert!(nic.contains(&late_mac), "{nic}");
            let ping = live
                .wait_for("PODTAP-LATE-PING", std::time::Duration::from_secs(60))
                .expect("the guest never pinged through the new NIC");
            assert_eq!(ping, format!("PODTAP-LATE-PING OK {late_peer}"));
            live.wait_for("PODTAP-LATE-UP", std::time::Duration::from_secs(10))
                .expect("PODTAP-LATE-UP");
            // Both directions: the late network reaches the guest too.
            reach_in(&pod.peer, &late_ip, &late_mac, 5);

            // The network leaves: the device leaves the guest, the TAP the pod.
            pod.pod.ip("link del net1");
            let removed = watch.next_within("removed", 60);
            assert_eq!(removed["interface"], "net1", "{removed}");
            assert_eq!(removed["device"], "podtap-tap_net1", "{removed}");
            let gone = live
                .wait_for("PODTAP-LATE-GONE", std::time::Duration::from_secs(60))
                .expect("the unplugged NIC never left the guest");
            assert!(gone.contains(&late_mac), "{gone}");
            assert!(
                !taps(&pod.pod).iter().any(|t| t == "tap_net1"),
                "the late TAP is still in the pod netns"
            );

            watch.signal("TERM");
            let stopped = watch.next_within("stopped", 10);
            assert_eq!(stopped["signal"], "SIGTERM");
            assert_eq!(watch.exit_code(), Some(0), "watch did not exit 0");
        },
    );
    assert_line(&console, &format!("PODTAP-PING OK {peer4}"));
    assert_no_errors(&console);
    assert!(desc["interfaces"].is_array());
    podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
    assert_eq!(
        before,
        settled_snapshot(&pod.pod),
        "detach after watch left the pod netns changed"
    );
}
