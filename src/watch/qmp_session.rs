//! One negotiated QMP connection: commands (fds attached only by
//! `handover::send_with_fds`) and their replies, each bounded in size
//! ([`LINE_CAP`]) and time ([`REPLY_TIMEOUT`]).

use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::bounded::Bounded;
use crate::handover::send_with_fds;

/// How long one QMP reply (the greeting, or the answer to a command, with
/// any events before it) may take.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest QMP message (one line) podtap reads: 1 MiB. QEMU's replies to
/// what watch asks are a few KiB.
pub const LINE_CAP: usize = 1024 * 1024;
/// How many `DEVICE_DELETED` events a session keeps while it waits for replies.
const MAX_EVENTS: usize = 64;

/// One negotiated QMP connection.
pub(super) struct Session {
    conn: Bounded,
    /// Devices named by `DEVICE_DELETED` events read while waiting for
    /// replies (at most [`MAX_EVENTS`]; other events are dropped).
    deleted: Vec<String>,
    path: PathBuf,
    vmm_uid: Option<u32>,
}

impl Session {
    pub(super) fn connect(path: &Path, vmm_uid: Option<u32>) -> io::Result<Self> {
        let context =
            |e: io::Error| io::Error::new(e.kind(), format!("QMP {}: {e}", path.display()));
        let deadline = Instant::now() + REPLY_TIMEOUT;
        let conn = Bounded::connect(path, deadline).map_err(context)?;
        let mut session = Session {
            conn,
            deleted: Vec::new(),
            path: path.into(),
            vmm_uid,
        };
        let greeting = session.read(deadline)?;
        if greeting.get("QMP").is_none() {
            return Err(session.protocol(format!("not a QMP greeting: {}", clip(&greeting))));
        }
        session.execute(json!({"execute": "qmp_capabilities"}), &[])?;
        Ok(session)
    }

    /// Send one command (with `fds` attached) and return its `return` value,
    /// which must come within [`REPLY_TIMEOUT`] whatever events come first.
    pub(super) fn execute(&mut self, command: Value, fds: &[RawFd]) -> io::Result<Value> {
        let mut line = command.to_string();
        line.push('\n');
        send_with_fds(self.conn.stream(), line.as_bytes(), fds, self.vmm_uid)
            .map_err(|e| io::Error::new(e.kind(), format!("QMP {}: {e}", self.path.display())))?;
        let deadline = Instant::now() + REPLY_TIMEOUT;
        loop {
            let reply = self.read(deadline)?;
            if reply.get("event").is_some() {
                self.note(&reply);
            } else if let Some(value) = reply.get("return") {
                return Ok(value.clone());
            } else if let Some(error) = reply.get("error") {
                let what = command["execute"].as_str().unwrap_or("command");
                let desc = error["desc"].as_str().unwrap_or("unknown error");
                return Err(io::Error::other(format!("QMP {what}: {}", clip_str(desc))));
            } else {
                return Err(self.protocol(format!("unexpected reply {}", clip(&reply))));
            }
        }
    }

    /// Keep what [`Session::wait_event`] may need of event `e`.
    fn note(&mut self, e: &Value) {
        if e["event"] != "DEVICE_DELETED" || self.deleted.len() >= MAX_EVENTS {
            return;
        }
        if let Some(device) = e["data"]["device"].as_str() {
            self.deleted.push(device.chars().take(256).collect());
        }
    }

    /// Wait up to `timeout` for event `name` about `device`.
    pub(super) fn wait_event(
        &mut self,
        name: &str,
        device: &str,
        timeout: Duration,
    ) -> io::Result<bool> {
        let matches = |e: &Value| e["event"] == name && e["data"]["device"] == device;
        if name == "DEVICE_DELETED" && self.deleted.iter().any(|d| d == device) {
            return Ok(true);
        }
        let deadline = Instant::now() + timeout;
        loop {
            match self.read(deadline) {
                Ok(e) if matches(&e) => return Ok(true),
                Ok(_) => {}
                // QEMU exited: the device went with it.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::TimedOut => return Ok(false),
                Err(e) => return Err(e),
            }
        }
    }

    /// One message: a line of at most [`LINE_CAP`] bytes, complete by `deadline`.
    fn read(&mut self, deadline: Instant) -> io::Result<Value> {
        let line = match self.conn.read_line(LINE_CAP, deadline) {
            Ok(line) => line,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("QMP {}: QEMU closed the connection", self.path.display()),
                ))
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("QMP {}: {e}", self.path.display()),
                ))
            }
        };
        serde_json::from_slice(&line).map_err(|e| {
            let text = String::from_utf8_lossy(&line);
            self.protocol(format!("bad JSON ({e}): {}", clip_str(&text)))
        })
    }

    fn protocol(&self, what: String) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("QMP {}: {what}", self.path.display()),
        )
    }
}

/// A VMM's text in an error message: at most 200 characters of it.
fn clip_str(text: &str) -> String {
    let mut out: String = text.chars().take(200).collect();
    if out.len() < text.len() {
        out.push_str("...");
    }
    out
}

fn clip(value: &Value) -> String {
    clip_str(&value.to_string())
}
