//! `podtap exec` hands the command only what it needs: stdio and
//! the TAP queue fds, nothing else podtap inherited; with `--user` it runs
//! as that user with no capabilities and no_new_privs, and still holds the
//! TAP fds.

use std::collections::BTreeSet;
use std::process::Output;

use podtap_testkit::*;

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// What the command prints: its argv (the appended VMM arguments), its
/// credentials, the TAP behind each low fd (`iff:` in fdinfo), and last, by
/// exec'ing `ls` (which inherits exactly the shell's fds and adds one of its
/// own, on `/proc/<pid>/fd`), every open fd and what it is.
const REPORT: &str = r#"
echo "ARGS $*"
grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/$$/status
for fd in 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do
  if [ -e /proc/$$/fdinfo/$fd ]; then
    echo "IFF $fd"
    grep '^iff:' /proc/$$/fdinfo/$fd
  fi
done
exec ls -l /proc/self/fd
"#;

/// Run `podtap <args> -- sh -c REPORT` with fd 9 open (as a runtime's leaked
/// fd would be) and return its output.
fn run_with_leaked_fd(state: &StateDir, args: &[&str]) -> Output {
    let bin = env!("CARGO_BIN_EXE_podtap");
    std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"exec "$0" "$@" 9</dev/null"#)
        .arg(bin)
        .args(args)
        .args(["--", "sh", "-c", REPORT, "sh"])
        .env("PODTAP_STATE_DIR", &state.0)
        .output()
        .expect("run podtap exec")
}

/// Lines of `out` that start with `tag `, without it.
fn tagged<'a>(out: &'a str, tag: &str) -> Vec<&'a str> {
    out.lines()
        .filter_map(|l| l.strip_prefix(tag).and_then(|r| r.strip_prefix(' ')))
        .collect()
}

/// The fds named in the appended `fd=`/`fds=` arguments.
fn handed_over(out: &str) -> BTreeSet<String> {
    let args = tagged(out, "ARGS").join(" ");
    args.split([',', ' '])
        .filter_map(|kv| kv.strip_prefix("fds=").or_else(|| kv.strip_prefix("fd=")))
        .flat_map(|v| v.split(':').map(str::to_string))
        .collect()
}

/// The fds `ls -l /proc/self/fd` listed, but for its own (on `/proc/<pid>/fd`).
fn open_fds(out: &str) -> BTreeSet<String> {
    out.lines()
        .filter_map(|l| l.split_once(" -> "))
        .filter(|(_, target)| !(target.starts_with("/proc/") && target.ends_with("/fd")))
        .filter_map(|(head, _)| head.split_whitespace().last().map(str::to_string))
        .collect()
}

/// Stdio and `taps`.
fn expected_fds(taps: &BTreeSet<String>) -> BTreeSet<String> {
    let mut fds: BTreeSet<String> = ["0", "1", "2"].map(String::from).into();
    fds.extend(taps.iter().cloned());
    fds
}

/// The fds whose fdinfo names TAP `tap_eth0`.
fn tap_fds(out: &str) -> BTreeSet<String> {
    let lines: Vec<&str> = out.lines().collect();
    lines
        .windows(2)
        .filter_map(|w| {
            let fd = w[0].strip_prefix("IFF ")?;
            let iff = w[1].strip_prefix("iff:")?.trim();
            (iff == "tap_eth0").then(|| fd.to_string())
        })
        .collect()
}

fn status_line<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {key} in {out}"))
}

fn attached(state: &StateDir, pod: &Pod, id: &str) {
    json_ok(&attach(BIN, &state.0, pod, id, &["--queues", "2"]));
}

#[test]
fn exec_passes_only_stdio_and_the_tap_fds() {
    if !root_or_skip("exec_passes_only_stdio_and_the_tap_fds") {
        return;
    }
    let pod = Pod::new();
    pod.add_veth("eth0", "veth0", 0, false);
    let state = StateDir::new();
    let id = unique("xfd");
    attached(&state, &pod, &id);

    // The harness does leak fd 9 into what it starts.
    let control = sh(r#"sh -c 'ls /proc/$$/fd' 9</dev/null"#);
    assert!(control.split_whitespace().any(|f| f == "9"), "{control}");

    let out = run_with_leaked_fd(&state, &["exec", "--id", &id, "--vmm", "qemu"]);
    assert!(out.status.success(), "exec: {}", stderr(&out));
    let text = stdout(&out);
    let taps = handed_over(&text);
    assert_eq!(taps.len(), 2, "two queues: {text}");
    assert_eq!(open_fds(&text), expected_fds(&taps), "{text}");
    assert_eq!(tap_fds(&text), taps, "{text}");
    // Without --user the VMM stays root (as before).
    assert!(status_line(&text, "Uid:").starts_with("0\t"), "{text}");

    let out = detach(BIN, &state, &id);
    assert!(out.status.success(), "detach: {}", stderr(&out));
}

#[test]
fn exec_user_runs_the_vmm_as_nobody_without_capabilities_holding_the_taps() {
    if !root_or_skip("exec_user_runs_the_vmm_as_nobody_without_capabilities_holding_the_taps") {
        return;
    }
    let pod = Pod::new();
    pod.add_veth("eth0", "veth0", 0, false);
    let state = StateDir::new();
    let id = unique("xusr");
    attached(&state, &pod, &id);

    let args = [
        "exec",
        "--id",
        &id,
        "--vmm",
        "qemu",
        "--user",
        "65534:65534",
    ];
    let out = run_with_leaked_fd(&state, &args);
    assert!(out.status.success(), "exec --user: {}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(status_line(&text, "Uid:"), "65534\t65534\t65534\t65534");
    assert_eq!(status_line(&text, "Gid:"), "65534\t65534\t65534\t65534");
    assert_eq!(status_line(&text, "Groups:"), "");
    for set in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
        assert_eq!(status_line(&text, set), "0000000000000000", "{set} {text}");
    }
    assert_eq!(status_line(&text, "NoNewPrivs:"), "1");
    // Still holding both queues of the TAP, and nothing else.
    let taps = handed_over(&text);
    assert_eq!(taps.len(), 2, "{text}");
    assert_eq!(tap_fds(&text), taps, "{text}");
    assert_eq!(open_fds(&text), expected_fds(&taps), "{text}");

    // --enter-netns takes --user too: no fds beyond stdio, no capabilities.
    let args = ["exec", "--id", &id, "--enter-netns", "--user", "65534"];
    let out = run_with_leaked_fd(&state, &args);
    assert!(
        out.status.success(),
        "exec --enter-netns --user: {}",
        stderr(&out)
    );
    let text = stdout(&out);
    assert_eq!(status_line(&text, "CapEff:"), "0000000000000000");
    assert_eq!(open_fds(&text), expected_fds(&BTreeSet::new()), "{text}");

    // A bad --user is a usage error before anything runs.
    let out = podtap_state(
        BIN,
        &state.0,
        &[
            "exec", "--id", &id, "--vmm", "qemu", "--user", "nobody", "--", "true",
        ],
    );
    assert_eq!(exit_code(&out), 13, "{}", stderr(&out));

    let out = detach(BIN, &state, &id);
    assert!(out.status.success(), "detach: {}", stderr(&out));
}
