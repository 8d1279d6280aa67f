//! `podtap scan` (and attach) on bad input: each bad netns path, process or user has its exit code.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use podtap_testkit::{Pod, Sleeper, TempDir};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// A failed podtap run: `code`, nothing on stdout, one `podtap: error:` line naming `path`.
fn assert_error(out: &Output, code: i32, path: &str) {
    let err = podtap_testkit::stderr(out);
    assert_eq!(out.status.code(), Some(code), "exit code; stderr: {err}");
    assert!(out.stdout.is_empty(), "no output on error");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one stderr line: {err:?}");
    assert!(err.ends_with('\n'), "line ends with a newline: {err:?}");
    assert!(lines[0].starts_with("podtap: error:"), "{err:?}");
    assert!(lines[0].contains(path), "names {path}: {err:?}");
}

// ---------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------

#[test]
fn missing_path_exits_3() {
    let path = format!("/run/netns/{}", podtap_testkit::unique("ptmissing"));
    assert!(!Path::new(&path).exists());
    assert_error(
        &podtap_testkit::podtap(BIN, &["scan", "--netns", &path]),
        3,
        &path,
    );
}

/// A path with a line break and an escape sequence in it: still one line,
/// and the escape is written out, not sent to the terminal.
#[test]
fn control_characters_in_the_path_stay_text() {
    let path = format!("/run/netns/{}\n\x1b[2J", podtap_testkit::unique("ptesc"));
    let out = podtap_testkit::podtap(BIN, &["scan", "--netns", &path]);
    assert_error(&out, 3, &path.replace('\n', " ").replace('\x1b', "\\x1b"));
    assert!(!out.stderr.contains(&0x1b), "no raw escape");
}

#[test]
fn regular_file_exits_4() {
    let dir = TempDir::new();
    let file = dir.path().join("not-a-netns");
    std::fs::write(&file, "x").unwrap();
    let path = file.display().to_string();
    assert_error(
        &podtap_testkit::podtap(BIN, &["scan", "--netns", &path]),
        4,
        &path,
    );
}

#[test]
fn directory_exits_4() {
    let dir = TempDir::new();
    let path = dir.path().display().to_string();
    assert_error(
        &podtap_testkit::podtap(BIN, &["scan", "--netns", &path]),
        4,
        &path,
    );
}

/// open(2) on a FIFO blocks until a writer comes: podtap must refuse it without opening.
#[test]
fn fifo_exits_4_without_blocking() {
    let dir = TempDir::new();
    let fifo = dir.path().join("fifo");
    podtap_testkit::sh(&format!("mkfifo {}", fifo.display()));
    let path = fifo.display().to_string();
    let mut child = Command::new(BIN)
        .args(["scan", "--netns", &path])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("podtap scan blocked on a FIFO");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_error(&child.wait_with_output().unwrap(), 4, &path);
}

#[test]
fn exited_process_exits_3() {
    let mut child = Command::new("true").spawn().unwrap();
    let path = format!("/proc/{}/ns/net", child.id());
    child.wait().unwrap();
    assert!(!Path::new(&path).exists(), "{path} outlived its process");
    let out = podtap_testkit::podtap(BIN, &["scan", "--netns", &path]);
    assert_error(&out, 3, &path);
    assert!(podtap_testkit::stderr(&out).contains("exited"), "hints why");
}

/// Exited but not yet reaped (a zombie, as a runtime may briefly hold it): also gone.
#[test]
fn zombie_process_exits_3() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    let stat = format!("/proc/{pid}/stat");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let state = std::fs::read_to_string(&stat).unwrap();
        // The state follows the parenthesised command name.
        if state
            .rsplit(')')
            .next()
            .unwrap()
            .trim_start()
            .starts_with('Z')
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "child {pid} never became a zombie"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let path = format!("/proc/{pid}/ns/net");
    let out = podtap_testkit::podtap(BIN, &["scan", "--netns", &path]);
    child.wait().unwrap();
    assert_error(&out, 3, &path);
}

/// An `--output` that cannot be written is refused (13) before the netns is
/// even opened, as attach refuses it: a directory that does not exist (and
/// is not made), or a directory in the file's place.
#[test]
fn an_output_that_cannot_be_written_exits_13_first() {
    let dir = TempDir::new();
    let missing = dir.path().join("no-such-dir").join("desc.json");
    let netns = format!("/run/netns/{}", podtap_testkit::unique("ptnever"));
    let scan_to = |target: &Path| {
        let target = target.to_str().expect("UTF-8 path");
        podtap_testkit::podtap(BIN, &["scan", "--netns", &netns, "--output", target])
    };
    assert_error(&scan_to(&missing), 13, "its directory does not exist");
    assert!(!dir.path().join("no-such-dir").exists(), "nothing made");
    assert_error(&scan_to(dir.path()), 13, "is a directory");
}

#[test]
fn host_netns_exits_5() {
    let path = "/proc/self/ns/net";
    let out = podtap_testkit::podtap(BIN, &["scan", "--netns", path]);
    assert_error(&out, 5, path);
    assert!(podtap_testkit::stderr(&out).contains("--allow-host-netns"));
}

/// The host netns is never attached: detach could not tell podtap's objects
/// from the host's, and a redirect on a host NIC cuts the node off.
#[test]
fn attach_refuses_the_host_netns_always() {
    if !podtap_testkit::root_or_skip("attach_refuses_the_host_netns_always") {
        return;
    }
    let state = podtap_testkit::StateDir::new();
    let path = "/proc/self/ns/net";
    let out =
        podtap_testkit::podtap_state(BIN, &state.0, &["attach", "--netns", path, "--id", "host"]);
    assert_error(&out, 5, path);
    let out = podtap_testkit::podtap_state(
        BIN,
        &state.0,
        &[
            "attach",
            "--netns",
            path,
            "--id",
            "host",
            "--allow-host-netns",
        ],
    );
    assert_eq!(
        podtap_testkit::exit_code(&out),
        2,
        "{}",
        podtap_testkit::stderr(&out)
    );
    let left: Vec<_> = std::fs::read_dir(&state.0)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        left.iter()
            .all(|n| !n.to_string_lossy().starts_with("host")),
        "{left:?}"
    );
}

/// An unprivileged user cannot scan: a pinned netns file is world-readable,
/// so open succeeds and setns(2) fails with EPERM (needs CAP_SYS_ADMIN); a
/// root process's `/proc/PID/ns/net` fails at open with EACCES. Both exit 6.
#[test]
fn unprivileged_user_exits_6() {
    if !podtap_testkit::root_or_skip("unprivileged_user_exits_6")
        || !podtap_testkit::tool_or_skip("unprivileged_user_exits_6", "setpriv")
    {
        return;
    }
    let pod = Pod::dual_stack();
    // A copy of the binary that user 65534 can surely execute.
    let dir = TempDir::new();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("podtap");
    std::fs::copy(BIN, &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = |path: &str| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .args(["scan", "--netns", path])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };

    let pinned = pod.pod.path_str();
    let out = as_nobody(&pinned);
    assert_error(&out, 6, &pinned);

    let sleeper = Sleeper::new(&pod.pod);
    let by_pid = sleeper.path();
    let out = as_nobody(&by_pid);
    assert_error(&out, 6, &by_pid);
    assert!(podtap_testkit::stderr(&out).contains("permission denied"));
}
