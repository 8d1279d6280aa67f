//! Root integration tests of the operator's tools: `podtap doctor` on this
//! machine and with an untrusted state dir, `podtap show` on attachments
//! that were tampered with, and the JSON log of an attach.
//!
//! Run: `cargo test --test operator -- --test-threads=1`

use std::os::unix::fs::PermissionsExt;
use std::process::Output;

use podtap_testkit::{
    exit_code as code, json_ok, podtap_cmd, podtap_state, stderr, stdout, Pod, StateDir, TempDir,
};
use serde_json::Value;

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// `podtap doctor --json` with its own state and CNI dirs.
fn doctor(state: &std::path::Path, extra: &[&str]) -> (Output, Value) {
    let cni = TempDir::new();
    let conf = cni.path().join("net.d");
    std::fs::create_dir_all(&conf).unwrap();
    let (conf, bin) = (conf.to_str().unwrap(), cni.path().to_str().unwrap());
    let mut args = vec![
        "doctor",
        "--json",
        "--cni-conf-dir",
        conf,
        "--cni-bin-dir",
        bin,
    ];
    args.extend_from_slice(extra);
    let out = podtap_state(BIN, state, &args);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor prints JSON ({e}): {}", stdout(&out)));
    (out, report)
}

fn finding<'a>(report: &'a Value, check: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == check)
        .unwrap_or_else(|| panic!("no check {check} in {report:#}"))
}

#[test]
fn doctor_passes_on_this_machine_and_says_what_vhost_net_means() {
    if !podtap_testkit::root_or_skip("doctor_passes_on_this_machine_and_says_what_vhost_net_means")
    {
        return;
    }
    let state = TempDir::new();
    std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let (out, report) = doctor(state.path(), &[]);
    for c in report["checks"].as_array().unwrap() {
        if c["required"] == true {
            assert_eq!(c["status"], "ok", "required check failed: {c:#}");
        }
        if c["status"] != "ok" {
            assert!(c["fix"].as_str().is_some_and(|f| !f.is_empty()), "{c:#}");
        }
    }
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(report["ready"], true);
    for check in [
        "privileges",
        "/dev/net/tun",
        "veth",
        "tap",
        "ingress qdisc",
        "u32 filter",
        "mirred action",
        "state dir",
    ] {
        assert_eq!(
            finding(&report, check)["required"],
            true,
            "{check} is required in tc mode"
        );
    }
    // The features this kernel has (the brief lists them) are made, not guessed.
    for check in ["bridge", "macvtap", "clsact qdisc"] {
        assert_eq!(finding(&report, check)["status"], "ok", "{check}");
    }
    let vhost = finding(&report, "vhost-net");
    if std::path::Path::new("/dev/vhost-net").exists() {
        assert_eq!(vhost["status"], "ok", "{vhost:#}");
    } else {
        assert_eq!(vhost["status"], "warn", "{vhost:#}");
        assert!(vhost["detail"]
            .as_str()
            .unwrap()
            .contains("no vhost acceleration: VMMs fall back to userspace virtio-net"));
    }
    // The probes' objects lived in a netns of their own: none is left in this one.
    let here = podtap_testkit::sh("ip -br link show");
    for probe_link in ["pt0", "pt1", "ptbr0", "pttap0", "ptmvt0"] {
        assert!(
            !here
                .lines()
                .any(|l| l.split(['@', ' ']).next() == Some(probe_link)),
            "{probe_link} in the test's netns: {here}"
        );
    }
    // The text form: one line per check, then the summary.
    let text = podtap_state(BIN, state.path(), &["doctor"]);
    assert_eq!(code(&text), 0);
    let lines: Vec<String> = stdout(&text).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), report["checks"].as_array().unwrap().len() + 1);
    let vhost_line = lines.iter().find(|l| l.contains("vhost-net")).unwrap();
    assert!(
        vhost_line.starts_with(vhost["status"].as_str().unwrap()),
        "{vhost_line}"
    );
    assert!(!stdout(&text).contains('\x1b'), "no colour into a pipe");
}

