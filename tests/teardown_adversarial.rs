//! Teardown that cannot be hung, tricked or made to leak, against real kernel
//! objects and real files: FIFOs and symlinks in the state dir, read-only and
//! full tmpfs, a state dir or checkpoint others could write, objects planted at
//! recorded ifindexes, foreign filters at every candidate priority, and a
//! pinned netns reached through a dead `/proc` path.
//!
//! Run: `cargo test --test teardown_adversarial -- --test-threads=2`

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use podtap_testkit::{
    attach, exit_code as code, json_ok, net_tools_or_skip as ready, podtap_cmd, podtap_state,
    run_with_stdin, sh, snapshot, stderr, taps, Pod, StateDir,
};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// Run podtap with a deadline: a hang is a failure, not a stuck CI.
fn bounded(cmd: Command, stdin: &str) -> Output {
    let start = Instant::now();
    let mut wrapped = Command::new("timeout");
    wrapped
        .arg("20")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            wrapped.env(k, v);
        }
    }
    let out = run_with_stdin(&mut wrapped, stdin);
    assert_ne!(code(&out), 124, "podtap hung: {}", stderr(&out));
    assert!(start.elapsed() < Duration::from_secs(20));
    out
}

/// One CNI call of podtap with a minimal config (`extra` merged in).
fn cni(state: &Path, command: &str, cid: &str, netns: &str, extra: &str) -> Output {
    let mut cmd = podtap_cmd(BIN, state);
    cmd.env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", cid)
        .env("CNI_IFNAME", "eth0")
        .env("CNI_NETNS", netns)
        .env("CNI_PATH", "/nonexistent");
    let conf = format!(
        r#"{{"cniVersion":"1.1.0","name":"adv","type":"podtap","stateDir":"{}"{extra}}}"#,
        state.display()
    );
    bounded(cmd, &conf)
}

fn ensure_dir(state: &StateDir) {
    std::fs::create_dir_all(&state.0).unwrap();
    std::fs::set_permissions(&state.0, std::fs::Permissions::from_mode(0o700)).unwrap();
}

#[test]
fn a_fifo_checkpoint_never_hangs_detach_list_or_del() {
    if !ready("a_fifo_checkpoint_never_hangs_detach_list_or_del") {
        return;
    }
    let state = StateDir::new();
    ensure_dir(&state);
    sh(&format!(
        "mkfifo {}/f1.json {}/c1-eth0.json",
        state.0.display(),
        state.0.display()
    ));

    let mut cmd = podtap_cmd(BIN, &state.0);
    cmd.args(["detach", "--id", "f1"]);
    let out = bounded(cmd, "");
    assert_eq!(code(&out), 8, "{}", stderr(&out));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));

    let mut cmd = podtap_cmd(BIN, &state.0);
    cmd.args(["list", "--json"]);
    let out = bounded(cmd, "");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("corrupt"));

    // DEL may not fail: the FIFO is moved aside, never deleted, never read.
    let out = cni(&state.0, "DEL", "c1", "", "");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
    assert!(!state.0.join("c1-eth0.json").exists());
    let moved = std::fs::read_dir(&state.0).unwrap().flatten().any(|e| {
        e.file_name()
            .to_string_lossy()
            .starts_with("c1-eth0.json.corrupt-")
    });
    assert!(moved, "the FIFO was kept aside");
}

