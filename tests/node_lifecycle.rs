//! A node run for months (root): a DaemonSet rollout leaves no pod
//! without its TAP and no state behind, a deleter killed half-way leaves an
//! orphan the next ADD removes, and the sweep collects only what it proves
//! stale. The chains run the real reference plugins the libcni way
//! (podtap_testkit::Chain), with the podtap binary the installer put in the
//! node's CNI bin dir.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use podtap_testkit::{
    conflist, container_id, net_tools_or_skip, podtap_ok, poll, settled_snapshot, taps,
    wait_for_deferred_teardown, Chain, Netns, Pod, TempDir,
};

const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// A node's CNI dirs and podtap's state dir.
struct Node {
    _dir: TempDir,
    conf: PathBuf,
    bin: PathBuf,
    state: PathBuf,
}

impl Node {
    /// The conf dir holds the bridge conflist of hooks/cni without podtap
    /// (the node's own CNI), for bridge `net`.
    fn new(net: u32, data: &Path) -> Self {
        let dir = TempDir::new();
        let (conf, bin, state) = (
            dir.path().join("net.d"),
            dir.path().join("bin"),
            dir.path().join("state"),
        );
        for d in [&conf, &bin] {
            std::fs::create_dir_all(d).expect("dir");
        }
        let mut list = conflist("bridge-podtap.conflist", &state, data, net);
        list["plugins"]
            .as_array_mut()
            .expect("plugins")
            .retain(|p| p["type"] != "podtap");
        std::fs::write(conf.join("10-bridge.conflist"), list.to_string()).expect("write");
        Node {
            _dir: dir,
            conf,
            bin,
            state,
        }
    }

    fn conflist(&self) -> Value {
        let text = std::fs::read_to_string(self.conf.join("10-bridge.conflist")).expect("conf");
        serde_json::from_str(&text).expect("conflist JSON")
    }

    fn chained(&self) -> bool {
        self.conflist()["plugins"]
            .as_array()
            .is_some_and(|p| p.iter().any(|x| x["type"] == "podtap"))
    }

    /// The conflist as the runtime finds it now, run with the installed binary.
    fn chain(&self, node: &Netns) -> Chain {
        let installed = self.bin.join("podtap");
        Chain::new(
            installed.to_str().expect("path"),
            self.conflist(),
            Some(node),
        )
    }

    /// `cni-install --wait` as the DaemonSet runs it.
    fn installer(&self) -> Installer {
        let child = Command::new(BIN)
            .args(["cni-install", "--wait", "--conf-dir"])
            .arg(&self.conf)
            .arg("--bin-dir")
            .arg(&self.bin)
            .arg("--plugin-state-dir")
            .arg(&self.state)
            .stderr(Stdio::piped())
            .spawn()
            .expect("start cni-install --wait");
        let installer = Installer(Some(child));
        assert!(
            poll(Duration::from_secs(10), Duration::from_millis(50), || self
                .chained()
                && self.bin.join("podtap").exists()),
            "the installer chained podtap"
        );
        installer
    }

    fn checkpoint(&self, id: &str) -> bool {
        self.state.join(format!("{id}.json")).exists()
    }

    fn registered(&self, id: &str) -> bool {
        self.state.join("cni").join(format!("{id}.json")).exists()
    }
}

/// A running `cni-install --wait`, killed if the test panics.
struct Installer(Option<Child>);

impl Installer {
    /// SIGTERM, as the kubelet stops the pod; its stderr.
    fn stop(mut self) -> String {
        let child = self.0.take().expect("running");
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        let out = child.wait_with_output().expect("wait");
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{said}");
        said
    }
}

