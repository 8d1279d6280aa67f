//! podtap as a hostile pod author, image or caller would try it
//! (`docs/security.md`): a symlink swapped under the hook's output, pod
//! options the node did not allow, 64 MiB on stdin, interface names no
//! renderer can carry, and `CNI_COMMAND` beside a subcommand.
//!
//! The stdin and `CNI_COMMAND` tests need no root; the others skip without it.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use podtap_testkit::{oci_hook, podtap_cmd, settled_snapshot, taps, Chain, Netns, Pod, TempDir};
use serde_json::{json, Value};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// The OCI state of container `id` in `bundle` with `annotations`.
fn oci_state(id: &str, bundle: &Path, annotations: Value) -> String {
    json!({ "ociVersion": "1.0.2", "id": id, "status": "creating", "bundle": bundle,
            "annotations": annotations })
    .to_string()
}

/// A bundle whose config.json joins `netns`.
fn bundle_for(netns: &str) -> TempDir {
    let bundle = TempDir::new();
    let config = json!({ "linux": { "namespaces": [{ "type": "network", "path": netns }] } });
    std::fs::write(bundle.path().join("config.json"), config.to_string()).expect("config.json");
    bundle
}

/// Assert exit `code` and exactly one `podtap: error:` line on stderr; return it.
fn one_line_error(o: &Output, code: i32, what: &str) -> String {
    let err = podtap_testkit::stderr(o);
    assert_eq!(o.status.code(), Some(code), "{what}: stderr {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err:?}");
    assert!(err.starts_with("podtap: error: "), "{what}: {err}");
    err
}

/// The names in a directory, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A process that exchanges `a` and `b` in `dir` (renameat2 RENAME_EXCHANGE)
/// as fast as it can until killed.
fn swapper(dir: &Path, pairs: &[(&str, &str)]) -> std::process::Child {
    let pairs: Vec<String> = pairs
        .iter()
        .map(|(a, b)| format!("(b'{a}', b'{b}')"))
        .collect();
    let script = format!(
        "import ctypes, os\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         pairs = [{}]\n\
         while True:\n\
         \x20   for a, b in pairs:\n\
         \x20       if libc.renameat2(-100, a, -100, b, 2) != 0:\n\
         \x20           raise OSError(ctypes.get_errno(), 'renameat2')\n",
        pairs.join(", ")
    );
    Command::new("python3")
        .args(["-c", &script])
        .current_dir(dir)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn the swapper")
}

