//! Root integration tests for what `podtap attach/detach/check` refuse: repeated or
//! conflicting attaches, bad input with its exit codes, corrupt checkpoints.

use podtap_testkit::wiring::{filters, link, pod, pod_with_macvlan};
use podtap_testkit::{
    attach, check, detach, iface, json_ok, podtap_state, settle_taps, snapshot, stderr, stdout,
    taps, wait_for_drained_bridges, StateDir,
};

use podtap_testkit::{exit_code as code, net_tools_or_skip as ready};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

#[test]
fn attach_is_idempotent_and_refuses_another_netns() {
    if !ready("attach_is_idempotent_and_refuses_another_netns") {
        return;
    }
    let pod = pod();
    let other = pod_with_macvlan();
    let state = StateDir::new();
    let id = podtap_testkit::unique("idem");
    let first = attach(BIN, &state.0, &pod, &id, &[]);
    json_ok(&first);
    let tap_set = taps(&pod.pod);
    let second = attach(BIN, &state.0, &pod, &id, &[]);
    assert_eq!(code(&second), 0, "{}", stderr(&second));
    assert_eq!(stdout(&second), stdout(&first), "same description");
    assert_eq!(taps(&pod.pod), tap_set, "no new objects");

    let before_other = snapshot(&other.pod);
    let conflict = attach(BIN, &state.0, &other, &id, &[]);
    assert_eq!(code(&conflict), 11, "{}", stderr(&conflict));
    let msg = stderr(&conflict);
    assert!(
        msg.contains(&id)
            && msg.contains(&pod.pod.path_str())
            && msg.contains(&other.pod.path_str()),
        "{msg}"
    );
    assert_eq!(snapshot(&other.pod), before_other, "other netns untouched");
    let c = check(BIN, &state, &id);
    assert_eq!(code(&c), 0, "first attachment intact: {}", stderr(&c));
    assert_eq!(code(&detach(BIN, &state, &id)), 0);
}

#[test]
fn a_second_id_cannot_wire_an_already_wired_pod_interface() {
    if !ready("a_second_id_cannot_wire_an_already_wired_pod_interface") {
        return;
    }
    let pod = pod_with_macvlan();
    let state = StateDir::new();
    let before = snapshot(&pod.pod);
    let (a, b) = (
        podtap_testkit::unique("first"),
        podtap_testkit::unique("second"),
    );
    json_ok(&attach(BIN, &state.0, &pod, &a, &["--interfaces", "eth0"]));
    settle_taps(&pod.pod);
    let wired = snapshot(&pod.pod);

    let o = attach(BIN, &state.0, &pod, &b, &["--interfaces", "eth0"]);
    assert_eq!(code(&o), 13, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("eth0") && stderr(&o).contains("already wired"),
        "{}",
        stderr(&o)
    );
    assert_eq!(snapshot(&pod.pod), wired, "refused attach changed nothing");
    // Another interface of the same netns is fine for another id.
    let desc = json_ok(&attach(BIN, &state.0, &pod, &b, &["--interfaces", "net1"]));
    assert_eq!(iface(&desc, "net1")["wiring"], "tc");

    for id in [&a, &b] {
        let d = detach(BIN, &state, id);
        assert_eq!(code(&d), 0, "{}", stderr(&d));
    }
    assert_eq!(snapshot(&pod.pod), before);
}

