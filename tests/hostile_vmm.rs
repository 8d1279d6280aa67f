//! `podtap watch` against VMM sockets served by a hostile party:
//! a QMP server that sends an endless line, one that drips its greeting a
//! byte at a time, a Cloud Hypervisor API that sends endless headers, a huge
//! Content-Length or a dripping status line, and an API socket bound by
//! another uid. Each must end as an `error` event from a watch that goes on,
//! with its memory bounded, and no TAP fd may reach a foreign uid.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use podtap_testkit::*;

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");
use serde_json::Value;

/// Peak RSS podtap watch may reach while a server offers it without end.
/// Its own baseline (a debug build) is well under this; the old reader
/// grew with whatever the server sent.
const RSS_BOUND_KIB: u64 = 48 * 1024;

/// What a hostile server does on every connection.
#[derive(Clone, Copy)]
enum Hostile {
    /// Send `prefix`, then `x` without end (no newline, no blank line).
    Endless(&'static [u8]),
    /// Send `text` one byte per 100 ms, then `x` one per 100 ms, forever.
    Drip(&'static [u8]),
}

/// A server on `sock` that treats every connection per `how` until dropped;
/// counts what it managed to send.
struct Server {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
}

impl Server {
    fn start(sock: &Path, how: Hostile) -> Server {
        let listener = UnixListener::bind(sock).expect("bind the hostile socket");
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (s, n) = (stop.clone(), sent.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let (s, n) = (s.clone(), n.clone());
                        std::thread::spawn(move || serve(conn, how, &s, &n));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Server { stop, sent }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn serve(mut conn: UnixStream, how: Hostile, stop: &AtomicBool, sent: &AtomicU64) {
    conn.set_nonblocking(false).expect("blocking connection");
    let chunk = [b'x'; 64 * 1024];
    match how {
        Hostile::Endless(prefix) => {
            if conn.write_all(prefix).is_err() {
                return;
            }
            while !stop.load(Ordering::SeqCst) {
                match conn.write(&chunk) {
                    Ok(n) => sent.fetch_add(n as u64, Ordering::SeqCst),
                    Err(_) => return,
                };
            }
        }
        Hostile::Drip(text) => {
            for b in text.iter().chain(std::iter::repeat(&b'x')) {
                if stop.load(Ordering::SeqCst) || conn.write_all(&[*b]).is_err() {
                    return;
                }
                sent.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Watch's peak resident set (VmHWM), in KiB.
fn peak_rss_kib(watch: &Watch) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", watch.pid()))
        .expect("watch is still running");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

/// SIGTERM; watch must still be alive to answer it with `stopped`, exit 0.
fn stop(watch: Watch) {
    watch.signal("TERM");
    watch.next_of("stopped", 20);
    assert_eq!(watch.exit_code(), Some(0));
}

/// Attach a pod (tc), serve `how` on a socket, run watch against it with
/// `flag`: the first VMM error event must contain `expect`, watch's peak RSS
/// stay under [`RSS_BOUND_KIB`], and watch live on.
fn hostile_case(test: &str, flag: &str, how: Hostile, wait_secs: u64, expect: &str) {
    if !root_or_skip(test) {
        return;
    }
    let work = TempDir::new();
    let sock = work.path().join("vmm.sock");
    let server = Server::start(&sock, how);
    let pod = Pod::dual_stack();
    let state = StateDir::new();
    let id = unique("hostile");
    json_ok(&podtap_state(
        BIN,
        &state.0,
        &["attach", "--netns", &pod.pod.path_str(), "--id", &id],
    ));
    let sock_arg = sock.display().to_string();
    let watch = Watch::start(BIN, &state.0, &id, &[flag, &sock_arg]);
    let error = watch.next_of("error", wait_secs);
    let text = error["error"].as_str().expect("error text");
    assert!(text.contains(expect), "{test}: {error}");
    let peak = peak_rss_kib(&watch);
    eprintln!(
        "{test}: peak RSS {peak} KiB; the server sent {} bytes",
        server.sent.load(Ordering::SeqCst)
    );
    assert!(peak < RSS_BOUND_KIB, "{test}: watch grew to {peak} KiB");
    // A hostile VMM is an error event, not the end: watch goes on. The
    // server goes first, so a retry in progress ends at once and cannot
    // hold the SIGTERM for a whole deadline.
    watch.next_of("ready", wait_secs);
    drop(server);
    stop(watch);
    let out = podtap_state(BIN, &state.0, &["detach", "--id", &id]);
    assert!(out.status.success(), "detach: {}", stderr(&out));
}

#[test]
fn a_qmp_line_without_end_is_an_error_with_bounded_memory() {
    hostile_case(
        "a_qmp_line_without_end_is_an_error_with_bounded_memory",
        "--qmp",
        Hostile::Endless(br#"{"QMP": {"version": ""#),
        30,
        "longer than the 1024 KiB",
    );
}

#[test]
fn a_qmp_greeting_dripped_a_byte_at_a_time_times_out() {
    hostile_case(
        "a_qmp_greeting_dripped_a_byte_at_a_time_times_out",
        "--qmp",
        Hostile::Drip(br#"{"QMP": {"version": ""#),
        60,
        "not complete in time",
    );
}

#[test]
fn cloud_hypervisor_headers_without_end_are_an_error() {
    hostile_case(
        "cloud_hypervisor_headers_without_end_are_an_error",
        "--cloud-hypervisor-api",
        Hostile::Endless(b"HTTP/1.1 200 OK\r\nX-Pad: "),
        30,
        "longer than the 64 KiB",
    );
}

#[test]
fn a_huge_content_length_is_refused_without_reading_it() {
    hostile_case(
        "a_huge_content_length_is_refused_without_reading_it",
        "--cloud-hypervisor-api",
        Hostile::Endless(b"HTTP/1.1 200 OK\r\nContent-Length: 1099511627776\r\n\r\n"),
        30,
        "Content-Length 1099511627776 is over the 1024 KiB",
    );
}

#[test]
fn a_dripping_cloud_hypervisor_times_out() {
    hostile_case(
        "a_dripping_cloud_hypervisor_times_out",
        "--cloud-hypervisor-api",
        Hostile::Drip(b"HTTP/1.1 200 OK\r\nX-Pad: "),
        90,
        "not complete in time",
    );
}

/// A Cloud Hypervisor API stand-in that answers `vm.info`, `vm.add-net` and
/// `vm.remove-device`, and logs each request with the number of fds that
/// came with it (SCM_RIGHTS).
const CH_STANDIN: &str = r#"
import json, os, re, socket, sys
path, out = sys.argv[1], sys.argv[2]
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(4)
nets = {}
log = open(out, "a")
while True:
    conn, _ = srv.accept()
    msg, fds, _, _ = socket.recv_fds(conn, 65536, 16)
    for fd in fds:
        os.close(fd)
    more = msg
    while more and b"\r\n\r\n" not in msg:
        more = conn.recv(65536)
        msg += more
    head, _, body = msg.partition(b"\r\n\r\n")
    m = re.search(rb"(?i)content-length: *(\d+)", head)
    while more and len(body) < (int(m.group(1)) if m else 0):
        more = conn.recv(65536)
        body += more
    if not more:
        conn.close()
        continue
    line = head.split(b"\r\n")[0].decode()
    log.write(json.dumps({"request": line, "fds": len(fds), "uid": os.getuid()}) + "\n")
    log.flush()
    if "vm.info" in line:
        reply = json.dumps({"config": {"net": [{"id": i} for i in nets]}}).encode()
    elif "vm.add-net" in line:
        req = json.loads(body)
        nets[req["id"]] = req
        reply = b"{}"
    else:
        reply = b""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(reply), reply))
    conn.close()
"#;

/// A child process killed and reaped on drop (a failed assertion included).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Add a veth pair: `ifname` in the pod (198.19.<sub>.2/24), its peer in the node.
fn add_late(pod: &Pod, ifname: &str, sub: u32) {
    let (p, q) = (&pod.pod.name, &pod.peer.name);
    sh(&format!(
        "ip -n {q} link add lt{sub}{ifname} type veth peer name {ifname} netns {p}"
    ));
    sh(&format!(
        "ip -n {p} addr add 198.19.{sub}.2/24 dev {ifname} && ip -n {p} link set {ifname} up"
    ));
}

fn logged(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}

#[test]
fn a_socket_bound_by_another_uid_gets_no_tap_fds() {
    let test = "a_socket_bound_by_another_uid_gets_no_tap_fds";
    if !root_or_skip(test) || !tool_or_skip(test, "python3") {
        return;
    }
    let work = TempDir::new();
    // nobody binds its socket here.
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o777))
        .expect("chmod the work dir");
    let sock: PathBuf = work.path().join("ch.sock");
    let log = work.path().join("requests.jsonl");
    let standin = Reaped(
        Command::new("python3")
            .args(["-c", CH_STANDIN])
            .arg(&sock)
            .arg(&log)
            .uid(65534)
            .gid(65534)
            .stdout(Stdio::null())
            .spawn()
            .expect("start the API stand-in as nobody"),
    );
    assert!(poll(
        Duration::from_secs(10),
        Duration::from_millis(20),
        || sock.exists()
    ));
    let pod = Pod::dual_stack();
    let state = StateDir::new();
    let id = unique("peer");
    json_ok(&podtap_state(
        BIN,
        &state.0,
        &["attach", "--netns", &pod.pod.path_str(), "--id", &id],
    ));
    let sock_arg = sock.display().to_string();

    // Without --vmm-uid, nobody is refused the late NIC's TAP fd.
    let watch = Watch::start(BIN, &state.0, &id, &["--cloud-hypervisor-api", &sock_arg]);
    watch.next_of("ready", 20);
    add_late(&pod, "net1", pod.net);
    let error = watch.next_of("error", 20);
    let text = error["error"].as_str().expect("error text");
    assert!(
        text.contains("runs as uid 65534") && text.contains("no TAP fds sent"),
        "{error}"
    );
    stop(watch);
    let requests = logged(&log);
    assert!(!requests.is_empty(), "the stand-in was asked nothing");
    assert!(
        requests.iter().all(|r| r["fds"] == 0 && r["uid"] == 65534),
        "fds reached uid 65534: {requests:?}"
    );
    assert!(
        requests.iter().all(|r| !r["request"]
            .as_str()
            .unwrap_or_default()
            .contains("vm.add-net")),
        "{requests:?}"
    );

    // Named with --vmm-uid, the same server gets the NIC and its fd.
    let watch = Watch::start(
        BIN,
        &state.0,
        &id,
        &["--cloud-hypervisor-api", &sock_arg, "--vmm-uid", "65534"],
    );
    let plugged = watch.next_of("ready", 20);
    assert_eq!(plugged["id"], id.as_str());
    assert!(poll(
        Duration::from_secs(20),
        Duration::from_millis(50),
        || logged(&log).iter().any(|r| r["request"]
            .as_str()
            .unwrap_or_default()
            .contains("vm.add-net")
            && r["fds"] == 1)
    ));
    stop(watch);
    drop(standin);
    let out = podtap_state(BIN, &state.0, &["detach", "--id", &id]);
    assert!(out.status.success(), "detach: {}", stderr(&out));
}