#[test]
fn hook_output_never_lands_outside_the_bundle_while_a_symlink_is_swapped() {
    let test = "hook_output_never_lands_outside_the_bundle_while_a_symlink_is_swapped";
    if !podtap_testkit::net_tools_or_skip(test) || !podtap_testkit::tool_or_skip(test, "python3") {
        return;
    }
    let pod = Pod::dual_stack();
    let state = TempDir::new();
    let bundle = bundle_for(&pod.pod.path_str());
    let outside = TempDir::new();
    std::fs::write(outside.path().join("out.json"), "ORIGINAL").expect("victim");
    std::fs::write(outside.path().join("victim.json"), "ORIGINAL").expect("victim");
    // `d` is a directory and `d_alt` a symlink to the outside dir; in `leaf`,
    // `out.json` is a file and `alt` a symlink to a file outside. The swapper
    // exchanges each pair without pause.
    let b = bundle.path();
    std::fs::create_dir_all(b.join("d")).expect("d");
    std::os::unix::fs::symlink(outside.path(), b.join("d_alt")).expect("d_alt");
    std::fs::create_dir_all(b.join("leaf")).expect("leaf");
    std::fs::write(b.join("leaf/out.json"), "{}").expect("leaf/out.json");
    std::os::unix::fs::symlink(outside.path().join("victim.json"), b.join("leaf/alt"))
        .expect("leaf/alt");
    let mut swap = swapper(b, &[("d", "d_alt"), ("leaf/out.json", "leaf/alt")]);
    let (mut written, mut refused) = (0, 0);
    for n in 0..60 {
        let rel = if n % 2 == 0 {
            "d/out.json"
        } else {
            "leaf/out.json"
        };
        let id = podtap_testkit::unique("swap");
        let st = oci_state(&id, b, json!({ "io.podtap.output": rel }));
        let o = oci_hook(BIN, state.path(), "attach", &[], &st);
        if o.status.success() {
            written += 1;
            assert!(oci_hook(BIN, state.path(), "detach", &[], &st)
                .status
                .success());
        } else {
            // Refused before anything was built: exit 13, one line naming the symlink.
            let err = one_line_error(&o, 13, rel);
            assert!(err.contains("is a symlink"), "{err}");
            refused += 1;
        }
        assert!(taps(&pod.pod).is_empty(), "run {n} left a TAP");
    }
    assert!(
        swap.try_wait().expect("swapper").is_none(),
        "the swapper died early"
    );
    let _ = swap.kill();
    let _ = swap.wait();
    eprintln!("{test}: {written} written beneath the bundle, {refused} refused");
    assert_eq!(listing(outside.path()), ["out.json", "victim.json"]);
    for f in ["out.json", "victim.json"] {
        let text = std::fs::read_to_string(outside.path().join(f)).expect("read victim");
        assert_eq!(text, "ORIGINAL", "{f} outside the bundle was written");
    }
    // What was written is a whole description, in the bundle's own directory.
    let real = if b.join("d").is_symlink() {
        "d_alt"
    } else {
        "d"
    };
    for f in listing(&b.join(real)) {
        assert_eq!(f, "out.json", "a temp file was left in the bundle");
        let desc: Value =
            serde_json::from_slice(&std::fs::read(b.join(real).join(&f)).expect("read"))
                .expect("a whole JSON description");
        assert_eq!(desc["schema"], "podtap/v2");
    }
}

#[test]
fn a_pod_annotation_asking_for_a_foreign_tap_owner_is_refused_unless_the_node_allows_it() {
    let test =
        "a_pod_annotation_asking_for_a_foreign_tap_owner_is_refused_unless_the_node_allows_it";
    if !podtap_testkit::net_tools_or_skip(test) {
        return;
    }
    let pod = Pod::dual_stack();
    let state = TempDir::new();
    let bundle = bundle_for(&pod.pod.path_str());
    let id = podtap_testkit::unique("owner");
    let st = oci_state(
        &id,
        bundle.path(),
        json!({ "io.podtap.tap-owner": "4242:4343" }),
    );
    let before = settled_snapshot(&pod.pod);
    let o = oci_hook(BIN, state.path(), "attach", &[], &st);
    let err = one_line_error(&o, 6, "foreign owner under the default policy");
    assert!(
        err.contains("io.podtap.tap-owner") && err.contains("uid 4242"),
        "{err}"
    );
    assert!(
        err.contains("--pod-tap-owners"),
        "the message names the knob: {err}"
    );
    assert_eq!(
        before,
        settled_snapshot(&pod.pod),
        "nothing built in the pod netns"
    );
    assert!(!bundle.path().join("podtap.json").exists());
    assert!(
        !state.path().join(format!("{id}.json")).exists(),
        "no checkpoint"
    );
    // A policy for another uid, or the uid without the group, refuses it too.
    for flags in [
        &["--pod-tap-owners", "1000"][..],
        &["--pod-tap-owners", "4242"],
    ] {
        let o = oci_hook(BIN, state.path(), "attach", flags, &st);
        one_line_error(&o, 6, &format!("{flags:?}"));
        assert_eq!(before, settled_snapshot(&pod.pod));
    }
    // The node allows exactly this owner: the TAP is built with it.
    let allow = ["--pod-tap-owners", "1000,4242", "--pod-tap-groups", "4343"];
    let o = oci_hook(BIN, state.path(), "attach", &allow, &st);
    assert!(
        o.status.success(),
        "allowed: {}",
        podtap_testkit::stderr(&o)
    );
    let links = pod.pod.ip_json("-d link show");
    let tap = links
        .as_array()
        .expect("links")
        .iter()
        .find(|l| l["linkinfo"]["info_kind"] == "tun")
        .expect("a TAP");
    let data = &tap["linkinfo"]["info_data"];
    assert_eq!(
        (data["user"].as_u64(), data["group"].as_u64()),
        (Some(4242), Some(4343)),
        "{tap}"
    );
    assert!(oci_hook(BIN, state.path(), "detach", &[], &st)
        .status
        .success());
    assert_eq!(before, settled_snapshot(&pod.pod));
}

