//! Processes: shell commands, skips, outputs and waiting for the kernel to settle.

use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// The next number of this process's counter (names and subnets).
pub(crate) fn next() -> u32 {
    COUNTER.fetch_add(1, Ordering::SeqCst)
}

/// A short unique tag: `<prefix><pid>x<n>`.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}{}x{}", std::process::id(), next())
}

/// True when running as root; otherwise prints why the test is skipped.
pub fn root_or_skip(test: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    eprintln!("SKIP {test}: needs root (network namespaces, TAPs)");
    false
}

/// Whether `tool` is on PATH. Under CI=true a missing tool fails the test instead of skipping it.
pub fn tool_or_skip(test: &str, tool: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success())
        || std::path::Path::new(tool).exists();
    if found {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: required tool {tool} is missing (CI=true: install it with tests/install-deps.sh)");
    }
    eprintln!("SKIP {test}: {tool} is not installed (run tests/install-deps.sh)");
    false
}

/// Root, `ip` and `tc`, or skip (printing why).
pub fn net_tools_or_skip(test: &str) -> bool {
    root_or_skip(test) && tool_or_skip(test, "ip") && tool_or_skip(test, "tc")
}

/// Run a shell command; panic with its output on failure.
pub fn sh(cmd: &str) -> String {
    let out = Command::new("bash")
        .arg("-c")
        .arg(cmd)
        .output()
        .expect("spawn bash");
    if !out.status.success() {
        panic!(
            "command failed: {cmd}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Run a shell command and return whether it succeeded.
pub fn sh_ok(cmd: &str) -> bool {
    Command::new("bash")
        .arg("-c")
        .arg(cmd)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Run `cmd` with `stdin` piped in and collect its output. The program may exit
/// before reading its input (a usage error), so a broken pipe is not a failure.
pub fn run_with_stdin(cmd: &mut Command, stdin: &str) -> Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let written = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes());
    if let Err(e) = written {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
    }
    child.wait_with_output().expect("wait")
}

/// A process's stdout, as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A process's stderr, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A process's exit code (-1 when a signal ended it).
pub fn exit_code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Poll `cond` every `every` until it holds (true) or `timeout` passed (false).
pub fn poll(timeout: Duration, every: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(every);
    }
}

/// Poll `cond` for up to 5 s (link state settling after a down/up); panics if it never holds.
pub fn wait_for(cond: impl Fn() -> bool) {
    assert!(
        poll(Duration::from_secs(5), Duration::from_millis(20), cond),
        "condition not reached in 5 s"
    );
}
