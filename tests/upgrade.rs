//! An upgrade under running pods: attachments the previous release made
//! (tc, bridge and macvtap, through the CLI and through a CNI chain) are
//! listed, checked, shown, rendered and torn down by this build, and the
//! pod netns ends exactly as it was before the old release attached.
//!
//! The previous release is built from git at [`PREVIOUS_RELEASE`] (the
//! last commit deployed before this tree's checkpoint and CNI changes) into
//! `target/previous-release/`, once: later runs reuse the binary. Move the
//! constant forward when a release ships.

use std::path::{Path, PathBuf};
use std::process::Command;

use podtap_testkit::{
    conflist, container_id, podtap_ok, podtap_state, settled_snapshot, sh, Chain, Netns, Pod,
    TempDir,
};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// The previous release: the commit nodes run before upgrading to this tree.
const PREVIOUS_RELEASE: &str = "224cc13d994dd86a607b9e09d4f23c9a751513bf";

fn repo() -> PathBuf {
    podtap_testkit::repo()
}

/// The previous release's binary, built from git once (under a lock, so
/// the tests of this file build it once between them).
fn previous_release() -> PathBuf {
    let dir = repo().join("target/previous-release");
    let bin = dir.join(format!("podtap-{}", &PREVIOUS_RELEASE[..12]));
    std::fs::create_dir_all(&dir).expect("target/previous-release");
    let lock = std::fs::File::create(dir.join("lock")).expect("lock file");
    nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map(|held| {
            if !bin.exists() {
                build(&dir, &bin);
            }
            drop(held);
        })
        .unwrap_or_else(|(_, e)| panic!("lock: {e}"));
    bin
}

fn build(dir: &Path, bin: &Path) {
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(&src).expect("source dir");
    let has = Command::new("git")
        .arg("-C")
        .arg(repo())
        .args(["cat-file", "-e", &format!("{PREVIOUS_RELEASE}^{{commit}}")])
        .status()
        .expect("run git");
    assert!(
        has.success(),
        "the previous release {PREVIOUS_RELEASE} is not in this clone's history (a shallow clone?)"
    );
    sh(&format!(
        "git -C {} archive {PREVIOUS_RELEASE} | tar -x -C {}",
        repo().display(),
        src.display()
    ));
    // Its own .cargo/config.toml applies: cargo runs in its tree.
    let out = Command::new(env!("CARGO"))
        .current_dir(&src)
        .args(["build", "--locked", "--bin", "podtap", "--target-dir"])
        .arg(dir.join("build"))
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "building the previous release failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let triple = sh("rustc --print host-tuple");
    let built = dir.join(format!("build/{}/debug/podtap", triple.trim()));
    std::fs::copy(&built, bin).expect("keep the binary");
    let _ = std::fs::remove_dir_all(&src);
}

/// Everything this build does with an attachment the old one made, then
/// its teardown; `before` is the pod netns before the old attach.
fn carry_on(old: &Path, state: &Path, id: &str, pod: &Netns, before: &str) {
    let old = old.to_str().expect("path");
    let list: Value =
        serde_json::from_str(&podtap_ok(BIN, state, &["list", "--json"])).expect("list JSON");
    assert!(list.to_string().contains(id), "{id} listed: {list}");
    podtap_ok(BIN, state, &["check", "--id", id]);
    assert!(podtap_ok(BIN, state, &["show", "--id", id]).contains(id));
    // Each renderer answers as the previous release did, refusals included
    // (QEMU cannot open a macvtap by name).
    let mut rendered = 0;
    for format in ["qemu", "libvirt", "firecracker", "cloud-init", "guest-args"] {
        let args = ["render", format, "--id", id];
        let (new, was) = (
            podtap_state(BIN, state, &args),
            podtap_state(old, state, &args),
        );
        assert_eq!(
            (new.status.code(), &new.stdout),
            (was.status.code(), &was.stdout),
            "{id}: {format} as the previous release rendered it"
        );
        rendered += usize::from(new.status.success());
    }
    assert!(rendered >= 2, "{id}: the guest formats at least render");
    podtap_ok(BIN, state, &["detach", "--id", id]);
    assert_eq!(settled_snapshot(pod), before, "{id}: the netns as it was");
    let list = podtap_ok(BIN, state, &["list", "--json"]);
    assert!(!list.contains(id), "{id} gone from the list");
}

#[test]
fn cli_attachments_of_the_previous_release_carry_on() {
    if !podtap_testkit::root_or_skip("cli_attachments_of_the_previous_release_carry_on") {
        return;
    }
    let old = previous_release();
    let state = TempDir::new();
    for mode in ["tc", "bridge", "macvtap"] {
        let pod = Pod::stable_dual_stack();
        let before = settled_snapshot(&pod.pod);
        let id = format!("upgrade-{mode}");
        let out = podtap_state(
            old.to_str().expect("path"),
            state.path(),
            &[
                "attach",
                "--netns",
                &pod.pod.path_str(),
                "--id",
                &id,
                "--mode",
                mode,
            ],
        );
        assert!(out.status.success(), "old attach {mode}: {out:?}");
        carry_on(&old, state.path(), &id, &pod.pod, &before);
    }
}

#[test]
fn cni_attachments_of_the_previous_release_carry_on() {
    if !podtap_testkit::root_or_skip("cni_attachments_of_the_previous_release_carry_on")
        || !podtap_testkit::tool_or_skip(
            "cni_attachments_of_the_previous_release_carry_on",
            &format!("{}/bridge", podtap_testkit::PLUGINS),
        )
    {
        return;
    }
    let old = previous_release();
    let node = Netns::new("upn");
    let pod = Netns::new("upp");
    let (state, data) = (TempDir::new(), TempDir::new());
    let net = 100 + std::process::id() % 50;
    let conf = conflist("bridge-podtap.conflist", state.path(), data.path(), net);
    let cid = container_id(70);
    let netns = pod.path_str();
    // The previous release is the plugin when the pod starts ...
    let results = Chain::new(old.to_str().expect("path"), conf.clone(), Some(&node))
        .add(&cid, &netns, "eth0");
    let cached = results.last().expect("result").clone();
    // ... and this build when the kubelet checks and deletes it.
    let chain = Chain::new(BIN, conf, Some(&node));
    for run in chain.check(&cid, &netns, "eth0", &cached) {
        run.expect_ok("CHECK by this build");
    }
    let id = format!("{cid}-eth0");
    podtap_ok(BIN, state.path(), &["check", "--id", &id]);
    chain.del(&cid, &netns, "eth0", Some(&cached));
    assert!(podtap_testkit::taps(&pod).is_empty(), "TAP removed");
    assert!(!podtap_testkit::checkpoint_path(state.path(), &id).exists());
    assert_eq!(
        chain
            .podtap(
                "1.1.0",
                json!({ "cni.dev/valid-attachments": [] }),
                &[("CNI_COMMAND", "GC")]
            )
            .json(),
        Value::Null,
        "GC prints nothing: nothing is left"
    );
}
