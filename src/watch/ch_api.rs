//! Cloud Hypervisor's REST API over its Unix socket, as much as NIC hotplug
//! needs: `vm.add-net` (queue fds attached as SCM_RIGHTS to the request),
//! `vm.remove-device` and `vm.info`. One HTTP/1.1 request per connection.

use std::collections::BTreeSet;
use std::io::{self, BufRead, BufReader, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::vmm::{send_with_fds, HotNic};

/// How long one API call may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A Cloud Hypervisor reached through `--api-socket`.
#[derive(Debug, Clone)]
pub struct CloudHypervisorApi {
    path: PathBuf,
}

impl CloudHypervisorApi {
    /// The Cloud Hypervisor listening on `path`.
    pub fn new(path: &Path) -> Self {
        CloudHypervisorApi { path: path.into() }
    }

    /// The ids of the VM's NICs (`vm.info`'s `config.net[].id`).
    pub fn devices(&self) -> io::Result<BTreeSet<String>> {
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
    pub fn plug(&self, nic: &HotNic, fds: &[OwnedFd]) -> io::Result<()> {
        let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
        self.request("PUT", "vm.add-net", Some(add_net(nic)), &raw)
            .map(drop)
    }

    /// `vm.remove-device`; a device the VM does not have counts as removed.
    pub fn unplug(&self, device: &str) -> io::Result<()> {
        match self.request("PUT", "vm.remove-device", Some(json!({"id": device})), &[]) {
            // Cloud Hypervisor answers an unknown id with an error naming it.
            Err(e)
                if ["404", "not found", "UnknownDeviceId"]
                    .iter()
                    .any(|s| e.to_string().contains(s)) =>
            {
                Ok(())
            }
            other => other.map(drop),
        }
    }

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
        let stream = UnixStream::connect(&self.path).map_err(context)?;
        stream.set_read_timeout(Some(TIMEOUT))?;
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let head = format!(
            "{method} /api/v1/{call} HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        send_with_fds(&stream, format!("{head}{body}").as_bytes(), fds).map_err(context)?;
        let (status, reply) = read_response(&stream).map_err(context)?;
        if !(200..300).contains(&status) {
            return Err(io::Error::other(format!(
                "Cloud Hypervisor API {call}: HTTP {status}: {}",
                reply.trim()
            )));
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

/// The NetConfig body for one hotplugged NIC.
fn add_net(nic: &HotNic) -> Value {
    json!({
        "id": nic.device,
        "mac": nic.mac,
        "mtu": nic.mtu,
        "num_queues": 2 * nic.queues,
    })
}

/// Status code and body of one HTTP/1.1 response (Content-Length or to EOF).
fn read_response(stream: &UnixStream) -> io::Result<(u16, String)> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad status line {line:?}"),
            )
        })?;
    let mut length = None;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<usize>().ok();
            }
        }
    }
    let mut body = Vec::new();
    match length {
        Some(n) => {
            body.resize(n, 0);
            reader.read_exact(&mut body)?;
        }
        None => {
            reader.read_to_end(&mut body)?;
        }
    }
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn responses_are_read_by_length() {
        let (a, b) = UnixStream::pair().unwrap();
        std::io::Write::write_all(
            &mut &a,
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{\"x\": 1}\n",
        )
        .unwrap();
        let (status, body) = read_response(&b).unwrap();
        assert_eq!(status, 200);
        assert_eq!(body, "{\"x\": 1}\n");
    }
}