/// A prevResult naming `ifname` in `netns`.
fn prev_result(netns: &str, ifname: &str) -> Value {
    json!({ "cniVersion": "1.0.0",
            "interfaces": [{ "name": ifname, "sandbox": netns }],
            "ips": [{ "address": "198.18.0.2/24", "interface": 0 }] })
}

#[test]
fn a_pod_asking_for_256_queues_is_refused_under_the_default_policy() {
    let test = "a_pod_asking_for_256_queues_is_refused_under_the_default_policy";
    if !podtap_testkit::net_tools_or_skip(test) {
        return;
    }
    let pod = Pod::dual_stack();
    let state = TempDir::new();
    let netns = pod.pod.path_str();
    let conf = json!({ "cniVersion": "1.0.0", "name": "policy",
                       "plugins": [{ "type": "podtap", "stateDir": state.path() }] });
    let chain = Chain::new(BIN, conf, None);
    let cid = podtap_testkit::container_id(27);
    let env = Chain::env("ADD", &cid, &netns, "eth0");
    let before = settled_snapshot(&pod.pod);
    let prev = json!({ "prevResult": prev_result(&netns, "eth0") });
    let annotated = |queues: &str, policy: Value| {
        let mut c = prev.clone();
        c["runtimeConfig"] =
            json!({ "io.kubernetes.cri.pod-annotations": { "io.podtap.queues": queues } });
        c["podPolicy"] = policy;
        c
    };
    let err = chain
        .podtap("1.0.0", annotated("256", json!({})), &env)
        .expect_err(106);
    let msg = err["msg"].as_str().expect("msg");
    assert!(
        msg.starts_with("the pod's annotations asks for 256 queues"),
        "{msg}"
    );
    assert!(msg.contains("podPolicy.maxQueues"), "{msg}");
    assert_eq!(
        before,
        settled_snapshot(&pod.pod),
        "nothing built in the pod netns"
    );
    assert_eq!(
        listing(state.path()),
        Vec::<String>::new(),
        "no checkpoint, no registry entry"
    );
    // runtimeConfig, args.cni and a NIC's own choices are the pod's too.
    for extra in [
        json!({ "runtimeConfig": { "podtap": { "mode": "macvtap" } } }),
        json!({ "runtimeConfig": { "io.kubernetes.cri.pod-annotations": { "io.podtap.tap-owner": "0" } } }),
        json!({ "runtimeConfig": { "io.kubernetes.cri.pod-annotations": { "io.podtap.nic.eth0": "tap=tap0" } } }),
        json!({ "args": { "cni": { "podtap": { "guestMac": "02:00:00:00:00:07" } } } }),
    ] {
        let mut c = prev.clone();
        c.as_object_mut()
            .expect("object")
            .extend(extra.as_object().expect("object").clone());
        chain.podtap("1.0.0", c, &env).expect_err(106);
        assert_eq!(before, settled_snapshot(&pod.pod));
    }
    // A node that allows 4 queues gets them; 256 stays refused.
    let allowed = |queues| annotated(queues, json!({ "maxQueues": 4 }));
    chain.podtap("1.0.0", allowed("256"), &env).expect_err(106);
    let result = chain
        .podtap("1.0.0", allowed("4"), &env)
        .expect_ok("ADD with 4 queues");
    // The default result leaves the TAP out: the pod's interface alone.
    assert!(
        result["interfaces"]
            .as_array()
            .is_some_and(|l| l.len() == 1),
        "{result}"
    );
    assert_eq!(tap_of(&pod)["linkinfo"]["info_data"]["multi_queue"], true);
    let id = format!("{cid}-eth0");
    let checkpoint: Value = serde_json::from_slice(
        &std::fs::read(state.path().join(format!("{id}.json"))).expect("checkpoint"),
    )
    .expect("checkpoint JSON");
    assert_eq!(
        checkpoint["description"]["interfaces"][1]["tap"]["queues"], 4,
        "{checkpoint}"
    );
    let del = Chain::env("DEL", &cid, &netns, "eth0");
    chain.podtap("1.0.0", allowed("4"), &del).expect_ok("DEL");
    assert_eq!(before, settled_snapshot(&pod.pod));
    // CNI_ARGS is the runtime's (containerd and CRI-O put only K8S_POD_*
    // keys there, firecracker-containerd its jailer's uid): not bounded.
    let mut env = Chain::env("ADD", &cid, &netns, "eth0");
    env.push(("CNI_ARGS", "IgnoreUnknown=1;PODTAP_QUEUES=8"));
    chain
        .podtap("1.0.0", prev.clone(), &env)
        .expect_ok("ADD with CNI_ARGS");
    let checkpoint: Value = serde_json::from_slice(
        &std::fs::read(state.path().join(format!("{id}.json"))).expect("checkpoint"),
    )
    .expect("checkpoint JSON");
    assert_eq!(
        checkpoint["description"]["interfaces"][1]["tap"]["queues"],
        8
    );
    chain.podtap("1.0.0", prev, &del).expect_ok("DEL");
    assert_eq!(before, settled_snapshot(&pod.pod));
}

