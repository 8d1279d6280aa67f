//! `podtap oci-hook` under a real OCI runtime: Debian's runc runs a busybox
//! bundle whose config.json joins a prepared pod netns and declares podtap as
//! its createRuntime (attach) and poststop (detach) hooks. The TAP must exist
//! while the container lives and be gone once `runc delete` ran the poststop hook.
//!
//! Bad-stdin tests need neither root nor runc.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use podtap_testkit::{oci_hook, sh, sh_ok, taps, TempDir};
use serde_json::{json, Value};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// Assert exit `code` and exactly one line on stderr.
fn expect_fail(o: &Output, code: i32, what: &str) {
    let err = podtap_testkit::stderr(o);
    assert_eq!(o.status.code(), Some(code), "{what}: stderr {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{what}: one line, got {err:?}"
    );
    assert!(err.starts_with("podtap: error: "), "{what}: {err}");
}

/// A runc bundle: busybox rootfs, `sleep`, the pod netns, podtap as hooks.
struct Bundle {
    dir: TempDir,
}

impl Bundle {
    fn new(netns: &str, state: &Path, annotations: Value) -> Self {
        let dir = TempDir::new();
        let rootfs = dir.path().join("rootfs");
        std::fs::create_dir_all(rootfs.join("bin")).expect("mkdir rootfs/bin");
        std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).expect("copy busybox");
        for applet in ["sh", "sleep", "ip", "ls", "cat"] {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet))
                .expect("symlink applet");
        }
        sh(&format!("runc spec --bundle {}", dir.path().display()));
        let file = dir.path().join("config.json");
        let mut config: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).expect("read config.json"))
                .expect("config.json is JSON");
        config["process"]["terminal"] = json!(false);
        config["process"]["args"] = json!(["sleep", "1000"]);
        for ns in config["linux"]["namespaces"]
            .as_array_mut()
            .expect("namespaces")
        {
            if ns["type"] == "network" {
                ns["path"] = json!(netns);
            }
        }
        // The hooks come from the repository's hooks.d files, as podman/CRI-O would inject
        // them, with the binary under test and a private state dir.
        let env = [
            format!("PODTAP_STATE_DIR={}", state.display()),
            "PODTAP_LOG=info".to_string(),
        ];
        let mut hooks = serde_json::Map::new();
        for hook_file in hooks_d() {
            let mut h = hook_file["hook"].clone();
            h["path"] = json!(BIN);
            h["env"] = json!(env);
            for stage in hook_file["stages"].as_array().expect("stages") {
                let list = hooks
                    .entry(stage.as_str().expect("stage"))
                    .or_insert_with(|| json!([]));
                list.as_array_mut().expect("list").push(h.clone());
            }
        }
        config["hooks"] = Value::Object(hooks);
        config["annotations"] = annotations;
        std::fs::write(
            &file,
            serde_json::to_vec_pretty(&config).expect("serialize"),
        )
        .expect("write config.json");
        Bundle { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// runc with a private root; container stdio goes to a log file so runc never holds our pipes.
struct Runc {
    root: TempDir,
    log: PathBuf,
}

impl Runc {
    fn new() -> Self {
        let root = TempDir::new();
        let log = root.path().join("runc.log");
        Runc { root, log }
    }

    fn run(&self, args: &[&str]) -> bool {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open log");
        let log2 = log.try_clone().expect("clone log");
        Command::new("runc")
            .arg("--root")
            .arg(self.root.path().join("state"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .status()
            .expect("run runc")
            .success()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The hooks.d files in hooks/oci/.
fn hooks_d() -> Vec<Value> {
    let dir = podtap_testkit::repo().join("hooks/oci");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("hooks/oci")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            serde_json::from_str(&std::fs::read_to_string(p).expect("read hook"))
                .expect("hook is JSON")
        })
        .collect()
}

#[test]
fn hooks_d_files_are_well_formed() {
    let hooks = hooks_d();
    let mut stages = Vec::new();
    for h in &hooks {
        assert_eq!(h["version"], "1.0.0");
        assert!(
            h["hook"]["path"]
                .as_str()
                .is_some_and(|p| p.starts_with('/')),
            "absolute hook path"
        );
        let args: Vec<&str> = h["hook"]["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(&args[..2], &["podtap", "oci-hook"]);
        assert_eq!(
            h["when"]["annotations"]["^io\\.podtap\\.enable$"], "^true$",
            "gated on the annotation"
        );
        for s in h["stages"].as_array().expect("stages") {
            stages.push((s.as_str().expect("stage").to_string(), args[2].to_string()));
        }
    }
    stages.sort();
    assert_eq!(
        stages,
        [
            ("createRuntime".to_string(), "attach".to_string()),
            ("poststop".to_string(), "detach".to_string())
        ]
    );
}

#[test]
fn runc_create_start_delete_attaches_and_detaches() {
    let test = "runc_create_start_delete_attaches_and_detaches";
    if !podtap_testkit::root_or_skip(test)
        || !podtap_testkit::tool_or_skip(test, "runc")
        || !podtap_testkit::tool_or_skip(test, "/bin/busybox")
    {
        return;
    }
    let pod = podtap_testkit::Pod::dual_stack();
    let state = TempDir::new();
    let bundle = Bundle::new(
        &pod.pod.path_str(),
        state.path(),
        json!({ "io.podtap.enable": "true", "io.podtap.mode": "tc", "io.podtap.queues": "2" }),
    );
    let runc = Runc::new();
    let id = podtap_testkit::unique("podtap-oci-");
    let before = podtap_testkit::snapshot(&pod.pod);

    assert!(
        runc.run(&[
            "create",
            "--bundle",
            &bundle.path().display().to_string(),
            &id
        ]),
        "runc create: {}",
        runc.log()
    );
    let attached = taps(&pod.pod);
    assert_eq!(
        attached.len(),
        1,
        "one TAP for eth0 after createRuntime: {attached:?}; runc log {}",
        runc.log()
    );
    let desc: Value = serde_json::from_str(
        &std::fs::read_to_string(bundle.path().join("podtap.json"))
            .expect("podtap.json in the bundle"),
    )
    .expect("description is JSON");
    assert_eq!(desc["attachment"]["id"], json!(id));
    let eth0 = desc["interfaces"]
        .as_array()
        .and_then(|l| l.iter().find(|i| i["name"] == "eth0"))
        .expect("eth0")
        .clone();
    assert_eq!(eth0["tap"]["name"], json!(attached[0]));
    assert_eq!(eth0["tap"]["queues"], 2, "queues come from the annotation");
    assert!(
        state.path().join(format!("{id}.json")).exists(),
        "checkpoint under the sandbox id = container id"
    );

    assert!(runc.run(&["start", &id]), "runc start: {}", runc.log());
    assert!(sh_ok(&format!(
        "runc --root {} state {id} | grep -q running",
        runc.root.path().join("state").display()
    )));
    assert_eq!(
        taps(&pod.pod),
        attached,
        "the TAP lives as long as the container"
    );
    // The container sees its own netns: the TAP is there.
    let seen = sh(&format!(
        "runc --root {} exec {id} ls /sys/class/net",
        runc.root.path().join("state").display()
    ));
    assert!(
        seen.split_whitespace().any(|n| n == attached[0]),
        "container sees {seen}"
    );

    assert!(
        runc.run(&["delete", "-f", &id]),
        "runc delete: {}",
        runc.log()
    );
    assert!(
        taps(&pod.pod).is_empty(),
        "poststop removed the TAP; runc log {}",
        runc.log()
    );
    assert!(
        !state.path().join(format!("{id}.json")).exists(),
        "checkpoint removed"
    );
    assert_eq!(
        podtap_testkit::snapshot(&pod.pod),
        before,
        "the pod netns is as before"
    );

    // detach as a hook is idempotent: a second poststop for the same state succeeds.
    let st =
        json!({ "ociVersion": "1.0.2", "id": id, "status": "stopped", "bundle": bundle.path() })
            .to_string();
    let o = oci_hook(BIN, state.path(), "detach", &[], &st);
    assert!(
        o.status.success(),
        "second detach: {}",
        podtap_testkit::stderr(&o)
    );
}

#[test]
fn hook_reads_the_pid_netns_and_flags() {
    let test = "hook_reads_the_pid_netns_and_flags";
    if !podtap_testkit::root_or_skip(test) {
        return;
    }
    // A process inside the pod netns stands in for the container's init.
    let pod = podtap_testkit::Pod::dual_stack();
    let state = TempDir::new();
    let out = TempDir::new();
    let mut child = Command::new("ip")
        .args(["netns", "exec", &pod.pod.name, "sleep", "100"])
        .spawn()
        .expect("spawn sleeper");
    let pid = child.id();
    // Wait until the child is inside the netns (ip netns exec has exec'd sleep).
    for _ in 0..200 {
        if std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p.ends_with("sleep")) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let id = podtap_testkit::unique("pidhook");
    // The annotation (a path inside the bundle) wins over --output; missing dirs are made.
    let output = out.path().join("vm/net.json");
    let st = json!({
        "ociVersion": "1.0.2", "id": id, "status": "creating", "pid": pid, "bundle": out.path(),
        "annotations": { "io.podtap.interfaces": "eth0", "io.podtap.output": "vm/net.json" }
    })
    .to_string();
    let o = oci_hook(
        BIN,
        state.path(),
        "attach",
        &["--output", "/nonexistent/ignored.json"],
        &st,
    );
    assert!(o.status.success(), "attach: {}", podtap_testkit::stderr(&o));
    let desc: Value =
        serde_json::from_str(&std::fs::read_to_string(&output).expect("--output written"))
            .expect("JSON");
    assert_eq!(desc["netns"]["path"], json!(format!("/proc/{pid}/ns/net")));
    assert_eq!(taps(&pod.pod).len(), 1);
    let o = oci_hook(BIN, state.path(), "detach", &[], &st);
    assert!(o.status.success(), "detach: {}", podtap_testkit::stderr(&o));
    assert!(taps(&pod.pod).is_empty());
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn bad_stdin_is_one_line_and_an_exit_code() {
    let state = TempDir::new();
    let bundle = TempDir::new();
    // Invalid JSON, wrong shape, missing id: invalid input (13).
    for (stdin, what) in [
        ("{not json", "invalid JSON"),
        ("", "empty stdin"),
        ("[]", "not an object"),
        (
            r#"{"ociVersion":"1.0.2","status":"creating","pid":1}"#,
            "no id",
        ),
        (
            r#"{"ociVersion":"1.0.2","id":"c","pid":"one"}"#,
            "pid not a number",
        ),
    ] {
        expect_fail(&oci_hook(BIN, state.path(), "attach", &[], stdin), 13, what);
        expect_fail(&oci_hook(BIN, state.path(), "detach", &[], stdin), 13, what);
    }
    // An id that cannot be a sandbox id: 7.
    expect_fail(
        &oci_hook(
            BIN,
            state.path(),
            "attach",
            &[],
            r#"{"ociVersion":"1.0.2","id":"../../etc"}"#,
        ),
        7,
        "bad id",
    );
    // No netns anywhere: 13. A bad annotation: 13. An output escaping the bundle: 13.
    let st = |ann: Value| {
        json!({ "ociVersion": "1.0.2", "id": "c1", "status": "creating", "bundle": bundle.path(), "annotations": ann }).to_string()
    };
    expect_fail(
        &oci_hook(BIN, state.path(), "attach", &[], &st(json!({}))),
        13,
        "no netns",
    );
    expect_fail(
        &oci_hook(
            BIN,
            state.path(),
            "attach",
            &[],
            &st(json!({ "io.podtap.mode": "vepa" })),
        ),
        13,
        "bad mode",
    );
    expect_fail(
        &oci_hook(
            BIN,
            state.path(),
            "attach",
            &[],
            &st(json!({ "io.podtap.queues": "0" })),
        ),
        13,
        "bad queues",
    );
    expect_fail(
        &oci_hook(
            BIN,
            state.path(),
            "attach",
            &[],
            &st(json!({ "io.podtap.output": "/etc/shadow" })),
        ),
        13,
        "absolute output",
    );
    expect_fail(
        &oci_hook(
            BIN,
            state.path(),
            "attach",
            &[],
            &st(json!({ "io.podtap.output": "../x.json" })),
        ),
        13,
        "escaping output",
    );
    // An output through a symlink in the bundle (image content) could land anywhere: 13.
    let outside = TempDir::new();
    std::fs::create_dir_all(bundle.path().join("rootfs")).expect("rootfs");
    std::os::unix::fs::symlink(outside.path(), bundle.path().join("rootfs/etc")).expect("symlink");
    let o = oci_hook(
        BIN,
        state.path(),
        "attach",
        &[],
        &st(json!({ "io.podtap.output": "rootfs/etc/evil.json" })),
    );
    expect_fail(&o, 13, "output through a symlink");
    assert!(
        podtap_testkit::stderr(&o).contains("symlink"),
        "{}",
        podtap_testkit::stderr(&o)
    );
    assert!(
        !outside.path().join("evil.json").exists(),
        "nothing written outside the bundle"
    );
    // A netns path that does not exist: 3.
    std::fs::write(
        bundle.path().join("config.json"),
        json!({ "linux": { "namespaces": [{ "type": "network", "path": "/run/netns/podtap-no-such-netns" }] } }).to_string(),
    )
    .expect("write config.json");
    expect_fail(
        &oci_hook(BIN, state.path(), "attach", &[], &st(json!({}))),
        3,
        "missing netns",
    );
    // A config.json that is not JSON: 13.
    std::fs::write(bundle.path().join("config.json"), "{").expect("write config.json");
    expect_fail(
        &oci_hook(BIN, state.path(), "attach", &[], &st(json!({}))),
        13,
        "bad config.json",
    );
    // Detach of something never attached: success, nothing on stdout.
    let o = oci_hook(BIN, state.path(), "detach", &[], &st(json!({})));
    assert!(
        o.status.success(),
        "detach unknown: {}",
        podtap_testkit::stderr(&o)
    );
    assert!(o.stdout.is_empty());
    // An unknown action is a usage error.
    assert_eq!(
        oci_hook(BIN, state.path(), "frob", &[], "{}").status.code(),
        Some(2)
    );
}
