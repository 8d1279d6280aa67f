//! `podtap cni-install --wait` beside the CNIs that own the conf dir.
//!
//! Each CNI's own installer is played as its source does it, on conflists
//! shaped like those they ship:
//! - Flannel: its init container copies `cni-conf.json` over
//!   `10-flannel.conflist` on every start (`cp -f`: an in-place rewrite;
//!   Documentation/kube-flannel.yml), cniVersion 0.3.1.
//! - Calico: install-cni writes `10-calico.conflist` on each calico-node
//!   start through a temporary file and a rename
//!   (cni-plugin/pkg/install/install.go), 0.3.1.
//! - Cilium: the agent writes `05-cilium.conflist` on start and, with
//!   cni-exclusive (the default), renames other confs to `*.cilium_bak`
//!   (daemon/cmd/cni/config.go), 0.3.1.
//! - Multus: its daemon writes `00-multus.conf` (thick: type multus-shim)
//!   on start and whenever the cluster network's conf changes
//!   (deployments/multus-daemonset-thick.yml), 0.3.1.
//!
//! SIGTERM ends the wait and leaves podtap chained (a rolling update's
//! next pod takes over); `--uninstall` alone takes it off. The installers
//! here sweep a state dir of their own, never the node's `/run/podtap`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use podtap_testkit::{poll, TempDir};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_podtap");

fn flannel() -> Value {
    json!({"name": "cbr0", "cniVersion": "0.3.1", "plugins": [
        {"type": "flannel", "delegate": {"hairpinMode": true, "isDefaultGateway": true}},
        {"type": "portmap", "capabilities": {"portMappings": true}}]})
}

fn calico() -> Value {
    json!({"name": "k8s-pod-network", "cniVersion": "0.3.1", "plugins": [
        {"type": "calico", "datastore_type": "kubernetes", "nodename": "node-1", "mtu": 1440,
         "ipam": {"type": "calico-ipam"}, "policy": {"type": "k8s"}},
        {"type": "portmap", "snat": true, "capabilities": {"portMappings": true}},
        {"type": "bandwidth", "capabilities": {"bandwidth": true}}]})
}

fn cilium() -> Value {
    json!({"cniVersion": "0.3.1", "name": "cilium", "plugins": [
        {"type": "cilium-cni", "enable-debug": false, "log-file": "/var/run/cilium/cilium-cni.log"}]})
}

fn multus(cluster_network: &Path) -> Value {
    json!({"cniVersion": "0.3.1", "name": "multus-cni-network", "type": "multus-shim",
           "logLevel": "verbose", "logToStderr": true,
           "clusterNetwork": cluster_network.display().to_string()})
}

fn text(conf: &Value) -> Vec<u8> {
    (serde_json::to_string_pretty(conf).expect("JSON") + "\n").into_bytes()
}

/// An in-place rewrite (truncate and write), as `cp -f` does.
fn rewrite(path: &Path, conf: &Value) {
    std::fs::write(path, text(conf)).expect("rewrite");
}

/// A write to a temporary file renamed over `path`, as Go installers do.
fn replace(path: &Path, conf: &Value) {
    let tmp = path.with_extension("tmp-write");
    std::fs::write(&tmp, text(conf)).expect("write temp");
    std::fs::rename(&tmp, path).expect("rename");
}

fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_default()).unwrap_or(Value::Null)
}

fn chained(path: &Path) -> bool {
    read(path)["plugins"]
        .as_array()
        .is_some_and(|p| p.last().is_some_and(|l| l["type"] == "podtap"))
}

/// `cni-install --wait` on `conf`, killed (SIGKILL) if a test panics.
struct Installer {
    child: Child,
    _state: TempDir,
}

impl Installer {
    fn start(conf: &Path) -> Self {
        let bin = conf.join("bin");
        std::fs::create_dir_all(&bin).expect("bin dir");
        Installer::start_with(conf, &bin)
    }

    fn start_with(conf: &Path, bin: &Path) -> Self {
        let state = TempDir::new();
        let child = Command::new(BIN)
            .args(["cni-install", "--wait", "--conf-dir"])
            .arg(conf)
            .arg("--bin-dir")
            .arg(bin)
            .arg("--plugin-state-dir")
            .arg(state.path())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start cni-install --wait");
        Installer {
            child,
            _state: state,
        }
    }

    /// SIGTERM, as the kubelet stops the DaemonSet's pod; its stderr.
    fn stop(mut self) -> String {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).expect("pid"));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        let out = std::mem::replace(&mut self.child, Command::new("true").spawn().expect("true"))
            .wait_with_output()
            .expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

impl Drop for Installer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `cni-install --uninstall`: what takes podtap off a node.
fn uninstall(conf: &Path, bin: &Path) {
    let out = Command::new(BIN)
        .args(["cni-install", "--uninstall", "--conf-dir"])
        .arg(conf)
        .arg("--bin-dir")
        .arg(bin)
        .arg("--plugin-state-dir")
        .arg(conf.join("state"))
        .output()
        .expect("run cni-install --uninstall");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn eventually(what: &str, cond: impl Fn() -> bool) {
    assert!(
        poll(Duration::from_secs(10), Duration::from_millis(50), cond),
        "{what}"
    );
}

fn conf_dir() -> (TempDir, PathBuf) {
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.path()).expect("conf dir");
    let path = dir.path().to_path_buf();
    (dir, path)
}

