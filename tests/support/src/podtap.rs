//! Running the podtap binary under test (its path is `bin`: the test's
//! `env!("CARGO_BIN_EXE_podtap")`), and reading what it prints.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::dirs::StateDir;
use crate::pod::Pod;
use crate::run::{stderr, stdout};

/// Run podtap with `args`.
pub fn podtap(bin: &str, args: &[&str]) -> Output {
    Command::new(bin).args(args).output().expect("run podtap")
}

/// A `podtap` command (not yet run) with a state dir of the test's own.
pub fn podtap_cmd(bin: &str, state: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env("PODTAP_STATE_DIR", state);
    cmd
}

/// podtap with a state dir of the test's own.
pub fn podtap_state(bin: &str, state: &Path, args: &[&str]) -> Output {
    podtap_cmd(bin, state)
        .args(args)
        .output()
        .expect("run podtap")
}

/// podtap with a state dir of the test's own, which must succeed; its stdout.
pub fn podtap_ok(bin: &str, state: &Path, args: &[&str]) -> String {
    let out = podtap_state(bin, state, args);
    assert!(
        out.status.success(),
        "podtap {args:?} failed ({:?}): {}",
        out.status.code(),
        stderr(&out)
    );
    stdout(&out)
}

/// `podtap attach --netns <pod> --id <id>` plus `extra` (not yet run).
pub fn attach_cmd(bin: &str, state: &Path, pod: &Pod, id: &str, extra: &[&str]) -> Command {
    let mut c = podtap_cmd(bin, state);
    c.args(["attach", "--netns", &pod.pod.path_str(), "--id", id])
        .args(extra);
    c
}

/// `podtap attach --netns <pod> --id <id>` plus `extra`.
pub fn attach(bin: &str, state: &Path, pod: &Pod, id: &str, extra: &[&str]) -> Output {
    attach_cmd(bin, state, pod, id, extra)
        .output()
        .expect("run podtap")
}

/// `podtap attach ... --mode <mode>`, which must succeed; its description.
pub fn attach_json(bin: &str, state: &Path, pod: &Pod, id: &str, mode: &str) -> Value {
    json_ok(&attach(bin, state, pod, id, &["--mode", mode]))
}

/// `podtap oci-hook <action> <extra>` with `stdin` and a private state dir.
pub fn oci_hook(bin: &str, state: &Path, action: &str, extra: &[&str], stdin: &str) -> Output {
    crate::run::run_with_stdin(
        podtap_cmd(bin, state)
            .args(["oci-hook", action])
            .args(extra),
        stdin,
    )
}

/// `podtap detach --id <id>` with `state`.
pub fn detach(bin: &str, state: &StateDir, id: &str) -> Output {
    podtap_state(bin, &state.0, &["detach", "--id", id])
}

/// `podtap check --id <id>` with `state`.
pub fn check(bin: &str, state: &StateDir, id: &str) -> Output {
    podtap_state(bin, &state.0, &["check", "--id", id])
}

/// Assert success and parse stdout as JSON.
pub fn json_ok(o: &Output) -> Value {
    assert!(
        o.status.success(),
        "podtap failed ({:?}): {}",
        o.status.code(),
        stderr(o)
    );
    serde_json::from_slice(&o.stdout).expect("podtap prints JSON")
}

/// Interface `name` of a description (`podtap scan` / `attach` JSON); panics when absent.
pub fn iface<'a>(desc: &'a Value, name: &str) -> &'a Value {
    desc["interfaces"]
        .as_array()
        .unwrap_or_else(|| panic!("expected an array: {}", desc["interfaces"]))
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no interface {name} in {desc:#}"))
}