impl Drop for Installer {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn a_default_rollout_leaves_no_pod_without_its_tap_and_no_state_behind() {
    if !net_tools_or_skip("a_default_rollout_leaves_no_pod_without_its_tap_and_no_state_behind") {
        return;
    }
    let data = TempDir::new();
    let net = 150 + (std::process::id() % 50);
    let node_ns = Netns::new("rln");
    let node = Node::new(net, data.path());
    let (made_before, made_during) = (Netns::new("rlb"), Netns::new("rla"));
    let (deleted, created) = (container_id(520), container_id(521));
    let old = node.installer();
    // A pod made while the old installer ran.
    node.chain(&node_ns)
        .add(&deleted, &made_before.path_str(), "eth0");
    assert_eq!(taps(&made_before).len(), 1);
    // A default rolling update: the old pod stops, then (seconds later) the new one starts.
    let said = old.stop();
    assert!(said.contains("leaving podtap chained"), "{said}");
    assert!(node.chained(), "the stop leaves podtap chained");
    // In the gap, a pod is created and one is deleted.
    let results = node
        .chain(&node_ns)
        .add(&created, &made_during.path_str(), "eth0");
    node.chain(&node_ns)
        .del(&deleted, &made_before.path_str(), "eth0", None);
    std::thread::sleep(Duration::from_secs(2));
    let new = node.installer();
    // The created pod has its TAP, and podtap's record of it.
    assert_eq!(
        taps(&made_during).len(),
        1,
        "the pod made in the gap has its TAP"
    );
    assert!(node.checkpoint(&format!("{created}-eth0")));
    // The deleted pod's state is gone.
    wait_for_deferred_teardown(&made_before);
    assert!(taps(&made_before).is_empty());
    let gone = format!("{deleted}-eth0");
    assert!(
        !node.checkpoint(&gone) && !node.registered(&gone),
        "{gone}: state gone"
    );
    node.chain(&node_ns)
        .del(&created, &made_during.path_str(), "eth0", results.last());
    new.stop();
    assert!(node.chained(), "only --uninstall unchains podtap");
}

/// The podtap processes (the forked link deleter among them) that hold an fd
/// on the netns `inode`.
fn holding(inode: u64) -> Vec<i32> {
    let bin = std::fs::canonicalize(BIN).expect("binary");
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == bin))
        .filter(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                // The fd's file, whichever path opened it (a pinned file or nsfs).
                fds.flatten()
                    .any(|fd| std::fs::metadata(fd.path()).is_ok_and(|m| m.ino() == inode))
            })
        })
        .collect()
}