#[test]
fn flannel_and_calico_rewrites_are_chained_again_and_uninstall_keeps_theirs() {
    for (name, conf, write) in [
        (
            "10-flannel.conflist",
            flannel(),
            rewrite as fn(&Path, &Value),
        ),
        ("10-calico.conflist", calico(), replace as fn(&Path, &Value)),
    ] {
        let (_keep, dir) = conf_dir();
        let file = dir.join(name);
        let installer = Installer::start(&dir);
        // The CNI's DaemonSet may start after podtap's.
        std::thread::sleep(Duration::from_millis(300));
        write(&file, &conf);
        eventually(&format!("{name}: chained once written"), || chained(&file));

        // The CNI's pod restarts and writes its file again, with a change.
        let mut newer = conf.clone();
        newer["plugins"][0]["newer"] = json!(true);
        write(&file, &newer);
        eventually(&format!("{name}: chained again"), || {
            chained(&file) && read(&file)["plugins"][0]["newer"] == true
        });
        let plugins = read(&file)["plugins"].as_array().map(Vec::len);
        assert_eq!(
            plugins,
            newer["plugins"].as_array().map(|p| p.len() + 1),
            "{name}"
        );

        let said = installer.stop();
        assert!(
            chained(&file),
            "{name}: SIGTERM leaves podtap chained; {said}"
        );
        uninstall(&dir, &dir.join("bin"));
        assert_eq!(
            std::fs::read(&file).expect("conf"),
            text(&newer),
            "{name}: uninstall restores the owner's latest bytes; {said}"
        );
        assert!(!dir.join(format!("{name}.podtap-orig")).exists());
    }
}

#[test]
fn a_rewrite_after_the_installer_stopped_is_left_to_its_owner() {
    let (_keep, dir) = conf_dir();
    let file = dir.join("10-calico.conflist");
    replace(&file, &calico());
    let bin = TempDir::new();
    std::fs::create_dir_all(bin.path()).expect("bin dir");
    let run = |extra: &[&str]| {
        let out = Command::new(BIN)
            .args(["cni-install", "--conf-dir"])
            .arg(&dir)
            .arg("--bin-dir")
            .arg(bin.path())
            .args(extra)
            .output()
            .expect("run");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[]);
    run(&[]); // a restart of podtap's own pod: idempotent
    assert!(chained(&file));
    // calico-node restarts while podtap's pod is down: podtap is unchained.
    let mut newer = calico();
    newer["plugins"][0]["mtu"] = json!(1400);
    replace(&file, &newer);
    run(&["--uninstall"]);
    assert_eq!(
        std::fs::read(&file).expect("conf"),
        text(&newer),
        "the stale backup is not written over Calico's new file"
    );
}

#[test]
fn cilium_agent_restarts_are_chained_again() {
    let (_keep, dir) = conf_dir();
    let file = dir.join("05-cilium.conflist");
    replace(&file, &cilium());
    let installer = Installer::start(&dir);
    eventually("chained into Cilium's conf", || chained(&file));
    // The agent starts again: it writes its conf and renames foreign confs
    // (`*.conf`, `*.conflist`, `*.json`) away; podtap's backup is none.
    replace(&file, &cilium());
    for e in std::fs::read_dir(&dir).expect("dir").flatten() {
        let p = e.path();
        let foreign = p != file
            && p.extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| matches!(x, "conf" | "conflist" | "json"));
        if foreign {
            std::fs::rename(&p, p.with_extension("cilium_bak")).expect("rename");
        }
    }
    eventually("chained again after the agent's rewrite", || chained(&file));
    installer.stop();
    uninstall(&dir, &dir.join("bin"));
    assert_eq!(std::fs::read(&file).expect("conf"), text(&cilium()));
}

#[test]
fn multus_nodes_chain_the_cluster_network_and_leave_multus_alone() {
    let (_keep, dir) = conf_dir();
    let cluster = dir.join("10-flannel.conflist");
    let own = dir.join("00-multus.conf");
    rewrite(&cluster, &flannel());
    let multus_conf = multus(&Path::new("/host/etc/cni/net.d").join("10-flannel.conflist"));
    replace(&own, &multus_conf);
    let installer = Installer::start(&dir);
    eventually("chained into the cluster network", || chained(&cluster));
    // The Multus daemon sees the cluster network change and writes its file again.
    replace(&own, &multus_conf);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(std::fs::read(&own).expect("multus"), text(&multus_conf));
    assert!(
        !dir.join("00-multus.conflist").exists(),
        "no file shadows Multus's"
    );
    assert!(chained(&cluster));
    installer.stop();
    uninstall(&dir, &dir.join("bin"));
    assert_eq!(std::fs::read(&own).expect("multus"), text(&multus_conf));
    assert_eq!(std::fs::read(&cluster).expect("flannel"), text(&flannel()));
    let left: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        left.len(),
        3,
        "Multus's, Flannel's and the bin dir: {left:?}"
    );
}

/// A rolling update with maxSurge: the new pod runs before the old one
/// stops; neither's stop takes the entry or the binary away.
#[test]
fn a_surge_rollout_keeps_podtap_installed() {
    let (_keep, dir) = conf_dir();
    let file = dir.join("10-flannel.conflist");
    rewrite(&file, &flannel());
    let bin = TempDir::new();
    let old = Installer::start_with(&dir, bin.path());
    eventually("old pod chained", || chained(&file));
    let new = Installer::start_with(&dir, bin.path());
    std::thread::sleep(Duration::from_millis(300));
    old.stop();
    assert!(chained(&file), "the old pod's stop leaves podtap chained");
    assert!(bin.path().join("podtap").exists(), "and its binary");
    new.stop();
    assert!(chained(&file) && bin.path().join("podtap").exists());
    uninstall(&dir, bin.path());
    assert_eq!(std::fs::read(&file).expect("conf"), text(&flannel()));
    assert!(!bin.path().join("podtap").exists());
}