/// The pod netns's one TAP, as `ip -d -j link` shows it.
fn tap_of(pod: &Pod) -> Value {
    pod.pod
        .ip_json("-d link show")
        .as_array()
        .expect("links")
        .iter()
        .find(|l| l["linkinfo"]["info_kind"] == "tun")
        .cloned()
        .expect("a TAP")
}

/// Run `cmd` with `size` bytes on stdin (a JSON start, then one long string),
/// and return its exit status, stdout, stderr and peak RSS in KiB (wait4).
fn with_big_stdin(cmd: &mut Command, size: usize) -> (i32, String, String, i64) {
    measured(
        cmd,
        br#"{"cniVersion":"1.0.0","name":"big","x":""#.to_vec(),
        size,
    )
}

/// `cmd` under `/usr/bin/time -f %M -o report`. A direct child of this
/// test process counts, in its peak RSS, the pages it was forked with,
/// which grow with what the suite's other threads hold; `time` is small
/// when it forks the command, so the RSS it reports is the command's own.
fn under_time(cmd: &Command, report: &std::path::Path) -> Command {
    let mut w = Command::new("/usr/bin/time");
    w.args(["-f", "%M", "-o"])
        .arg(report)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => w.env(key, v),
            None => w.env_remove(key),
        };
    }
    w
}

/// Run `cmd` with `head` and then `size` filler bytes on stdin; its exit
/// status, stdout, stderr and peak RSS in KiB (from `/usr/bin/time`).
// The child is reaped by wait4 (std's wait would need the Child kept).
#[allow(clippy::zombie_processes)]
fn measured(cmd: &mut Command, head: Vec<u8>, size: usize) -> (i32, String, String, i64) {
    let report = TempDir::new();
    let report = report.path().join("rss");
    let mut child = under_time(cmd, &report)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'a'; 1 << 16];
        let _ = stdin.write_all(&head);
        let mut sent = 0;
        while sent < size {
            // The reader may stop early and close the pipe: that is the point.
            if stdin.write_all(&chunk).is_err() {
                break;
            }
            sent += chunk.len();
        }
    });
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().expect("stdout")));
    let err = read(Box::new(child.stderr.take().expect("stderr")));
    let pid = i32::try_from(child.id()).expect("pid");
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own unwaited child; status and usage are valid for writes.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4");
    let _ = writer.join();
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let (out, err) = (out.join().expect("stdout"), err.join().expect("stderr"));
    let rss = std::fs::read_to_string(&report).expect("time's report");
    let rss = rss
        .lines()
        .filter_map(|l| l.trim().parse::<i64>().ok())
        .next_back()
        .expect("a peak RSS in time's report");
    (code, out, err, rss)
}