#[test]
fn a_killed_deleter_leaves_an_orphan_the_next_add_removes() {
    if !net_tools_or_skip("a_killed_deleter_leaves_an_orphan_the_next_add_removes") {
        return;
    }
    let pod = Pod::stable_dual_stack();
    let state = TempDir::new();
    let netns = pod.pod.path_str();
    let inode = std::fs::metadata(pod.pod.path()).expect("netns").ino();
    let before = settled_snapshot(&pod.pod);
    let conf = json!({ "cniVersion": "1.0.0", "name": "orphans",
                       "plugins": [{ "type": "podtap", "stateDir": state.path() }] });
    let chain = Chain::new(BIN, conf, None);
    let cid = container_id(522);
    let prev = json!({ "prevResult": { "cniVersion": "1.0.0",
        "interfaces": [{ "name": "eth0", "sandbox": netns }],
        "ips": [{ "address": format!("198.18.{}.2/24", pod.net), "interface": 0 }] } });
    let add = Chain::env("ADD", &cid, &netns, "eth0");
    let del = Chain::env("DEL", &cid, &netns, "eth0");
    chain.podtap("1.0.0", prev.clone(), &add).expect_ok("ADD");
    // DEL returns with the TAP left to its deleter, which waits for the
    // pod's veth to go (no plugin deletes it here): kill it meanwhile, as
    // an OOM kill or a CRI-O restart would.
    chain.podtap("1.0.0", prev.clone(), &del).expect_ok("DEL");
    let deleters = holding(inode);
    assert!(!deleters.is_empty(), "the deleter is at work");
    for pid in deleters {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(
        poll(Duration::from_secs(5), Duration::from_millis(20), || {
            holding(inode).is_empty()
        }),
        "the deleter is gone"
    );
    let orphan = taps(&pod.pod);
    assert_eq!(orphan.len(), 1, "the killed deleter left the TAP");
    // The operator sees it.
    let shown = podtap_ok(BIN, state.path(), &["show", "--netns", &netns]);
    assert!(
        shown.contains("orphan") && shown.contains(&orphan[0]),
        "{shown}"
    );
    // The next ADD into the netns for the same pod removes it first: one TAP.
    chain
        .podtap("1.0.0", prev.clone(), &add)
        .expect_ok("ADD again");
    assert_eq!(
        taps(&pod.pod).len(),
        1,
        "never two TAPs for one pod interface"
    );
    chain.podtap("1.0.0", prev, &del).expect_ok("DEL again");
    wait_for_deferred_teardown(&pod.pod);
    assert_eq!(settled_snapshot(&pod.pod), before, "the netns is as it was");
}

/// A CNI ADD for `cid` into `pod` on network `name`, state in `state`.
fn cni_add(name: &str, state: &Path, pod: &Pod, cid: &str) {
    let conf = json!({ "cniVersion": "1.0.0", "name": name,
                       "plugins": [{ "type": "podtap", "stateDir": state }] });
    let netns = pod.pod.path_str();
    let prev = json!({ "prevResult": { "cniVersion": "1.0.0",
        "interfaces": [{ "name": "eth0", "sandbox": netns }],
        "ips": [{ "address": format!("198.18.{}.2/24", pod.net), "interface": 0 }] } });
    Chain::new(BIN, conf, None)
        .podtap("1.0.0", prev, &Chain::env("ADD", cid, &netns, "eth0"))
        .expect_ok("ADD");
}

#[test]
fn a_sweep_collects_only_what_it_proves_stale() {
    if !net_tools_or_skip("a_sweep_collects_only_what_it_proves_stale") {
        return;
    }
    let dir = TempDir::new();
    let node = Node::new(200, dir.path());
    let state = node.state.clone();
    let (gone_cid, live_cid, other_cid) = (container_id(523), container_id(524), container_id(525));
    // A pod deleted while podtap was not chained: its netns went, the record stayed.
    {
        let gone = Pod::stable_dual_stack();
        cni_add("net-a", &state, &gone, &gone_cid);
    }
    // A live attachment of this network, and one of another network.
    let live = Pod::stable_dual_stack();
    cni_add("net-a", &state, &live, &live_cid);
    let other = Pod::stable_dual_stack();
    cni_add("net-b", &state, &other, &other_cid);
    let live_before = settled_snapshot(&live.pod);
    // A registry entry an ADD killed before it attached wrote long ago, and
    // one an ADD running now just wrote.
    let registry = state.join("cni");
    for (name, age) in [("stale-eth0", "10 minutes ago"), ("fresh-eth0", "now")] {
        let entry = json!({ "network": "net-a", "containerID": name, "ifname": "eth0" });
        std::fs::write(registry.join(format!("{name}.json")), entry.to_string()).expect("entry");
        podtap_testkit::sh(&format!(
            "touch -d '{age}' {}",
            registry.join(format!("{name}.json")).display()
        ));
    }
    let swept = node.installer().stop();
    let gone = format!("{gone_cid}-eth0");
    let lines: Vec<&str> = swept.lines().filter(|l| l.contains("sweep:")).collect();
    assert_eq!(
        lines.iter().filter(|l| l.contains(&gone)).count(),
        1,
        "logged once: {swept}"
    );
    assert!(
        !node.checkpoint(&gone) && !node.registered(&gone),
        "{swept}"
    );
    assert!(!node.registered("stale-eth0"), "{swept}");
    assert!(
        node.registered("fresh-eth0"),
        "a fresh entry is an ADD at work"
    );
    for cid in [&live_cid, &other_cid] {
        let id = format!("{cid}-eth0");
        assert!(
            node.checkpoint(&id) && node.registered(&id),
            "{id} untouched: {swept}"
        );
    }
    assert_eq!(
        settled_snapshot(&live.pod),
        live_before,
        "the live pod untouched"
    );
    assert_eq!(taps(&other.pod).len(), 1);
    assert_eq!(lines.len(), 2, "nothing else swept: {swept}");
}