#[test]
fn doctor_fails_on_an_untrusted_state_dir() {
    if !podtap_testkit::root_or_skip("doctor_fails_on_an_untrusted_state_dir") {
        return;
    }
    let open = TempDir::new();
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let nobody = TempDir::new();
    std::fs::set_permissions(nobody.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    nix::unistd::chown(nobody.path(), Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    for (dir, why) in [(open.path(), "0777"), (nobody.path(), "65534")] {
        let (out, report) = doctor(dir, &[]);
        assert_eq!(code(&out), 17, "{}", stderr(&out));
        assert_eq!(report["ready"], false);
        let state = finding(&report, "state dir");
        assert_eq!(state["status"], "fail", "{state:#}");
        assert!(state["detail"].as_str().unwrap().contains(why), "{state:#}");
        assert!(state["fix"].as_str().unwrap().contains("chmod 0700"));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("podtap: error: node not ready") && err.contains("state dir"),
            "{err}"
        );
    }
    // What a mode does not need is a warning at most: macvtap needs no /dev/net/tun.
    let (_, report) = doctor(open.path(), &["--mode", "macvtap"]);
    assert_eq!(finding(&report, "/dev/net/tun")["required"], false);
    assert_eq!(finding(&report, "macvtap")["required"], true);
    assert_eq!(finding(&report, "u32 filter")["required"], false);
}

/// A pod with eth0, eth1, eth2 attached in tc mode under `id`; returns the TAP names.
fn three_nic_pod(state: &StateDir, pod: &Pod, id: &str) -> Vec<String> {
    pod.add_veth("eth0", "veth0", pod.net, true);
    for (i, ifname) in ["eth1", "eth2"].iter().enumerate() {
        let peer = format!("veth{}", i + 1);
        let sub = 250 + u32::try_from(i).unwrap();
        pod.add_veth(ifname, &peer, sub, false);
    }
    let ns = pod.pod.path_str();
    let desc = json_ok(&podtap_state(
        BIN,
        &state.0,
        &["attach", "--netns", &ns, "--id", id],
    ));
    ["eth0", "eth1", "eth2"]
        .iter()
        .map(|n| {
            podtap_testkit::iface(&desc, n)["tap"]["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn show_tells_ok_missing_and_drifted_apart() {
    if !podtap_testkit::net_tools_or_skip("show_tells_ok_missing_and_drifted_apart") {
        return;
    }
    let (pod, state) = (Pod::new(), StateDir::new());
    let id = podtap_testkit::unique("show");
    let taps = three_nic_pod(&state, &pod, &id);
    let show = |extra: &[&str]| {
        let mut args = vec!["show", "--id", id.as_str()];
        args.extend_from_slice(extra);
        podtap_state(BIN, &state.0, &args)
    };
    let healthy = json_ok(&show(&["--json"]));
    assert_eq!(healthy[0]["state"], "ok", "{healthy:#}");
    for nic in healthy[0]["nics"].as_array().unwrap() {
        assert_eq!(nic["state"], "ok", "{nic:#}");
        assert!(
            nic["rx_packets"].is_u64() && nic["tx_packets"].is_u64(),
            "{nic:#}"
        );
        assert_eq!(nic["vm"]["handover"], "fd or name");
        // The redirect's kind, as the kernel's filter shows it.
        assert!(
            nic["wiring_detail"]
                .as_str()
                .is_some_and(|d| d.starts_with(&format!(
                    "tc {} redirect prio ",
                    podtap_testkit::wiring::default_redirect()
                ))),
            "{nic:#}"
        );
    }

    // Tamper: TAP of eth0 deleted, eth1's redirect removed, TAP of eth2 renamed.
    pod.pod.ip(&format!("link del {}", taps[0]));
    podtap_testkit::sh(&format!(
        "tc -n {} filter del dev eth1 ingress",
        pod.pod.name
    ));
    pod.pod.ip(&format!("link set {} down", taps[2]));
    pod.pod.ip(&format!("link set {} name guestnic2", taps[2]));
    pod.pod.ip("link set guestnic2 up");

    let out = show(&["--json"]);
    let v = json_ok(&out);
    let nics = v[0]["nics"].as_array().unwrap();
    let by_pod = |name: &str| nics.iter().find(|n| n["pod"] == name).unwrap();
    assert_eq!(by_pod("eth0")["state"], "missing", "{v:#}");
    assert!(by_pod("eth0")["problems"][0]
        .as_str()
        .unwrap()
        .contains(&taps[0]));
    assert_eq!(by_pod("eth1")["state"], "drifted", "{v:#}");
    let eth1 = by_pod("eth1")["problems"].to_string();
    assert!(
        eth1.contains("tc redirect eth1 ->") && eth1.contains("is missing"),
        "{eth1}"
    );
    assert_eq!(by_pod("eth2")["state"], "drifted", "{v:#}");
    assert_eq!(by_pod("eth2")["tap_now"], "guestnic2");
    assert!(by_pod("eth2")["problems"]
        .to_string()
        .contains("renamed to guestnic2"));
    assert_eq!(
        v[0]["state"], "missing",
        "the worst NIC is the attachment's state"
    );

    // The same as text: one line for the attachment, one per NIC.
    let text = stdout(&show(&[]));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[0].starts_with(&id) && lines[0].ends_with("missing"),
        "{text}"
    );
    let line = |pod: &str| {
        *lines
            .iter()
            .find(|l| l.trim_start().starts_with(&format!("{pod} -> ")))
            .unwrap()
    };
    assert!(line("eth0").contains("  missing: TAP"), "{text}");
    assert!(line("eth1").contains("  drifted: tc redirect"), "{text}");
    assert!(
        line("eth1").contains(" -> tc redirect prio "),
        "no redirect, no kind: {text}"
    );
    assert!(
        line("eth2").contains("now guestnic2") && line("eth2").contains("drifted: TAP"),
        "{text}"
    );
    assert!(!text.contains('\x1b'), "no colour into a pipe");
    // `check` agrees, and fails.
    assert_eq!(
        code(&podtap_state(BIN, &state.0, &["check", "--id", &id])),
        12
    );

    // --netns picks attachments by netns; another netns shows none.
    let ns = pod.pod.path_str();
    let mine = json_ok(&podtap_state(
        BIN,
        &state.0,
        &["show", "--json", "--netns", &ns],
    ));
    assert_eq!(mine.as_array().unwrap().len(), 1);
    let peer = pod.peer.path_str();
    let none = json_ok(&podtap_state(
        BIN,
        &state.0,
        &["show", "--json", "--netns", &peer],
    ));
    assert_eq!(none, serde_json::json!([]));
    let unknown = podtap_state(BIN, &state.0, &["show", "--id", "no-such-id"]);
    assert_eq!(code(&unknown), 14, "{}", stderr(&unknown));
    assert_eq!(code(&podtap_testkit::detach(BIN, &state, &id)), 0);
}

#[test]
fn attach_logs_every_phase_as_json() {
    if !podtap_testkit::net_tools_or_skip("attach_logs_every_phase_as_json") {
        return;
    }
    let (pod, state) = (Pod::dual_stack(), StateDir::new());
    let id = podtap_testkit::unique("log");
    let ns = pod.pod.path_str();
    let out = podtap_cmd(BIN, &state.0)
        .env("PODTAP_LOG", "debug")
        .args([
            "--log-format",
            "json",
            "attach",
            "--netns",
            &ns,
            "--id",
            &id,
        ])
        .output()
        .unwrap();
    json_ok(&out);
    let events: Vec<Value> = stderr(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for phase in ["scan", "plan", "taps", "wiring", "checkpoint"] {
        let of_phase: Vec<&Value> = events.iter().filter(|e| e["phase"] == phase).collect();
        assert!(!of_phase.is_empty(), "no {phase} event in {events:#?}");
        for e in of_phase {
            assert_eq!(e["span"]["id"], id.as_str(), "{e}");
            assert_eq!(e["span"]["netns"], ns.as_str(), "{e}");
        }
    }
    for phase in ["plan", "taps", "wiring"] {
        assert!(
            events
                .iter()
                .any(|e| e["phase"] == phase && e["interface"] == "eth0"),
            "{phase}: no event names interface eth0"
        );
    }
    // The doors without flags read PODTAP_LOG_FORMAT; errors stay one plain line.
    let failed = podtap_cmd(BIN, &state.0)
        .env("PODTAP_LOG", "debug")
        .env("PODTAP_LOG_FORMAT", "json")
        .args(["check", "--id", "no-such-id"])
        .output()
        .unwrap();
    assert_eq!(code(&failed), 14);
    let err = stderr(&failed);
    assert_eq!(
        err.lines().last().map(|l| l.starts_with("podtap: error: ")),
        Some(true),
        "{err}"
    );
    assert!(
        err.lines().filter(|l| !l.starts_with('{')).count() == 1,
        "{err}"
    );
    assert_eq!(code(&podtap_testkit::detach(BIN, &state, &id)), 0);
}

#[test]
fn the_cni_door_logs_json_from_the_environment() {
    // No kernel object is touched: DEL of an id that cannot exist only logs.
    let state = TempDir::new();
    let conf = serde_json::json!({"cniVersion": "1.0.0", "name": "n", "type": "podtap",
        "stateDir": state.path()});
    let mut cmd = std::process::Command::new(BIN);
    cmd.env("CNI_COMMAND", "DEL")
        .env("CNI_CONTAINERID", "not a valid id!")
        .env("CNI_IFNAME", "eth0")
        .env("CNI_PATH", "/nonexistent")
        .env("PODTAP_LOG_FORMAT", "json")
        .env_remove("PODTAP_LOG");
    let out = podtap_testkit::run_with_stdin(&mut cmd, &conf.to_string());
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let err = stderr(&out);
    let line: Value = serde_json::from_str(err.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {err}"));
    assert_eq!(line["level"], "WARN");
    assert!(line["message"]
        .as_str()
        .unwrap()
        .contains("no valid sandbox id"));
}

/// A pod names its interfaces, and may rename podtap's TAP in its netns,
/// with any bytes but '/', ':' and whitespace: escape sequences included.
/// `podtap show` prints them as escapes, so nothing reaches the operator's
/// terminal as a command to it.
#[test]
fn show_prints_escape_sequences_in_names_as_text() {
    if !podtap_testkit::net_tools_or_skip("show_prints_escape_sequences_in_names_as_text") {
        return;
    }
    let (pod, state) = (Pod::new(), StateDir::new());
    pod.add_veth("eth0", "veth0", pod.net, false);
    let id = podtap_testkit::unique("esc");
    let desc = podtap_testkit::attach_json(BIN, &state.0, &pod, &id, "tc");
    let tap = podtap_testkit::iface(&desc, "eth0")["tap"]["name"]
        .as_str()
        .expect("tap")
        .to_string();
    let n = &pod.pod.name;
    podtap_testkit::sh(&format!(
        "ip -n {n} link set eth0 down && ip -n {n} link set eth0 name $'\\e]0;x\\a' && \
         ip -n {n} link set {tap} down && ip -n {n} link set {tap} name $'\\e[2Jx'"
    ));
    let out = podtap_state(BIN, &state.0, &["show", "--id", &id]);
    let text = stdout(&out);
    assert!(
        !out.stdout.iter().any(|b| *b == 0x1b || *b == 0x07),
        "no raw escape reaches the terminal: {text:?}"
    );
    assert!(text.contains("now \\x1b[2Jx"), "{text}");
    let o = podtap_testkit::detach(BIN, &state, &id);
    assert_eq!(code(&o), 0, "detach: {}", stderr(&o));
}
