//! macvtap device nodes: they live in root-only directories, and a
//! node is proven against the live macvtap's device number right before it
//! is opened, so a stale node whose number now belongs to another pod's
//! macvtap (or a symlink planted in its place) is never opened.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use podtap_testkit::*;

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

fn attach_macvtap(state: &StateDir, pod: &Pod, id: &str) -> std::process::Output {
    attach(BIN, &state.0, pod, id, &["--mode", "macvtap"])
}

/// The node `tap.device` of the pod's eth0.
fn node_of(desc: &serde_json::Value) -> String {
    iface(desc, "eth0")["tap"]["device"]
        .as_str()
        .expect("a macvtap has tap.device")
        .to_string()
}

/// `podtap exec --vmm qemu` for `id`, running a command that only leaves a marker.
fn exec_marks(state: &StateDir, id: &str, marker: &Path) -> std::process::Output {
    let script = format!("touch {}", marker.display());
    podtap_state(
        BIN,
        &state.0,
        &[
            "exec", "--id", id, "--vmm", "qemu", "--", "sh", "-c", &script, "sh",
        ],
    )
}

fn mode_and_owner(path: &str) -> (u32, u32) {
    let meta = std::fs::symlink_metadata(path).expect("stat");
    (meta.permissions().mode() & 0o7777, meta.uid())
}

#[test]
fn nodes_are_in_root_only_dirs_and_a_stale_node_is_never_opened() {
    if !root_or_skip("nodes_are_in_root_only_dirs_and_a_stale_node_is_never_opened") {
        return;
    }
    let (a, b) = (Pod::new(), Pod::new());
    a.add_veth("eth0", "veth0", 0, false);
    b.add_veth("eth0", "veth0", 0, false);
    let state = StateDir::new();
    let (id_a, id_b) = (unique("mvta"), unique("mvtb"));
    let desc_a = json_ok(&attach_macvtap(&state, &a, &id_a));
    let desc_b = json_ok(&attach_macvtap(&state, &b, &id_b));
    let (node_a, node_b) = (node_of(&desc_a), node_of(&desc_b));

    // Root-only directories, the node itself root's 0600 (no --tap-owner).
    assert_eq!(mode_and_owner("/dev/podtap"), (0o700, 0));
    assert_eq!(mode_and_owner(&format!("/dev/podtap/{id_a}")), (0o700, 0));
    assert_eq!(mode_and_owner(&node_a), (0o600, 0));

    // The real node opens: the command runs.
    let work = TempDir::new();
    let marker = work.path().join("ran");
    let out = exec_marks(&state, &id_a, &marker);
    assert!(out.status.success(), "exec: {}", stderr(&out));
    assert!(marker.exists());
    std::fs::remove_file(&marker).expect("remove marker");

    // A's node now carries B's device number (the minor reused by another
    // pod's macvtap): refused with exit 12, nothing opened, nothing run.
    let b_dev = sh(&format!("stat -c '%Hr %Lr' {node_b}"));
    let a_dev = sh(&format!("stat -c '%Hr %Lr' {node_a}"));
    assert_ne!(a_dev, b_dev);
    sh(&format!("rm {node_a} && mknod -m 600 {node_a} c {b_dev}"));
    let out = exec_marks(&state, &id_a, &marker);
    assert_eq!(exit_code(&out), 12, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("stale device node") && err.contains(&node_a),
        "{err}"
    );
    assert!(!marker.exists(), "the command ran on a stale node");

    // A symlink to B's node in its place is not followed either.
    sh(&format!("rm {node_a} && ln -s {node_b} {node_a}"));
    let out = exec_marks(&state, &id_a, &marker);
    assert_eq!(exit_code(&out), 12, "{}", stderr(&out));
    assert!(stderr(&out).contains("not a character device"));
    assert!(!marker.exists());

    // Detach removes the planted symlink's directory only as far as it is
    // podtap's: character devices go, the symlink keeps the directory.
    for (id, pod) in [(&id_a, &a), (&id_b, &b)] {
        let out = detach(BIN, &state, id);
        assert!(out.status.success(), "detach {id}: {}", stderr(&out));
        assert!(
            !pod.pod.ip("-d link show").contains("macvtap"),
            "{id}: macvtap left"
        );
    }
    assert!(!Path::new(&node_b).exists());
    let _ = std::fs::remove_dir_all(format!("/dev/podtap/{id_a}"));
}

#[test]
fn a_node_directory_planted_by_another_user_is_refused() {
    if !root_or_skip("a_node_directory_planted_by_another_user_is_refused") {
        return;
    }
    let pod = Pod::new();
    pod.add_veth("eth0", "veth0", 0, false);
    let state = StateDir::new();
    let id = unique("mvtp");
    let planted = format!("/dev/podtap/{id}");
    // /dev/podtap exists (made root-only by podtap or made now).
    sh("mkdir -p -m 700 /dev/podtap");
    sh(&format!(
        "mkdir -m 777 {planted} && chown 65534:65534 {planted}"
    ));
    let before = snapshot(&pod.pod);
    let out = attach_macvtap(&state, &pod, &id);
    let err = stderr(&out);
    assert!(!out.status.success(), "attach went on in a planted dir");
    assert!(err.contains("owned by uid 65534, not root"), "{err}");
    // Nothing half-built: the macvtap was rolled back, no node was made.
    assert_eq!(snapshot(&pod.pod), before);
    assert_eq!(
        std::fs::read_dir(&planted).expect("planted dir").count(),
        0,
        "a node was made in the planted directory"
    );
    std::fs::remove_dir(&planted).expect("remove the planted dir");
}