/// The most a door may hold while refusing 64 MiB: well under the input.
const RSS_BOUND_KIB: i64 = 32 * 1024;

#[test]
fn sixty_four_mib_on_stdin_is_refused_with_bounded_memory() {
    let state = TempDir::new();
    let size = 64 << 20;
    // The CNI door: a CNI error object (7) on stdout, exit status 1.
    let mut cni = podtap_cmd(BIN, state.path());
    cni.env("CNI_COMMAND", "ADD")
        .env("CNI_CONTAINERID", "c1")
        .env("CNI_NETNS", "/run/netns/podtap-none")
        .env("CNI_IFNAME", "eth0");
    let (code, out, _, rss) = with_big_stdin(&mut cni, size);
    assert_eq!(code, 1, "CNI exit status; stdout {out}");
    let v: Value = serde_json::from_str(&out).expect("a CNI error object");
    assert_eq!(v["code"], 7, "{v}");
    assert!(
        v["msg"]
            .as_str()
            .is_some_and(|m| m.contains("more than 1 MiB")),
        "{v}"
    );
    eprintln!("CNI door: peak RSS {rss} KiB for 64 MiB of stdin");
    assert!(
        rss < RSS_BOUND_KIB,
        "CNI door peak RSS {rss} KiB for 64 MiB of stdin"
    );
    // The hook: exit 13 and one line.
    let mut oci = podtap_cmd(BIN, state.path());
    oci.args(["oci-hook", "attach"]);
    let (code, out, err, rss) = with_big_stdin(&mut oci, size);
    assert_eq!(code, 13, "hook exit code; stderr {err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("podtap: error: ") && err.contains("more than 1 MiB"),
        "{err}"
    );
    eprintln!("hook: peak RSS {rss} KiB for 64 MiB of stdin");
    assert!(
        rss < RSS_BOUND_KIB,
        "hook peak RSS {rss} KiB for 64 MiB of stdin"
    );
    // Just under the cap is read whole (and then refused for what it says).
    let mut small = podtap_cmd(BIN, state.path());
    small.args(["oci-hook", "attach"]);
    let (code, _, err, _) = with_big_stdin(&mut small, (1 << 20) - (1 << 16) - 64);
    assert_eq!(code, 13, "{err}");
    assert!(!err.contains("more than 1 MiB"), "{err}");
}

#[test]
fn a_huge_bundle_config_is_refused_with_bounded_memory() {
    let state = TempDir::new();
    let bundle = TempDir::new();
    // 64 MiB of config.json (sparse: it costs no disk).
    let f = std::fs::File::create(bundle.path().join("config.json")).expect("config.json");
    f.set_len(64 << 20).expect("set_len");
    let st = oci_state("big-config", bundle.path(), json!({})).into_bytes();
    let mut oci = podtap_cmd(BIN, state.path());
    oci.args(["oci-hook", "attach"]);
    let (code, _, err, rss) = measured(&mut oci, st, 0);
    assert_eq!(code, 13, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("config.json: larger than 4 MiB"), "{err}");
    eprintln!("hook: peak RSS {rss} KiB for a 64 MiB config.json");
    assert!(
        rss < RSS_BOUND_KIB,
        "hook peak RSS {rss} KiB for a 64 MiB config.json"
    );
}

