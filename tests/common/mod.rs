//! Shared fixtures for root integration tests: private network namespaces
//! built with iproute2, the podtap binary, and independent snapshots.
//!
//! Every object lives in a netns the test creates (named with pid and a
//! counter) and is removed on drop. Nothing touches the root netns.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A short unique tag: `<prefix><pid>x<n>`.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}{}x{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst))
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
    let found = Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output().is_ok_and(|o| o.status.success())
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

/// Run a shell command; panic with its output on failure.
pub fn sh(cmd: &str) -> String {
    let out = Command::new("bash").arg("-c").arg(cmd).output().expect("spawn bash");
    if !out.status.success() {
        panic!("command failed: {cmd}\nstdout: {}\nstderr: {}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Run a shell command and return whether it succeeded.
pub fn sh_ok(cmd: &str) -> bool {
    Command::new("bash").arg("-c").arg(cmd).output().is_ok_and(|o| o.status.success())
}

/// A netns made with `ip netns add`, deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(prefix: &str) -> Self {
        let name = unique(prefix);
        sh(&format!("ip netns add {name}"));
        sh(&format!("ip -n {name} link set lo up"));
        Netns { name }
    }

    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/run/netns/{}", self.name))
    }

    pub fn path_str(&self) -> String {
        self.path().display().to_string()
    }

    /// Run `ip -n <ns> <args>`.
    pub fn ip(&self, args: &str) -> String {
        sh(&format!("ip -n {} {args}", self.name))
    }

    /// Run a command inside the netns.
    pub fn exec(&self, cmd: &str) -> String {
        sh(&format!("ip netns exec {} {cmd}", self.name))
    }

    /// `ip -j` output as JSON.
    pub fn ip_json(&self, args: &str) -> serde_json::Value {
        serde_json::from_str(&sh(&format!("ip -n {} -j {args}", self.name))).expect("ip -j output is JSON")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

/// A pod netns joined to a peer ("node") netns by a veth: pod side `eth0`.
pub struct Pod {
    pub pod: Netns,
    pub peer: Netns,
    /// Index for addresses: 198.18.<n>.0/24 and 2001:db8:<n>::/64 (kept unique per process).
    pub net: u32,
}

impl Pod {
    /// Empty pod and peer netns.
    pub fn new() -> Self {
        let net = COUNTER.fetch_add(1, Ordering::SeqCst) % 250;
        Pod { pod: Netns::new("ptp"), peer: Netns::new("ptn"), net }
    }

    /// A dual-stack veth: pod `ifname` = 198.18.<net>.2/24 + 2001:db8:<net>::2/64, peer .1 / ::1,
    /// default routes via the peer when `default_routes`.
    pub fn add_veth(&self, ifname: &str, peer_if: &str, sub: u32, default_routes: bool) {
        let (p, q) = (&self.pod.name, &self.peer.name);
        sh(&format!("ip -n {q} link add {peer_if} type veth peer name {ifname} netns {p}"));
        sh(&format!("ip -n {q} link set {peer_if} up && ip -n {p} link set {ifname} up"));
        sh(&format!("ip -n {q} addr add 198.18.{sub}.1/24 dev {peer_if} && ip -n {q} addr add 2001:db8:{sub:x}::1/64 dev {peer_if} nodad"));
        sh(&format!("ip -n {p} addr add 198.18.{sub}.2/24 dev {ifname} && ip -n {p} addr add 2001:db8:{sub:x}::2/64 dev {ifname} nodad"));
        if default_routes {
            sh(&format!("ip -n {p} route add default via 198.18.{sub}.1 dev {ifname}"));
            sh(&format!("ip -n {p} -6 route add default via 2001:db8:{sub:x}::1 dev {ifname}"));
        }
    }

    /// The usual CNI-like pod: eth0 dual-stack with default routes.
    pub fn dual_stack() -> Self {
        let pod = Pod::new();
        pod.add_veth("eth0", "veth0", pod.net, true);
        pod
    }

    /// A macvlan `ifname` in the pod on top of a veth in the peer netns (the peer keeps a parent).
    pub fn add_macvlan(&self, ifname: &str, sub: u32) {
        let (p, q) = (&self.pod.name, &self.peer.name);
        let parent = format!("mvp{sub}");
        sh(&format!("ip -n {q} link add {parent} type veth peer name {parent}b"));
        sh(&format!("ip -n {q} link set {parent} up && ip -n {q} link set {parent}b up"));
        sh(&format!("ip -n {q} link add {ifname} link {parent} type macvlan mode bridge"));
        sh(&format!("ip -n {q} link set {ifname} netns {p}"));
        sh(&format!("ip -n {p} link set {ifname} up && ip -n {p} addr add 198.18.{sub}.2/24 dev {ifname}"));
    }
}

/// The podtap binary under test.
pub fn podtap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_podtap")).args(args).output().expect("run podtap")
}

/// podtap with a state dir of the test's own.
pub fn podtap_state(state: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_podtap"))
        .args(args)
        .env("PODTAP_STATE_DIR", state)
        .output()
        .expect("run podtap")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Assert success and parse stdout as JSON.
pub fn json_ok(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "podtap failed ({:?}): {}", o.status.code(), stderr(o));
    serde_json::from_slice(&o.stdout).expect("podtap prints JSON")
}

/// A private state dir, removed on drop.
pub struct StateDir(pub PathBuf);

impl StateDir {
    pub fn new() -> Self {
        let p = std::env::temp_dir().join(unique("podtap-state-"));
        StateDir(p)
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An independent snapshot of a netns's links, qdiscs and ingress filters, read
/// with iproute2/tc and stripped of counters, for before/after comparisons.
pub fn snapshot(ns: &Netns) -> String {
    let links = ns.ip_json("-d link show");
    let mut out = String::new();
    for l in links.as_array().expect("links array") {
        let field = |k: &str| l.get(k).map(|v| v.to_string()).unwrap_or_default();
        let name = l.get("ifname").and_then(|v| v.as_str()).unwrap_or_default().to_string();
        out.push_str(&format!(
            "link {} {} mac={} mtu={} master={} group={} kind={} flags={}\n",
            field("ifindex"),
            name,
            field("address"),
            field("mtu"),
            field("master"),
            field("group"),
            l.get("linkinfo").and_then(|i| i.get("info_kind")).map(|v| v.to_string()).unwrap_or_default(),
            field("flags"),
        ));
        let qd = sh(&format!("tc -n {} qdisc show dev {name} ingress", ns.name));
        out.push_str(&format!("qdisc-ingress {name}: {}\n", qd.trim()));
        let qd_all = sh(&format!("tc -n {} qdisc show dev {name}", ns.name));
        out.push_str(&format!("qdisc {name}: {}\n", qd_all.trim()));
        if !qd.trim().is_empty() {
            let f = sh(&format!("tc -n {} filter show dev {name} ingress", ns.name));
            out.push_str(&format!("filters {name}:\n{}\n", f.trim()));
        }
    }
    out.push_str(&ns.ip("addr show"));
    out.push_str(&ns.ip("route show table all"));
    out
}
