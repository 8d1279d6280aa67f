//! The node image (root + podman): the repository's Containerfile builds
//! with podman (private storage, locks, runc state and tmp dirs:
//! tests/runtimes/podman-private.sh), FROM scratch, holding the static
//! podtap binary alone with `podtap cni-install` as its entry point. It then
//! runs as hooks/k8s/daemonset.yaml runs it, with a temp dir's conf and bin
//! dirs mounted where the DaemonSet mounts the node's /etc/cni/net.d and
//! /opt/cni/bin:
//! 1. one run chains podtap into the first conflist (last, once; the other
//!    file untouched) and puts a binary that runs into the bin dir;
//! 2. a second run changes nothing: every file byte-identical;
//! 3. the DaemonSet's own args (`--wait`, read from daemonset.yaml) keep it
//!    running; `podman stop` (SIGTERM to PID 1, as a rolling update sends)
//!    leaves podtap installed;
//! 4. uninstall.yaml's args (`--uninstall --wait`) take it off: the conf
//!    dir is back byte for byte, the binary gone, and the container stays
//!    up until it is stopped.
//!
//! The containers run as the DaemonSets run them: the node's PID namespace
//! (`hostPID`) and a state dir mounted at `/run/podtap` (the test's own).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use podtap_testkit::{root_or_skip, stderr, stdout, tool_or_skip, unique, TempDir};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// The node binary, static as the FROM-scratch image needs it: `cargo
/// build-node` (tests/run.sh builds it before the tests) from this tree.
fn node_binary() -> PathBuf {
    let bin = podtap_testkit::repo().join("target/x86_64-unknown-linux-gnu/release/podtap");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build-node` first (tests/run.sh does)",
        bin.display()
    );
    bin
}

/// The tag docs/kubernetes.md and the DaemonSet use.
fn tag() -> String {
    format!("localhost/podtap:{}", env!("CARGO_PKG_VERSION"))
}

/// The host's own podman state (each path with its mtime, or absent): the
/// private podman must leave it as it was.
fn host_podman_state() -> Vec<(String, Option<std::time::SystemTime>)> {
    [
        "/dev/shm/libpod_lock",
        "/var/lib/containers",
        "/run/containers",
        "/run/libpod",
    ]
    .iter()
    .map(|p| {
        let mtime = std::fs::symlink_metadata(p).and_then(|m| m.modified()).ok();
        (p.to_string(), mtime)
    })
    .collect()
}

/// podman with every path under `work`, its containers under a cgroup
/// parent of the test's own, removed (with what podman leaves in it) on drop.
struct Podman {
    work: TempDir,
    cgroup: String,
}

impl Podman {
    fn new() -> Self {
        Podman {
            work: TempDir::new(),
            cgroup: unique("podtap-image-"),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("timeout")
            .arg("300")
            .arg(podtap_testkit::repo().join("tests/runtimes/podman-private.sh"))
            .arg(self.work.path().join("podman"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run podman")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "podman {args:?} failed ({:?}): {}{}",
            out.status.code(),
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    }

    /// What a container printed (podman logs writes its stderr to stderr).
    fn logs(&self, name: &str) -> String {
        let out = self.run(&["logs", name]);
        stdout(&out) + &stderr(&out)
    }

    /// `podman run` of the image, DaemonSet-style: no network, the host's
    /// CNI dirs replaced by `host`'s.
    fn run_image(&self, host: &Host, detach: Option<&str>, args: &[String]) -> Output {
        let conf = format!("{}:/host/etc/cni/net.d", host.conf.display());
        let bin = format!("{}:/host/opt/cni/bin", host.bin.display());
        let cgroup = format!("/{}", self.cgroup);
        let state = format!("{}:/run/podtap", host.state.display());
        let mut argv = vec![
            "run",
            "--network",
            "none",
            "--pid",
            "host",
            "--cgroup-parent",
            &cgroup,
        ];
        match detach {
            Some(name) => argv.extend(["-d", "--name", name]),
            None => argv.push("--rm"),
        }
        argv.extend(["-v", &conf, "-v", &bin, "-v", &state]);
        let image = tag();
        argv.push(&image);
        argv.extend(args.iter().map(String::as_str));
        self.run(&argv)
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = self.run(&["rm", "--all", "--force", "--time", "0"]);
        // runc's cgroupfs directories outlive `podman rm` here: remove the
        // (empty) tree under this test's own parent, in every hierarchy.
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "find /sys/fs/cgroup/*/{0} /sys/fs/cgroup/{0} -depth -type d -exec rmdir {{}} + 2>/dev/null",
                self.cgroup
            ))
            .status();
    }
}

/// A node's CNI dirs: `conf` (a bridge conflist from hooks/cni without
/// podtap, and another network's conflist after it) and `bin` (one plugin).
struct Host {
    _dir: TempDir,
    conf: PathBuf,
    bin: PathBuf,
    /// What the containers see as `/run/podtap`.
    state: PathBuf,
}

impl Host {
    fn new() -> Self {
        let dir = TempDir::new();
        let (conf, bin) = (dir.path().join("net.d"), dir.path().join("bin"));
        let state = dir.path().join("state");
        std::fs::create_dir_all(&conf).expect("conf dir");
        std::fs::create_dir_all(&bin).expect("bin dir");
        std::fs::create_dir_all(&state).expect("state dir");
        let shipped =
            std::fs::read(podtap_testkit::repo().join("hooks/cni/bridge-podtap.conflist"))
                .expect("hooks/cni/bridge-podtap.conflist");
        let mut list: serde_json::Value = serde_json::from_slice(&shipped).expect("conflist JSON");
        list["plugins"]
            .as_array_mut()
            .expect("plugins")
            .retain(|p| p["type"] != "podtap");
        let text = serde_json::to_string_pretty(&list).expect("serialize") + "\n";
        std::fs::write(conf.join("10-bridge.conflist"), text).expect("write conflist");
        std::fs::write(
            conf.join("20-other.conflist"),
            r#"{"cniVersion":"1.0.0","name":"other","plugins":[{"type":"ptp"}]}"#,
        )
        .expect("write conflist");
        std::fs::write(bin.join("bridge"), b"#!/bin/sh\nexit 0\n").expect("write plugin");
        Host {
            _dir: dir,
            conf,
            bin,
            state,
        }
    }

    /// Every file of both dirs, by path, with its bytes.
    fn files(&self) -> BTreeMap<String, Vec<u8>> {
        let mut files = BTreeMap::new();
        for dir in [&self.conf, &self.bin] {
            for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
                let bytes = std::fs::read(entry.path()).expect("read file");
                files.insert(entry.path().display().to_string(), bytes);
            }
        }
        files
    }
}

/// The `args:` of the container of `file`, a DaemonSet of hooks/k8s/ (one
/// JSON-style flow list), checked to mount and see what the test gives it.
fn daemonset_args(file: &str) -> Vec<String> {
    let yaml = std::fs::read_to_string(podtap_testkit::repo().join("hooks/k8s").join(file))
        .expect("a DaemonSet of hooks/k8s");
    for mount in [
        "mountPath: /host/etc/cni/net.d",
        "mountPath: /host/opt/cni/bin",
        "mountPath: /run/podtap",
        "hostPID: true",
    ] {
        assert!(yaml.contains(mount), "{file} no longer has {mount}");
    }
    assert!(
        yaml.contains(&format!("image: {}", tag())),
        "the DaemonSet names another image"
    );
    let line = yaml
        .lines()
        .find_map(|l| l.trim().strip_prefix("args: "))
        .expect("an args: line in daemonset.yaml");
    serde_json::from_str(line).expect("args: is a flow list of quoted strings")
}

/// Build the image from the Containerfile, with the podtap under test as its binary.
fn build(podman: &Podman) {
    let context = podman.work.path().join("context");
    std::fs::create_dir_all(&context).expect("context dir");
    std::fs::copy(node_binary(), context.join("podtap")).expect("copy binary");
    let containerfile = podtap_testkit::repo()
        .join("Containerfile")
        .display()
        .to_string();
    let context = context.display().to_string();
    podman.ok(&[
        "build",
        "--network",
        "none",
        "-f",
        &containerfile,
        "--build-arg",
        "PODTAP=podtap",
        "-t",
        &tag(),
        &context,
    ]);
    let config = podman.ok(&[
        "image",
        "inspect",
        "--format",
        "{{json .Config.Entrypoint}} {{json .Config.Cmd}}",
        &tag(),
    ]);
    assert_eq!(
        config.trim(),
        r#"["/usr/local/bin/podtap","cni-install"] ["--conf-dir","/host/etc/cni/net.d","--bin-dir","/host/opt/cni/bin"]"#
    );
    // FROM scratch: the image holds the binary and nothing else.
    let name = unique("podtap-image-list-");
    podman.ok(&["create", "--name", &name, &tag()]);
    let tar = podman.work.path().join("export.tar");
    podman.ok(&["export", "-o", &tar.display().to_string(), &name]);
    podman.ok(&["rm", &name]);
    let listing = podtap_testkit::sh(&format!("tar -tf {}", tar.display()));
    let files: Vec<&str> = listing.lines().filter(|l| !l.ends_with('/')).collect();
    assert_eq!(files, ["usr/local/bin/podtap"], "{listing}");
}

/// After an install: podtap chained last and once into the first conflist,
/// its original kept beside it, the other conflist untouched, and the very
/// binary under test in the bin dir, running.
fn check_installed(
    host: &Host,
    original: &BTreeMap<String, Vec<u8>>,
    installed: &BTreeMap<String, Vec<u8>>,
) {
    let conf = |name: &str| host.conf.join(name).display().to_string();
    let chain: serde_json::Value =
        serde_json::from_slice(&installed[&conf("10-bridge.conflist")]).expect("chain JSON");
    let types: Vec<&str> = chain["plugins"]
        .as_array()
        .expect("plugins")
        .iter()
        .filter_map(|p| p["type"].as_str())
        .collect();
    assert_eq!(types, ["bridge", "podtap"], "{chain:#}");
    assert_eq!(
        installed[&conf("10-bridge.conflist.podtap-orig")],
        original[&conf("10-bridge.conflist")]
    );
    assert_eq!(
        installed[&conf("20-other.conflist")],
        original[&conf("20-other.conflist")]
    );
    let bin = host.bin.join("podtap");
    let built = std::fs::read(node_binary()).expect("podtap binary");
    assert!(
        installed[&bin.display().to_string()] == built,
        "the installed binary differs"
    );
    let version = Command::new(&bin)
        .arg("--version")
        .output()
        .expect("run it");
    assert!(version.status.success(), "{}", stderr(&version));
    assert!(
        stdout(&version).contains(env!("CARGO_PKG_VERSION")),
        "{}",
        stdout(&version)
    );
}

#[test]
fn the_image_installs_like_the_daemonset_stays_on_sigterm_and_uninstalls_when_told() {
    let test = "the_image_installs_like_the_daemonset_stays_on_sigterm_and_uninstalls_when_told";
    if !root_or_skip(test) || !tool_or_skip(test, "podman") || !tool_or_skip(test, "tar") {
        return;
    }
    let host_before = host_podman_state();
    let podman = Podman::new();
    build(&podman);
    let host = Host::new();
    let original = host.files();

    // 1. The image's own command: install once.
    let out = podman.run_image(&host, None, &[]);
    assert!(out.status.success(), "first run: {}", stderr(&out));
    assert!(stderr(&out).contains("podtap: chained in /host/etc/cni/net.d/10-bridge.conflist"));
    let installed = host.files();
    check_installed(&host, &original, &installed);

    // 2. A second run changes nothing.
    let out = podman.run_image(&host, None, &[]);
    assert!(out.status.success(), "second run: {}", stderr(&out));
    assert!(stderr(&out).contains("already chained"), "{}", stderr(&out));
    assert!(
        host.files() == installed,
        "a second run changed the conf or bin dir"
    );

    // 3. As the DaemonSet runs it: stays, changes nothing, stays installed on SIGTERM.
    let name = unique("podtap-ds-");
    let out = podman.run_image(&host, Some(&name), &daemonset_args("daemonset.yaml"));
    assert!(out.status.success(), "DaemonSet run: {}", stderr(&out));
    let deadline = Instant::now() + Duration::from_secs(120);
    while !podman.logs(&name).contains("already chained") {
        assert!(
            Instant::now() < deadline,
            "the DaemonSet container never installed"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        host.files() == installed,
        "the DaemonSet's install changed an installed node"
    );
    let state = podman.ok(&["inspect", "--format", "{{.State.Status}}", &name]);
    assert_eq!(state.trim(), "running", "--wait did not keep it running");
    podman.ok(&["stop", "--time", "60", &name]);
    let code = podman.ok(&["inspect", "--format", "{{.State.ExitCode}}", &name]);
    assert_eq!(code.trim(), "0", "{}", podman.logs(&name));
    assert!(
        podman
            .logs(&name)
            .contains("SIGTERM: leaving podtap chained"),
        "{}",
        podman.logs(&name)
    );
    podman.ok(&["rm", &name]);
    assert!(
        host.files() == installed,
        "SIGTERM (a rolling update) must leave podtap installed"
    );

    // 4. As uninstall.yaml runs it: takes podtap off, then stays until stopped.
    let name = unique("podtap-un-");
    let out = podman.run_image(&host, Some(&name), &daemonset_args("uninstall.yaml"));
    assert!(out.status.success(), "uninstall run: {}", stderr(&out));
    let deadline = Instant::now() + Duration::from_secs(120);
    while !podman
        .logs(&name)
        .contains("uninstalled; waiting for SIGTERM")
    {
        assert!(Instant::now() < deadline, "the uninstall never finished");
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(
        host.files() == original,
        "uninstall did not restore the node's CNI dirs"
    );
    podman.ok(&["stop", "--time", "60", &name]);
    let code = podman.ok(&["inspect", "--format", "{{.State.ExitCode}}", &name]);
    assert_eq!(code.trim(), "0", "{}", podman.logs(&name));
    podman.ok(&["rm", &name]);
    drop(podman);
    assert_eq!(
        host_before,
        host_podman_state(),
        "podman changed the host's podman state"
    );
}

/// `--sweep-every` belongs to a wait: alone it is a usage error.
#[test]
fn cni_install_sweep_every_needs_wait() {
    let out = podtap_testkit::podtap(BIN, &["cni-install", "--sweep-every", "5"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