#[test]
fn a_subcommand_wins_over_cni_command() {
    let state = TempDir::new();
    std::fs::create_dir_all(state.path()).expect("state");
    // With arguments, the CLI runs them and says CNI_COMMAND was ignored.
    let o = podtap_cmd(BIN, state.path())
        .env("CNI_COMMAND", "VERSION")
        .args(["list", "--json"])
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", podtap_testkit::stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("list JSON");
    assert!(
        v.get("supportedVersions").is_none(),
        "the CNI door answered: {v}"
    );
    assert!(
        podtap_testkit::stderr(&o).contains("CNI_COMMAND is ignored"),
        "{}",
        podtap_testkit::stderr(&o)
    );
    let o = podtap_cmd(BIN, state.path())
        .env("CNI_COMMAND", "DEL")
        .arg("--version")
        .output()
        .expect("run");
    assert!(
        o.status.success() && podtap_testkit::stdout(&o).starts_with("podtap "),
        "{o:?}"
    );
    // Without arguments it is the CNI plugin, as a runtime runs it.
    let o = podtap_testkit::run_with_stdin(
        podtap_cmd(BIN, state.path()).env("CNI_COMMAND", "VERSION"),
        "{}",
    );
    let v: Value = serde_json::from_slice(&o.stdout).expect("VERSION JSON");
    assert_eq!(
        v["supportedVersions"],
        json!(["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"])
    );
}

/// Every renderer `podtap render` offers.
const FORMATS: &[&str] = &[
    "qemu",
    "cloud-hypervisor",
    "cloud-hypervisor-api",
    "firecracker",
    "libvirt",
    "cloud-init",
    "kernel-cmdline",
    "guest-args",
    "kata-agent",
];

/// `ip -n <ns> <args>` without a shell (the names are hostile).
fn ip(ns: &Netns, args: &[&str]) {
    let o = Command::new("ip")
        .arg("-n")
        .arg(&ns.name)
        .args(args)
        .output()
        .expect("ip");
    assert!(
        o.status.success(),
        "ip {args:?}: {}",
        podtap_testkit::stderr(&o)
    );
}

/// A pod netns whose one interface is called `name`: IPv4 only, one address,
/// one default route (what kernel-cmdline can express). Returns the pod, its
/// peer and the interface's ifindex.
fn pod_with_interface(name: &str, sub: usize) -> (Netns, Netns, u64) {
    let pod = Netns::new("ptu");
    let peer = Netns::new("ptv");
    pod.exec("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1");
    let veth = ["link", "add", "vh0", "type", "veth", "peer", "name", name];
    ip(&peer, &[&veth[..], &["netns", &pod.name]].concat());
    ip(&peer, &["link", "set", "vh0", "up"]);
    ip(&pod, &["link", "set", name, "up"]);
    ip(
        &pod,
        &["addr", "add", &format!("198.18.{sub}.2/24"), "dev", name],
    );
    let gateway = format!("198.18.{sub}.1");
    ip(
        &pod,
        &["route", "add", "default", "via", &gateway, "dev", name],
    );
    let links = pod.ip_json("link show");
    let link = links
        .as_array()
        .expect("links")
        .iter()
        .find(|l| l["ifname"] == name)
        .expect("the hostile link");
    let ifindex = link["ifindex"].as_u64().expect("ifindex");
    (pod, peer, ifindex)
}