#[test]
fn bad_inputs_have_their_exit_codes_and_messages() {
    if !ready("bad_inputs_have_their_exit_codes_and_messages") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let before = snapshot(&pod.pod);
    let long = "a".repeat(200);
    for bad in ["a/b", "..", long.as_str()] {
        let o = attach(BIN, &state.0, &pod, bad, &[]);
        assert_eq!(code(&o), 7, "attach --id {bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("invalid sandbox id"), "{}", stderr(&o));
        let o = detach(BIN, &state, bad);
        assert_eq!(code(&o), 7, "detach --id {bad}: {}", stderr(&o));
    }
    let missing = format!("/run/netns/{}", podtap_testkit::unique("nonexistent"));
    let o = podtap_state(
        BIN,
        &state.0,
        &["attach", "--netns", &missing, "--id", "x1"],
    );
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&missing) && stderr(&o).contains("does not exist"),
        "{}",
        stderr(&o)
    );

    let o = podtap_state(
        BIN,
        &state.0,
        &["attach", "--netns", "/proc/self/ns/net", "--id", "x2"],
    );
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    assert!(stderr(&o).contains("host"), "{}", stderr(&o));

    let o = attach(BIN, &state.0, &pod, "x3", &["--mode", "foo"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("foo"), "{}", stderr(&o));

    let o = attach(BIN, &state.0, &pod, "x4", &["--interfaces", "nope"]);
    assert_eq!(code(&o), 13, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("nope") && stderr(&o).contains("not found"),
        "{}",
        stderr(&o)
    );

    for (extra, what) in [
        (&["--queues", "0"][..], "--queues"),
        (&["--queues", "300"][..], "--queues"),
        (&["--tap-owner", "bob"][..], "--tap-owner"),
        (&["--interfaces", "lo"][..], "not eligible"),
    ] {
        let o = attach(BIN, &state.0, &pod, "x5", extra);
        assert_eq!(code(&o), 13, "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(what), "{extra:?}: {}", stderr(&o));
    }

    // Not a netns: a regular file.
    let plain = state.0.with_extension("plain");
    std::fs::write(&plain, b"").unwrap();
    let o = podtap_state(
        BIN,
        &state.0,
        &["attach", "--netns", plain.to_str().unwrap(), "--id", "x6"],
    );
    std::fs::remove_file(&plain).unwrap();
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not a network namespace"),
        "{}",
        stderr(&o)
    );

    // A state dir that is a symlink is refused.
    let real = StateDir::new();
    std::fs::create_dir_all(&real.0).unwrap();
    let link_dir = real.0.with_extension("link");
    std::os::unix::fs::symlink(&real.0, &link_dir).unwrap();
    let o = podtap_state(
        BIN,
        &link_dir,
        &["attach", "--netns", &pod.pod.path_str(), "--id", "x7"],
    );
    std::fs::remove_file(&link_dir).unwrap();
    assert_ne!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains("symlink"), "{}", stderr(&o));

    assert_eq!(
        snapshot(&pod.pod),
        before,
        "failed attaches changed nothing"
    );
    let l = podtap_state(BIN, &state.0, &["list", "--json"]);
    assert_eq!(json_ok(&l), serde_json::json!([]), "and left no checkpoint");
}

#[test]
fn corrupt_checkpoint_is_kept_and_force_cleans_up() {
    if !ready("corrupt_checkpoint_is_kept_and_force_cleans_up") {
        return;
    }
    for mode in ["tc", "bridge"] {
        let pod = pod();
        let state = StateDir::new();
        let id = podtap_testkit::unique("corrupt");
        let orig_mac = link(&pod.pod, "eth0")["address"].clone();
        let desc = json_ok(&attach(BIN, &state.0, &pod, &id, &["--mode", mode]));
        let tap = iface(&desc, "eth0")["tap"]["name"]
            .as_str()
            .unwrap()
            .to_string();
        let file = state.0.join(format!("{id}.json"));
        std::fs::write(&file, b"{\"version\": 1, \"id\": \x00garbage").unwrap();

        let d = detach(BIN, &state, &id);
        assert_eq!(code(&d), 8, "{mode}: {}", stderr(&d));
        assert!(
            stderr(&d).contains(&file.display().to_string()),
            "{mode}: names the file: {}",
            stderr(&d)
        );
        assert!(file.exists(), "{mode}: corrupt checkpoint kept");
        for cmd in ["attach", "check"] {
            let o = if cmd == "attach" {
                attach(BIN, &state.0, &pod, &id, &[])
            } else {
                check(BIN, &state, &id)
            };
            assert_eq!(
                code(&o),
                8,
                "{mode}: {cmd} on a corrupt checkpoint: {}",
                stderr(&o)
            );
            assert!(
                stderr(&o).contains(&file.display().to_string()),
                "{}",
                stderr(&o)
            );
        }
        let l = podtap_state(BIN, &state.0, &["list"]);
        assert!(
            stdout(&l).contains("corrupt"),
            "{mode}: list shows it: {}",
            stdout(&l)
        );
        assert!(file.exists(), "{mode}: still kept");
        assert_eq!(
            taps(&pod.pod),
            vec![tap.clone()],
            "{mode}: nothing torn down"
        );

        let ns = pod.pod.path_str();
        let f = podtap_state(
            BIN,
            &state.0,
            &["detach", "--force", "--id", &id, "--netns", &ns],
        );
        assert_eq!(code(&f), 0, "{mode}: --force: {}", stderr(&f));
        assert!(
            taps(&pod.pod).is_empty(),
            "{mode}: --force removed the TAPs"
        );
        assert!(
            !filters(&pod.pod, "eth0").contains("mirred")
                && !filters(&pod.pod, "eth0").contains("podtap_redirect"),
            "{mode}: and podtap's filters"
        );
        wait_for_drained_bridges(&pod.pod);
        assert!(
            pod.pod
                .ip_json("link show type bridge")
                .as_array()
                .unwrap()
                .is_empty(),
            "{mode}: and podtap's bridges (deleted right after --force returns)"
        );
        assert_eq!(
            link(&pod.pod, "eth0")["address"],
            orig_mac,
            "{mode}: pod MAC restored"
        );
        assert!(
            link(&pod.pod, "eth0").get("master").is_none(),
            "{mode}: pod interface released"
        );
        assert!(
            !file.exists(),
            "{mode}: --force removed the corrupt checkpoint"
        );
    }
}

