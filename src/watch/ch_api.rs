//! Cloud Hypervisor's REST API over its Unix socket, as much as NIC hotplug
//! needs: `vm.add-net` (queue fds attached as SCM_RIGHTS to the request),
//! `vm.remove-device` and `vm.info`. One HTTP/1.1 request per connection.

use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::bounded::Bounded;
use super::vmm::{HotNic, VmmClient};
use crate::handover::send_with_fds;

/// How long one API call (connect, request, whole response) may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The most a response's status line and headers may take: 64 KiB.
pub const HEAD_CAP: usize = 64 * 1024;
/// The most a response's body may take, whatever its Content-Length says:
/// 1 MiB (`vm.info` of a VM is a few KiB).
pub const BODY_CAP: usize = 1024 * 1024;

/// A Cloud Hypervisor reached through `--api-socket`.
#[derive(Debug, Clone)]
pub struct CloudHypervisorApi {
    path: PathBuf,
    /// Besides root, the uid TAP fds may be sent to.
    vmm_uid: Option<u32>,
}

impl CloudHypervisorApi {
    /// The Cloud Hypervisor listening on `path`, which gets TAP fds only if
    /// it runs as root or `vmm_uid`.
    pub fn new(path: &Path, vmm_uid: Option<u32>) -> Self {
        CloudHypervisorApi {
            path: path.into(),
            vmm_uid,
        }
    }
}

impl VmmClient for CloudHypervisorApi {
    /// The ids of the VM's NICs (`vm.info`'s `config.net[].id`).
    fn devices(&self) -> io::Result<BTreeSet<String>> {
        let info = self.request("GET", "vm.info", None, &[])?;
        Ok(info["config"]["net"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n["id"].as_str().map(str::to_string))
            .collect())
    }

    /// `vm.add-net` with the NetConfig `render cloud-hypervisor-api` gives a
    /// boot NIC, minus `tap` (the fds stand for it).
    fn plug(&self, nic: &HotNic, fds: &[OwnedFd]) -> io::Result<()> {
        let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
        self.request("PUT", "vm.add-net", Some(add_net(nic)), &raw)
            .map(drop)
    }

    /// `vm.remove-device`; a device the VM does not have counts as removed.
    fn unplug(&self, device: &str) -> io::Result<()> {
        match self.request("PUT", "vm.remove-device", Some(json!({"id": device})), &[]) {
            // Cloud Hypervisor answers an unknown id with an HTTP error whose
            // body names it; only the reply is read for that, never the text
            // of a transport error (which carries the socket path).
            Err(e) if HttpError::of(&e).is_some_and(HttpError::unknown_device) => Ok(()),
            other => other.map(drop),
        }
    }
}

impl CloudHypervisorApi {
    fn request(
        &self,
        method: &str,
        call: &str,
        body: Option<Value>,
        fds: &[RawFd],
    ) -> io::Result<Value> {
        let context = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("Cloud Hypervisor API {} {call}: {e}", self.path.display()),
            )
        };
        let deadline = Instant::now() + TIMEOUT;
        let mut conn = Bounded::connect(&self.path, deadline).map_err(context)?;
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let head = format!(
            "{method} /api/v1/{call} HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let request = format!("{head}{body}");
        send_with_fds(conn.stream(), request.as_bytes(), fds, self.vmm_uid).map_err(context)?;
        let (status, reply) = read_response(&mut conn, deadline).map_err(context)?;
        if !(200..300).contains(&status) {
            let body: String = reply.trim().chars().take(200).collect();
            return Err(io::Error::other(HttpError {
                call: call.to_string(),
                status,
                body,
            }));
        }
        if reply.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&reply).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{call}: bad JSON reply: {e}"),
            )
        })
    }
}

/// A reply whose HTTP status is not 2xx: the status and (the start of) its body.
#[derive(Debug)]
struct HttpError {
    call: String,
    status: u16,
    body: String,
}

impl HttpError {
    /// The HTTP error inside `e`, if `e` is one.
    fn of(e: &io::Error) -> Option<&HttpError> {
        e.get_ref()?.downcast_ref::<HttpError>()
    }

