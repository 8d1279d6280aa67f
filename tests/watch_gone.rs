//! `podtap watch` notices that its pod is gone: once nothing but
//! watch holds the pod netns (bind mount removed, no process inside), it
//! says `netns_gone`, exits 3 and leaves the checkpoint for detach.

use std::process::{Command, Stdio};
use std::time::Duration;

use podtap_testkit::*;

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

#[test]
fn watch_exits_3_with_netns_gone_once_the_pod_netns_is_deleted() {
    if !root_or_skip("watch_exits_3_with_netns_gone") {
        return;
    }
    let pod = Pod::dual_stack();
    let state = StateDir::new();
    let id = unique("gone");
    json_ok(&attach(BIN, &state.0, &pod, &id, &[]));
    let watch = Watch::start(BIN, &state.0, &id, &[]);
    watch.next("ready");
    // A root process inside the netns holds it after its bind mount goes:
    // the pod is not gone yet.
    let mut holder = Command::new("ip")
        .args(["netns", "exec", &pod.pod.name, "sleep", "60"])
        .stdin(Stdio::null())
        .spawn()
        .expect("start a process in the pod netns");
    // Wait until it is inside (`ip netns exec` becomes the `sleep`), however
    // loaded the machine is, before the bind mount goes.
    let pid = holder.id();
    let pod_ns = std::fs::metadata(pod.pod.path()).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    let pod_ns = pod_ns.expect("stat the pod netns");
    assert!(
        poll(Duration::from_secs(10), Duration::from_millis(20), || {
            std::fs::metadata(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|m| std::os::unix::fs::MetadataExt::ino(&m) == pod_ns)
        }),
        "the holder never entered the pod netns"
    );
    sh(&format!("ip netns del {}", pod.pod.name));
    let early: Vec<_> = watch.drain(Duration::from_secs(2));
    assert!(
        early.iter().all(|e| e["event"] != "netns_gone"),
        "the netns still had a process in it: {early:?}"
    );
    // The last holder leaves: the pod is gone.
    let _ = holder.kill();
    let _ = holder.wait();
    let event = watch.next_within("netns_gone", 5);
    assert_eq!(event["id"], id.as_str());
    assert_eq!(event["netns"], pod.pod.path_str().as_str());
    assert_eq!(watch.exit_code(), Some(3));
    let file = state.0.join(format!("{id}.json"));
    assert!(file.exists(), "watch left the checkpoint for teardown");
    // Teardown then succeeds: the netns went with watch's last hold on it.
    let out = detach(BIN, &state, &id);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!file.exists());
}
