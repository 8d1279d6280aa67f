//! Network namespaces made with iproute2, and reading them.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::dirs::TempDir;
use crate::run::{poll, sh, unique, wait_for};

/// Run `f` on a fresh thread that has entered the netns at `path`.
pub fn in_netns<R: Send + 'static>(path: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let path = path.to_string();
    std::thread::spawn(move || {
        let ns = std::fs::File::open(&path).expect("open netns");
        nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .expect("netns thread")
}

/// A netns made with `ip netns add`, deleted on drop.
pub struct Netns {
    /// Its name under /run/netns.
    pub name: String,
}

impl Netns {
    /// A new netns named `<prefix><pid>x<n>`, with `lo` up.
    pub fn new(prefix: &str) -> Self {
        let name = unique(prefix);
        sh(&format!("ip netns add {name}"));
        sh(&format!("ip -n {name} link set lo up"));
        Netns { name }
    }

    /// Its pinned file.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/run/netns/{}", self.name))
    }

    /// Its pinned file, as text.
    pub fn path_str(&self) -> String {
        self.path().display().to_string()
    }

    /// Run `ip -n <ns> <args>`, once no CNI DEL's deferred link deletion
    /// is pending in it ([`wait_for_deferred_teardown`]).
    pub fn ip(&self, args: &str) -> String {
        wait_for_deferred_teardown(self);
        sh(&format!("ip -n {} {args}", self.name))
    }

    /// Run a command inside the netns.
    pub fn exec(&self, cmd: &str) -> String {
        sh(&format!("ip netns exec {} {cmd}", self.name))
    }

    /// `ip -j` output as JSON, as [`Netns::ip`] reads it.
    pub fn ip_json(&self, args: &str) -> Value {
        wait_for_deferred_teardown(self);
        serde_json::from_str(&sh(&format!("ip -n {} -j {args}", self.name)))
            .expect("ip -j output is JSON")
    }

    /// Run `commands` (one per line) with `<tool> -n <ns> -batch` (`tool` is `ip` or `tc`).
    pub fn batch(&self, tool: &str, commands: &str) {
        let dir = TempDir::new();
        let file = dir.path().join(format!("{tool}.batch"));
        std::fs::write(&file, commands).expect("write batch file");
        sh(&format!(
            "{tool} -n {} -batch {}",
            self.name,
            file.display()
        ));
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Wait (up to 10 s) until no podtap holds the attach lock on `ns`: a CNI
/// DEL returns before its links are deleted, and a child process that
/// holds the lock deletes them once the chain's next plugin has deleted
/// the pod's veth (or half a second later).
pub fn wait_for_deferred_teardown(ns: &Netns) {
    use nix::fcntl::{Flock, FlockArg};
    let Ok(mut file) = std::fs::File::open(ns.path()) else {
        return;
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(_locked) => return,
            Err((f, _)) if Instant::now() < deadline => file = f,
            Err(_) => return,
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Names of the TAPs (links of kind tun) in `ns`.
pub fn taps(ns: &Netns) -> Vec<String> {
    ns.ip_json("-d link show")
        .as_array()
        .expect("links")
        .iter()
        .filter(|l| l["linkinfo"]["info_kind"] == "tun")
        .map(|l| l["ifname"].as_str().expect("ifname").to_string())
        .collect()
}

/// Wait (up to 10 s) until no address in `ns` is tentative (IPv6 DAD still running),
/// so snapshots and scans compare settled state. Gives up quietly: a caller comparing
/// before/after sees any change that is still going on.
pub fn settle(ns: &Netns) {
    poll(Duration::from_secs(10), Duration::from_millis(100), || {
        !ns.ip_json("addr show")
            .as_array()
            .expect("links")
            .iter()
            .any(|l| {
                l["addr_info"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|a| a["tentative"] == true))
            })
    });
}

/// Wait until every TAP in `ns` that is up shows NO-CARRIER: with no queue open, the kernel
/// turns the carrier off, and link state settles asynchronously (linkwatch).
pub fn settle_taps(ns: &Netns) {
    wait_for(|| {
        ns.ip_json("link show type tun")
            .as_array()
            .expect("links")
            .iter()
            .all(|l| {
                let flags = l["flags"].as_array().expect("flags");
                !flags.iter().any(|f| f == "UP") || flags.iter().any(|f| f == "NO-CARRIER")
            })
    });
}

/// A process kept alive inside a netns (for `/proc/PID/ns/net` paths); killed on drop.
pub struct Sleeper(std::process::Child);

impl Sleeper {
    /// Start it in `ns` and wait until it is there.
    pub fn new(ns: &Netns) -> Self {
        // `ip netns exec` execs the command, so the child's pid is sleep's.
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name, "sleep", "60"])
            .spawn()
            .unwrap();
        let s = Sleeper(child);
        let want = std::fs::metadata(ns.path()).unwrap().ino();
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::metadata(s.path()).map(|m| m.ino()).ok() != Some(want) {
            assert!(
                Instant::now() < deadline,
                "sleeper never entered {}",
                ns.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    /// Its `/proc/PID/ns/net`.
    pub fn path(&self) -> String {
        format!("/proc/{}/ns/net", self.0.id())
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