    /// Whether the VMM said it has no such device.
    fn unknown_device(&self) -> bool {
        self.status == 404
            || ["not found", "UnknownDeviceId"]
                .iter()
                .any(|s| self.body.contains(s))
    }
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Cloud Hypervisor API {}: HTTP {}: {}",
            self.call, self.status, self.body
        )
    }
}

impl std::error::Error for HttpError {}

/// The NetConfig body for one hotplugged NIC.
fn add_net(nic: &HotNic) -> Value {
    json!({
        "id": nic.device,
        "mac": nic.mac,
        "mtu": nic.mtu,
        "num_queues": 2 * nic.queues,
    })
}

/// Status code and body of one HTTP/1.1 response (Content-Length or to
/// EOF), the head at most [`HEAD_CAP`] and the body at most [`BODY_CAP`]
/// bytes, all of it by `deadline`.
fn read_response(conn: &mut Bounded, deadline: Instant) -> io::Result<(u16, String)> {
    let head = conn.read_until(b"\r\n\r\n", HEAD_CAP, deadline)?;
    let head = String::from_utf8_lossy(&head);
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("bad status line {:?}", clip(line))))?;
    let mut length = None;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                let n = value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| bad(format!("bad Content-Length {:?}", clip(value))))?;
                length = Some(n);
            }
        }
    }
    let body = match length {
        Some(n) if n > BODY_CAP as u64 => {
            return Err(bad(format!(
                "Content-Length {n} is over the {} KiB podtap accepts",
                BODY_CAP / 1024
            )))
        }
        Some(n) => conn.read_exact(usize::try_from(n).unwrap_or(BODY_CAP), deadline)?,
        None => conn.read_to_end(BODY_CAP, deadline)?,
    };
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

fn clip(text: &str) -> String {
    text.chars().take(100).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_reply_says_a_device_is_unknown() {
        let reply = |status, body: &str| {
            io::Error::other(HttpError {
                call: "vm.remove-device".into(),
                status,
                body: body.into(),
            })
        };
        let unknown = |e: &io::Error| HttpError::of(e).is_some_and(HttpError::unknown_device);
        assert!(unknown(&reply(404, "")));
        assert!(unknown(&reply(
            500,
            "Error: UnknownDeviceId(\"podtap-tap_net1\")"
        )));
        assert!(!unknown(&reply(500, "device busy")));
        // A transport error naming a socket path with "404" in it is no answer.
        assert!(!unknown(&io::Error::other(
            "Cloud Hypervisor API /run/404/ch.sock vm.remove-device: timed out"
        )));
    }

    #[test]
    fn the_body_is_a_net_config_without_tap() {
        let body = add_net(&HotNic {
            device: "podtap-tap_eth1".into(),
            mac: "02:00:00:00:00:01".into(),
            mtu: 1400,
            queues: 2,
        });
        assert_eq!(
            body,
            json!({"id": "podtap-tap_eth1", "mac": "02:00:00:00:00:01", "mtu": 1400, "num_queues": 4})
        );
    }

    /// A server on a fresh socket that writes `reply` and hangs up.
    fn serve(reply: &'static [u8]) -> (Bounded, std::path::PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("podtap-ch-{}-{}", std::process::id(), reply.len()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("api.sock");
        let _ = std::fs::remove_file(&sock);
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let _ = std::io::Write::write_all(&mut conn, reply);
        });
        let conn = Bounded::connect(&sock, Instant::now() + TIMEOUT).unwrap();
        (conn, dir)
    }

    #[test]
    fn responses_are_read_by_length() {
        let (mut conn, dir) = serve(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{\"x\": 1}\n",
        );
        let (status, body) = read_response(&mut conn, Instant::now() + TIMEOUT).unwrap();
        assert_eq!(status, 200);
        assert_eq!(body, "{\"x\": 1}\n");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_huge_content_length_is_refused_before_reading_it() {
        let (mut conn, dir) = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999\r\n\r\n{}");
        let e = read_response(&mut conn, Instant::now() + TIMEOUT).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(
            e.to_string().contains("Content-Length 99999999999999"),
            "{e}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