#[test]
fn a_symlinked_checkpoint_is_corrupt_and_its_target_is_never_touched() {
    if !ready("a_symlinked_checkpoint_is_corrupt_and_its_target_is_never_touched") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let state = StateDir::new();
    json_ok(&attach(BIN, &state.0, &pod, "s1", &["--mode", "tc"]));
    let target = state.0.join("elsewhere.txt");
    let file = state.0.join("s1.json");
    std::fs::rename(&file, &target).unwrap();
    std::os::unix::fs::symlink(&target, &file).unwrap();

    let out = podtap_state(BIN, &state.0, &["detach", "--id", "s1"]);
    assert_eq!(code(&out), 8, "{}", stderr(&out));
    assert!(stderr(&out).contains("symlink"), "{}", stderr(&out));
    assert_eq!(taps(&pod.pod).len(), 1, "nothing was touched");

    // --force cleans up by markers and removes the link, not what it points to.
    let out = podtap_state(
        BIN,
        &state.0,
        &[
            "detach",
            "--id",
            "s1",
            "--force",
            "--netns",
            &pod.pod.path_str(),
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(taps(&pod.pod).is_empty());
    assert!(!file.exists() && std::fs::symlink_metadata(&file).is_err());
    assert!(target.exists(), "the symlink's target survives");
}

#[test]
fn read_only_or_full_state_dirs_never_block_an_empty_teardown() {
    if !ready("read_only_or_full_state_dirs_never_block_an_empty_teardown") {
        return;
    }
    let state = StateDir::new();
    std::fs::create_dir_all(&state.0).unwrap();
    let bin = BIN;
    let dir = state.0.display();
    let conf =
        format!(r#"{{"cniVersion":"1.0.0","name":"adv","type":"podtap","stateDir":"{dir}/ro"}}"#);
    // A private mount namespace holds the tmpfs mounts; they vanish with it.
    let script = format!(
        "set -e; mkdir -p {dir}/ro {dir}/full
         mount -t tmpfs -o ro,mode=0700 tmpfs {dir}/ro
         mount -t tmpfs -o size=4k,mode=0700 tmpfs {dir}/full
         head -c 4096 /dev/zero > {dir}/full/filler || true
         {bin} detach --state-dir {dir}/ro --id nobody; echo ro-detach=$?
         {bin} detach --state-dir {dir}/full --id nobody; echo full-detach=$?
         echo '{conf}' | CNI_COMMAND=DEL CNI_CONTAINERID=c9 CNI_IFNAME=eth0 CNI_NETNS= {bin}; echo ro-del=$?"
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for expect in ["ro-detach=0", "full-detach=0", "ro-del=0"] {
        assert!(text.contains(expect), "{expect}: {text} {}", stderr(&out));
    }
}

#[test]
fn a_failed_final_checkpoint_write_rolls_everything_back() {
    if !ready("a_failed_final_checkpoint_write_rolls_everything_back") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    // Enough interfaces that the complete checkpoint (with the description)
    // needs more than one page while the intent record needs one.
    for i in 1..6 {
        pod.add_veth(&format!("eth{i}"), &format!("veth{i}"), 100 + i, false);
    }
    let before = snapshot(&pod.pod);
    let state = StateDir::new();
    std::fs::create_dir_all(&state.0).unwrap();
    let bin = BIN;
    let dir = state.0.display();
    // Two pages: the intent record fits; the complete checkpoint cannot be
    // written beside it.
    let script = format!(
        "set -e; mkdir -p {dir}/small; mount -t tmpfs -o size=8k,mode=0700 tmpfs {dir}/small
         {bin} attach --state-dir {dir}/small --netns {ns} --id full1; echo rc=$?; ls -A {dir}/small",
        ns = pod.pod.path_str()
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("rc=0"), "attach must fail on ENOSPC: {text}");
    assert!(
        stderr(&out).contains("rolled back") || stderr(&out).contains("No space"),
        "{}",
        stderr(&out)
    );
    assert!(!text.contains("full1.json"), "no checkpoint left: {text}");
    assert_eq!(snapshot(&pod.pod), before, "nothing left built");
}

#[test]
fn an_unwritable_output_rolls_back_and_a_bad_one_builds_nothing() {
    if !ready("an_unwritable_output_rolls_back_and_a_bad_one_builds_nothing") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let before = snapshot(&pod.pod);
    let state = StateDir::new();
    let ns = pod.pod.path_str();
    let out = podtap_state(
        BIN,
        &state.0,
        &[
            "attach",
            "--netns",
            &ns,
            "--id",
            "o1",
            "--output",
            "/nonexistent/dir/d.json",
        ],
    );
    assert_eq!(code(&out), 13, "{}", stderr(&out));
    assert_eq!(snapshot(&pod.pod), before);

    // The directory exists but cannot be written (read-only tmpfs): rolled back.
    let ro = state.0.with_extension("ro");
    std::fs::create_dir_all(&ro).unwrap();
    let script = format!(
        "set -e; mount -t tmpfs -o ro tmpfs {ro}
         {bin} attach --state-dir {st} --netns {ns} --id o2 --output {ro}/d.json; echo rc=$?",
        ro = ro.display(),
        st = state.0.display(),
        bin = BIN,
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir(&ro);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("rc=0"));
    assert!(stderr(&out).contains("rolled back"), "{}", stderr(&out));
    assert!(!state.0.join("o2.json").exists());
    assert_eq!(snapshot(&pod.pod), before);

    // Standard output that takes nothing (/dev/full: ENOSPC on every
    // write): the description streamed there never arrives, so rolled back.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = podtap_cmd(BIN, &state.0)
        .args(["attach", "--netns", &ns, "--id", "o3"])
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("rolled back"), "{}", stderr(&out));
    assert!(stderr(&out).contains("stdout"), "{}", stderr(&out));
    assert!(!state.0.join("o3.json").exists());
    assert_eq!(snapshot(&pod.pod), before);
}

#[test]
fn killed_writers_leave_nothing_that_blocks_or_accumulates() {
    if !ready("killed_writers_leave_nothing_that_blocks_or_accumulates") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let state = StateDir::new();
    ensure_dir(&state);
    // What a writer killed between create and rename leaves: the id's one
    // temp file. Holding the id's lock proves every writer of k1 is done, so
    // the next write simply writes over it.
    let leftover = state.0.join(".k1.json.tmp");
    std::fs::write(&leftover, b"{ a longer half-written checkpoint").unwrap();
    // Another id's temp file is not k1's.
    let other = state.0.join(".k10.json.tmp");
    std::fs::write(&other, b"{").unwrap();
    json_ok(&attach(BIN, &state.0, &pod, "k1", &["--mode", "tc"]));
    assert!(!leftover.exists(), "written over and renamed into place");
    // Killed again, during a later write: the temp file goes with the id.
    std::fs::write(&leftover, b"{").unwrap();
    assert!(podtap_state(BIN, &state.0, &["detach", "--id", "k1"])
        .status
        .success());
    assert!(!leftover.exists(), "removed with the id");
    assert!(other.exists(), "another id's temp file is kept");
}

#[test]
fn the_trust_rule_refuses_state_others_could_write() {
    if !ready("the_trust_rule_refuses_state_others_could_write") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let before = snapshot(&pod.pod);
    let state = StateDir::new();
    std::fs::create_dir_all(&state.0).unwrap();
    std::fs::set_permissions(&state.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = attach(BIN, &state.0, &pod, "t1", &["--mode", "tc"]);
    assert_eq!(code(&out), 16, "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert_eq!(snapshot(&pod.pod), before, "acted on nothing");

    // A checkpoint owned by another user, writable by all, names a bridge of
    // someone else's at its ifindex: root's detach refuses and deletes nothing.
    std::fs::set_permissions(&state.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    json_ok(&attach(BIN, &state.0, &pod, "t2", &["--mode", "tc"]));
    let file = state.0.join("t2.json");
    sh(&format!(
        "chown 65534 {} && chmod 0666 {}",
        file.display(),
        file.display()
    ));
    let out = podtap_state(BIN, &state.0, &["detach", "--id", "t2"]);
    assert_eq!(code(&out), 16, "{}", stderr(&out));
    assert_eq!(taps(&pod.pod).len(), 1, "nothing touched");
    sh(&format!(
        "chown 0 {} && chmod 0600 {}",
        file.display(),
        file.display()
    ));
    assert!(podtap_state(BIN, &state.0, &["detach", "--id", "t2"])
        .status
        .success());
    assert_eq!(snapshot(&pod.pod), before);
}

#[test]
fn a_checkpoint_that_names_the_host_netns_is_corrupt() {
    if !ready("a_checkpoint_that_names_the_host_netns_is_corrupt") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let state = StateDir::new();
    json_ok(&attach(BIN, &state.0, &pod, "h1", &["--mode", "tc"]));
    let file = state.0.join("h1.json");
    let mut cp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    use std::os::unix::fs::MetadataExt;
    // PID 1's netns, or (where PID 1 cannot be inspected, as in some sandboxes)
    // the kernel's initial netns, whose nsfs inode is fixed.
    let (dev, ino) = match std::fs::metadata("/proc/1/ns/net") {
        Ok(m) => (m.dev(), m.ino()),
        Err(_) => (
            std::fs::metadata("/proc/self/ns/net").unwrap().dev(),
            0xEFFF_FFF9,
        ),
    };
    cp["netns"]["path"] = "/proc/1/ns/net".into();
    cp["netns"]["inode"] = ino.into();
    cp["netns"]["dev"] = dev.into();
    std::fs::write(&file, serde_json::to_vec(&cp).unwrap()).unwrap();
    let out = podtap_state(BIN, &state.0, &["detach", "--id", "h1"]);
    assert_eq!(code(&out), 8, "{}", stderr(&out));
    assert!(stderr(&out).contains("host"), "{}", stderr(&out));
    // Clean up by markers in the real pod netns.
    let out = podtap_state(
        BIN,
        &state.0,
        &[
            "detach",
            "--id",
            "h1",
            "--force",
            "--netns",
            &pod.pod.path_str(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(taps(&pod.pod).is_empty());
}

/// CNI DEL may not fail whatever a corrupt checkpoint names: the host's
/// netns, a path that is no netns, or a netns that cannot be entered.
#[test]
fn del_succeeds_whatever_a_corrupt_checkpoint_names() {
    if !ready("del_succeeds_whatever_a_corrupt_checkpoint_names") {
        return;
    }
    let state = StateDir::new();
    ensure_dir(&state);
    let host_dev = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self/ns/net").unwrap().dev()
    };
    let bodies = [
        r#"{"netns":{"path":"/proc/1/ns/net"}}"#.to_string(),
        r#"{"netns":{"path":"/proc/self/ns/net"},"phase":7}"#.to_string(),
        format!(
            r#"{{"netns":{{"path":"/proc/self/ns/net","dev":{host_dev},"inode":4026531840}}}}"#
        ),
        r#"{"netns":{"path":"/etc/passwd"}}"#.to_string(),
        r#"{"netns":{"path":"/proc/self/ns/uts"}}"#.to_string(),
    ];
    for (n, body) in bodies.iter().enumerate() {
        let cid = format!("hc{n}");
        let file = state.0.join(format!("{cid}-eth0.json"));
        std::fs::write(&file, body).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let before = sh("ip -o link show");
        let out = cni(&state.0, "DEL", &cid, "", "");
        assert_eq!(
            code(&out),
            0,
            "{body}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(!file.exists(), "{body}: moved aside");
        assert_eq!(
            sh("ip -o link show"),
            before,
            "{body}: the host was touched"
        );
    }
}

#[test]
fn teardown_proves_ownership_before_it_touches_anything() {
    if !ready("teardown_proves_ownership_before_it_touches_anything") {
        return;
    }
    for mode in ["tc", "bridge"] {
        let pod = Pod::stable_dual_stack();
        let state = StateDir::new();
        let desc = json_ok(&attach(BIN, &state.0, &pod, "o1", &["--mode", mode]));
        let eth0 = podtap_testkit::iface(&desc, "eth0");
        let tap = eth0["tap"]["ifindex"].as_u64().unwrap();
        let tap_name = eth0["tap"]["name"].as_str().unwrap().to_string();
        // Someone deletes podtap's TAP and creates an unrelated link at its ifindex.
        let p = &pod.pod.name;
        sh(&format!("ip -n {p} link del {tap_name}"));
        sh(&format!(
            "ip -n {p} link add stranger index {tap} address 02:aa:bb:cc:dd:ee type bridge"
        ));
        if mode == "bridge" {
            // ...and moves the pod interface into a bridge of their own.
            sh(&format!("ip -n {p} link add theirs type bridge && ip -n {p} link set eth0 nomaster && ip -n {p} link set eth0 master theirs"));
        }
        let out = podtap_state(BIN, &state.0, &["detach", "--id", "o1"]);
        assert!(out.status.success(), "{mode}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("untouched") || stderr(&out).contains("left it"),
            "{mode}: {}",
            stderr(&out)
        );
        let links = pod.pod.ip("-d link show");
        assert!(links.contains("stranger"), "{mode}: the stranger survives");
        assert!(
            links.contains("02:aa:bb:cc:dd:ee"),
            "{mode}: its MAC was not overwritten"
        );
        if mode == "bridge" {
            assert!(
                pod.pod.ip("link show eth0").contains("master theirs"),
                "{mode}: eth0 stays in the bridge someone else moved it into"
            );
        }
    }
}

#[test]
fn foreign_filters_at_every_candidate_priority_are_never_shared() {
    if !ready("foreign_filters_at_every_candidate_priority_are_never_shared") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let p = &pod.pod;
    let mut batch = String::from("qdisc add dev eth0 clsact\n");
    for prio in 0xC0DE..0xC0DE + 64 {
        batch.push_str(&format!(
            "filter add dev eth0 ingress prio {prio} u32 match u8 0 0 classid 1:1\n"
        ));
    }
    p.batch("tc", &batch);
    let before = snapshot(p);
    let state = StateDir::new();
    let out = attach(BIN, &state.0, &pod, "f1", &["--mode", "tc"]);
    assert_eq!(code(&out), 13, "{}", stderr(&out));
    assert!(stderr(&out).contains("priority"), "{}", stderr(&out));
    assert_eq!(snapshot(p), before, "refused before building anything");
    assert!(!state.0.join("f1.json").exists());
}

#[test]
fn a_pinned_netns_reached_through_a_dead_proc_path_is_found_by_identity() {
    if !ready("a_pinned_netns_reached_through_a_dead_proc_path_is_found_by_identity") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let before = snapshot(&pod.pod);
    let state = StateDir::new();
    let mut holder = Command::new("ip")
        .args(["netns", "exec", &pod.pod.name, "sleep", "60"])
        .spawn()
        .unwrap();
    let proc_path = format!("/proc/{}/ns/net", holder.id());
    // `ip netns exec` enters the netns, then execs sleep: wait until it is in.
    podtap_testkit::wait_for(|| {
        use std::os::unix::fs::MetadataExt;
        let ino = |p: &Path| std::fs::metadata(p).map(|m| m.ino()).ok();
        ino(Path::new(&proc_path)).is_some() && ino(Path::new(&proc_path)) == ino(&pod.pod.path())
    });
    json_ok(&podtap_state(
        BIN,
        &state.0,
        &["attach", "--netns", &proc_path, "--id", "p1"],
    ));
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(!Path::new(&proc_path).exists(), "the /proc path is dead");
    // The pinned file still holds the netns: detach finds it and cleans up.
    let out = podtap_state(BIN, &state.0, &["detach", "--id", "p1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("gone"), "{}", stderr(&out));
    assert_eq!(snapshot(&pod.pod), before, "TAPs and redirects removed");
}

#[test]
fn cni_gc_takes_null_and_the_older_key_and_cli_detach_keeps_the_registry() {
    if !ready("cni_gc_takes_null_and_the_older_key_and_cli_detach_keeps_the_registry") {
        return;
    }
    let state = StateDir::new();
    let out = cni(
        &state.0,
        "GC",
        "",
        "",
        r#","cni.dev/valid-attachments":null"#,
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
    let out = cni(
        &state.0,
        "GC",
        "",
        "",
        r#","cni.dev/attachments":[{"containerID":"c1","ifname":"eth0"}]"#,
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));

    // A registry entry without a checkpoint is listed as an orphan; CLI detach drops it.
    let reg = state.0.join("cni");
    std::fs::create_dir_all(&reg).unwrap();
    std::fs::set_permissions(&state.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(
        reg.join("c2-eth0.json"),
        br#"{"network":"adv","containerID":"c2","ifname":"eth0"}"#,
    )
    .unwrap();
    std::fs::set_permissions(
        reg.join("c2-eth0.json"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let list = podtap_state(BIN, &state.0, &["list", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(rows[0]["id"], "c2-eth0", "{rows}");
    assert_eq!(rows[0]["phase"], "orphan", "{rows}");
    assert!(podtap_state(BIN, &state.0, &["detach", "--id", "c2-eth0"])
        .status
        .success());
    assert!(
        !reg.join("c2-eth0.json").exists(),
        "CLI detach keeps the registry consistent"
    );
}

#[test]
fn a_tap_owner_of_minus_one_is_invalid_input() {
    if !ready("a_tap_owner_of_minus_one_is_invalid_input") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let state = StateDir::new();
    let out = attach(BIN, &state.0, &pod, "u1", &["--tap-owner", "4294967295"]);
    assert_eq!(code(&out), 13, "{}", stderr(&out));
    assert!(taps(&pod.pod).is_empty());
}
