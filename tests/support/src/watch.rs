//! `podtap watch`, running, and the events it prints.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::podtap::podtap_cmd;
use crate::run::sh;

/// A running `podtap watch` and its events.
pub struct Watch {
    child: std::process::Child,
    events: std::sync::mpsc::Receiver<Value>,
}

impl Watch {
    /// Start `podtap watch --id <id>` plus `extra`.
    pub fn start(bin: &str, state: &Path, id: &str, extra: &[&str]) -> Watch {
        let mut child = podtap_cmd(bin, state)
            .args(["watch", "--id", id])
            .args(extra)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start podtap watch");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, events) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in
                std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok)
            {
                eprintln!("watch: {line}");
                let event: Value = serde_json::from_str(&line).expect("a JSON object per line");
                if tx.send(event).is_err() {
                    break;
                }
            }
        });
        Watch { child, events }
    }

    /// The next event named `kind` (within 20 s); no `error` event may come first.
    pub fn next(&self, kind: &str) -> Value {
        self.next_within(kind, 20)
    }

    /// The next event named `kind` within `secs`; no `error` event may come first.
    pub fn next_within(&self, kind: &str, secs: u64) -> Value {
        self.wait_for(kind, secs, false)
    }

    /// The next event named `kind` within `secs`; any other event, `error`
    /// included, is skipped (for tests that expect errors on the way).
    pub fn next_of(&self, kind: &str, secs: u64) -> Value {
        self.wait_for(kind, secs, true)
    }

    fn wait_for(&self, kind: &str, secs: u64, errors_allowed: bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let left = deadline
                .checked_duration_since(Instant::now())
                .unwrap_or_else(|| panic!("no {kind:?} event in {secs} s"));
            let event = self
                .events
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {kind:?} event in {secs} s"));
            if !errors_allowed {
                assert_ne!(event["event"], "error", "{event}");
            }
            if event["event"] == kind {
                return event;
            }
        }
    }

    /// The watch process's pid (to read its `/proc/PID/status`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Events that come within `wait`, without blocking longer.
    pub fn drain(&self, wait: Duration) -> Vec<Value> {
        let mut out = Vec::new();
        while let Ok(e) = self.events.recv_timeout(wait) {
            out.push(e);
        }
        out
    }

    pub fn signal(&self, sig: &str) {
        sh(&format!("kill -{sig} {}", self.child.id()));
    }

    /// Wait for the process to end; its exit code.
    pub fn exit_code(mut self) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code();
            }
            assert!(Instant::now() < deadline, "watch did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
