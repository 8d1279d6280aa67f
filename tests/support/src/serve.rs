//! `podtap serve` as a child process, its JSON events read line by line.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A running `podtap serve`; SIGTERM on drop.
pub struct ServeDaemon {
    child: Child,
    events: Receiver<Value>,
}

impl ServeDaemon {
    /// Start `bin serve --state-dir state` and wait for its `ready` event.
    pub fn start(bin: &str, state: &Path) -> Self {
        let mut child = Command::new(bin)
            .args(["serve", "--state-dir"])
            .arg(state)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run podtap serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, events) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            }
        });
        let d = ServeDaemon { child, events };
        d.next("ready", 10);
        d
    }

    /// The next event of `kind` within `secs` (others before it are skipped).
    pub fn next(&self, kind: &str, secs: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(v) if v["event"] == kind => return v,
                Ok(_) => {}
                Err(_) => panic!("podtap serve said no {kind:?} within {secs} s"),
            }
        }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its resident set size, in KiB (`VmRSS`).
    pub fn rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for ServeDaemon {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let _ = self.child.wait();
    }
}