#[test]
fn check_of_unknown_id_and_list_of_empty_dir() {
    if !ready("check_of_unknown_id_and_list_of_empty_dir") {
        return;
    }
    let state = StateDir::new();
    let o = check(BIN, &state, "nobody");
    assert_eq!(code(&o), 14, "{}", stderr(&o));
    let l = podtap_state(BIN, &state.0, &["list"]);
    assert_eq!(code(&l), 0, "{}", stderr(&l));
}

/// Rust's start-up opens closed standard fds on /dev/null. Started with
/// stdin, stdout and stderr closed, an attach with `--output FILE` prints
/// into none of its own files (a lock or checkpoint that took fd 1), leaves
/// a valid checkpoint, and detaches exactly; check runs.
#[test]
fn closed_standard_fds_do_not_receive_a_checkpoint() {
    if !ready("closed_standard_fds_do_not_receive_a_checkpoint") {
        return;
    }
    let pod = pod();
    let state = StateDir::new();
    let before = snapshot(&pod.pod);
    let id = podtap_testkit::unique("closedfds");
    let dir = podtap_testkit::TempDir::new();
    let out = dir.path().join("description.json");
    let extra = ["--output", out.to_str().expect("UTF-8 path")];
    let status =
        with_standard_fds_closed(podtap_testkit::attach_cmd(BIN, &state.0, &pod, &id, &extra));
    assert!(
        status.success(),
        "attach --output with closed fds: {status:?}"
    );
    let printed = std::fs::read_to_string(&out).expect("the description was written");
    assert!(
        printed.contains("\"schema\": "),
        "the description: {printed}"
    );
    let recorded =
        std::fs::read_to_string(state.0.join(format!("{id}.json"))).expect("the checkpoint exists");
    serde_json::from_str::<serde_json::Value>(&recorded)
        .expect("the checkpoint is one JSON document");
    // The description is printed pretty (`"schema": `); podtap's own files are compact.
    for entry in std::fs::read_dir(&state.0).expect("state dir") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            !text.contains("\"schema\": "),
            "the description was printed into {}",
            path.display()
        );
    }
    let mut checked = podtap_testkit::podtap_cmd(BIN, &state.0);
    checked.args(["check", "--id", &id]);
    assert_eq!(
        with_standard_fds_closed(checked).code(),
        Some(0),
        "check, stdout closed"
    );
    let o = check(BIN, &state, &id);
    assert_eq!(code(&o), 0, "check: {}", stderr(&o));
    let o = detach(BIN, &state, &id);
    assert_eq!(code(&o), 0, "detach: {}", stderr(&o));
    settle_taps(&pod.pod);
    assert_eq!(snapshot(&pod.pod), before, "detach left the pod as it was");
}

/// Run `cmd` with its stdin, stdout and stderr closed; its exit status.
fn with_standard_fds_closed(mut cmd: std::process::Command) -> std::process::ExitStatus {
    use std::os::unix::process::CommandExt;
    // SAFETY: close(2) is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            for fd in 0..3 {
                libc::close(fd);
            }
            Ok(())
        });
    }
    cmd.status().expect("run podtap")
}