#[test]
fn hostile_pod_interface_names_get_safe_tap_names_every_renderer_accepts() {
    let test = "hostile_pod_interface_names_get_safe_tap_names_every_renderer_accepts";
    if !podtap_testkit::net_tools_or_skip(test) {
        return;
    }
    // Names the kernel accepts (no '/', ':' or whitespace) and no format can carry.
    for (n, name) in ["e$(id>x)", "q'a\"b,c=d", "-x;rm"].into_iter().enumerate() {
        let (pod, _peer, ifindex) = pod_with_interface(name, 200 + n);
        let state = TempDir::new();
        let cwd = TempDir::new();
        let id = podtap_testkit::unique("hostile");
        let o = podtap_cmd(BIN, state.path())
            .current_dir(cwd.path())
            .args(["attach", "--netns", &pod.path_str(), "--id", &id])
            .output()
            .expect("attach");
        let desc = podtap_testkit::json_ok(&o);
        let tap = podtap_testkit::iface(&desc, name)["tap"]["name"]
            .as_str()
            .expect("tap name")
            .to_string();
        assert_eq!(
            tap,
            format!("tap{ifindex}"),
            "{name:?}: the ifindex fallback"
        );
        assert_eq!(taps(&pod), std::slice::from_ref(&tap));
        for format in FORMATS {
            let o = podtap_cmd(BIN, state.path())
                .current_dir(cwd.path())
                .args(["render", format, "--id", &id])
                .output()
                .expect("render");
            let err = podtap_testkit::stderr(&o);
            assert!(o.status.success(), "{name:?}: render {format}: {err}");
            let names_tap = matches!(*format, "qemu" | "firecracker" | "libvirt");
            assert!(
                !names_tap || podtap_testkit::stdout(&o).contains(&tap),
                "{format} names the TAP"
            );
        }
        assert!(
            listing(cwd.path()).is_empty(),
            "nothing ran the name as a command"
        );
        let o = podtap_testkit::podtap_state(BIN, state.path(), &["detach", "--id", &id]);
        assert!(o.status.success(), "detach: {}", podtap_testkit::stderr(&o));
        assert!(taps(&pod).is_empty());
    }
}

/// A pod interface whose name is not UTF-8 (the kernel allows any bytes but
/// '/', ':' and whitespace). Its IPv4 address carries that name as its
/// label, and a rule may match it (`iif`): either once failed every scan of
/// the pod. Now it is described (the name with U+FFFD for the bytes JSON
/// cannot carry, in the rule too), attached under `tap<ifindex>`, checked
/// and detached.
#[test]
fn an_interface_name_that_is_not_utf8_is_described_and_attached() {
    let test = "an_interface_name_that_is_not_utf8_is_described_and_attached";
    if !podtap_testkit::net_tools_or_skip(test) {
        return;
    }
    let (pod, _peer, ifindex) = pod_with_interface("eth0", 210);
    let n = &pod.name;
    podtap_testkit::sh(&format!(
        "ip -n {n} link set eth0 down && ip -n {n} link set eth0 name $'e\\xff' && \
         ip -n {n} link set $'e\\xff' up && ip -n {n} rule add iif $'e\\xff' table 100 prio 100"
    ));
    let state = TempDir::new();
    let id = podtap_testkit::unique("notutf8");
    let o = podtap_cmd(BIN, state.path())
        .args(["attach", "--netns", &pod.path_str(), "--id", &id])
        .output()
        .expect("attach");
    let desc = podtap_testkit::json_ok(&o);
    let iface = desc["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .find(|i| i["ifindex"] == ifindex)
        .expect("the interface");
    assert_eq!(iface["name"], "e\u{fffd}", "{iface}");
    assert_eq!(iface["addresses"], json!(["198.18.210.2/24"]), "{iface}");
    assert_eq!(iface["tap"]["name"], format!("tap{ifindex}"), "{iface}");
    let rules = desc["rules"].as_array().expect("rules");
    assert!(
        rules
            .iter()
            .any(|r| r["iif"] == "e\u{fffd}" && r["table"] == 100),
        "the rule names the interface as the description does: {rules:?}"
    );
    let o = podtap_testkit::podtap_state(BIN, state.path(), &["check", "--id", &id]);
    assert!(o.status.success(), "check: {}", podtap_testkit::stderr(&o));
    let o = podtap_testkit::podtap_state(BIN, state.path(), &["detach", "--id", &id]);
    assert!(o.status.success(), "detach: {}", podtap_testkit::stderr(&o));
    assert!(taps(&pod).is_empty());
}
