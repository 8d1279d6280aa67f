//! Shared fixtures for root integration tests: private network namespaces
//! built with iproute2, the podtap binary, and independent snapshots.
//!
//! Every object lives in a netns the test creates (named with pid and a
//! counter) and is removed on drop. Nothing touches the root netns.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A short unique tag: `<prefix><pid>x<n>`.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}{}x{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
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
        Pod {
            pod: Netns::new("ptp"),
            peer: Netns::new("ptn"),
            net,
        }
    }

    /// A dual-stack veth: pod `ifname` = 198.18.<net>.2/24 + 2001:db8:<net>::2/64, peer .1 / ::1,
    /// default routes via the peer when `default_routes`.
    pub fn add_veth(&self, ifname: &str, peer_if: &str, sub: u32, default_routes: bool) {
        let (p, q) = (&self.pod.name, &self.peer.name);
        sh(&format!(
            "ip -n {q} link add {peer_if} type veth peer name {ifname} netns {p}"
        ));
        sh(&format!(
            "ip -n {q} link set {peer_if} up && ip -n {p} link set {ifname} up"
        ));
        sh(&format!("ip -n {q} addr add 198.18.{sub}.1/24 dev {peer_if} && ip -n {q} addr add 2001:db8:{sub:x}::1/64 dev {peer_if} nodad"));
        sh(&format!("ip -n {p} addr add 198.18.{sub}.2/24 dev {ifname} && ip -n {p} addr add 2001:db8:{sub:x}::2/64 dev {ifname} nodad"));
        if default_routes {
            sh(&format!(
                "ip -n {p} route add default via 198.18.{sub}.1 dev {ifname}"
            ));
            sh(&format!(
                "ip -n {p} -6 route add default via 2001:db8:{sub:x}::1 dev {ifname}"
            ));
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
        sh(&format!(
            "ip -n {q} link add {parent} type veth peer name {parent}b"
        ));
        sh(&format!(
            "ip -n {q} link set {parent} up && ip -n {q} link set {parent}b up"
        ));
        sh(&format!(
            "ip -n {q} link add {ifname} link {parent} type macvlan mode bridge"
        ));
        sh(&format!("ip -n {q} link set {ifname} netns {p}"));
        sh(&format!(
            "ip -n {p} link set {ifname} up && ip -n {p} addr add 198.18.{sub}.2/24 dev {ifname}"
        ));
    }
}

/// The podtap binary under test.
pub fn podtap(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_podtap"))
        .args(args)
        .output()
        .expect("run podtap")
}

/// A `podtap` command (not yet run) with a state dir of the test's own.
pub fn podtap_cmd(state: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_podtap"));
    cmd.env("PODTAP_STATE_DIR", state);
    cmd
}

/// podtap with a state dir of the test's own.
pub fn podtap_state(state: &std::path::Path, args: &[&str]) -> Output {
    podtap_cmd(state).args(args).output().expect("run podtap")
}

/// `podtap detach --id <id>` with `state`.
pub fn detach(state: &StateDir, id: &str) -> Output {
    podtap_state(&state.0, &["detach", "--id", id])
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Assert success and parse stdout as JSON.
pub fn json_ok(o: &Output) -> serde_json::Value {
    assert!(
        o.status.success(),
        "podtap failed ({:?}): {}",
        o.status.code(),
        stderr(o)
    );
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

/// A temp dir, created now and removed on drop (a [`StateDir`] that exists).
pub struct TempDir(StateDir);

impl TempDir {
    pub fn new() -> Self {
        let d = StateDir::new();
        std::fs::create_dir_all(&d.0).expect("create temp dir");
        TempDir(d)
    }
    pub fn path(&self) -> &std::path::Path {
        &self.0 .0
    }
}

/// An independent snapshot of a netns's links, qdiscs and ingress filters, read
/// with iproute2/tc and stripped of counters, for before/after comparisons.
///
/// A link can vanish between the listing and its tc reads (a bridge deleted by
/// a detach that already returned): the snapshot is then taken again.
pub fn snapshot(ns: &Netns) -> String {
    wait_for_drained_bridges(ns);
    for _ in 0..20 {
        if let Some(s) = try_snapshot(ns) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("links of {} kept vanishing while they were read", ns.name)
}

fn try_snapshot(ns: &Netns) -> Option<String> {
    let links = ns.ip_json("-d link show");
    let mut out = String::new();
    for l in links.as_array().expect("links array") {
        let field = |k: &str| l.get(k).map(|v| v.to_string()).unwrap_or_default();
        let name = l
            .get("ifname")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        out.push_str(&format!(
            "link {} {} mac={} mtu={} master={} group={} kind={} flags={} txqlen={} ifalias={}\n",
            field("ifindex"),
            name,
            field("address"),
            field("mtu"),
            field("master"),
            field("group"),
            l.get("linkinfo")
                .and_then(|i| i.get("info_kind"))
                .map(|v| v.to_string())
                .unwrap_or_default(),
            field("flags"),
            field("txqlen"),
            field("ifalias"),
        ));
        let tc = |args: &str| -> Option<String> {
            let o = Command::new("sh")
                .arg("-c")
                .arg(format!("tc -n {} {args}", ns.name))
                .output()
                .expect("run tc");
            if o.status.success() {
                return Some(String::from_utf8_lossy(&o.stdout).trim().to_string());
            }
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains("Cannot find device"),
                "tc -n {} {args} failed: {err}",
                ns.name
            );
            None
        };
        let qd = tc(&format!("qdisc show dev {name} ingress"))?;
        out.push_str(&format!("qdisc-ingress {name}: {qd}\n"));
        let qd_all = tc(&format!("qdisc show dev {name}"))?;
        out.push_str(&format!("qdisc {name}: {qd_all}\n"));
        if !qd.is_empty() {
            let f = tc(&format!("filter show dev {name} ingress"))?;
            out.push_str(&format!("filters {name}:\n{f}\n"));
        }
    }
    out.push_str(&ns.ip("addr show"));
    out.push_str(&ns.ip("route show table all"));
    Some(out)
}

/// Wait (up to 30 s) until no bridge of podtap's without ports is left in `ns`:
/// teardown returns before its bridges are deleted (each costs an
/// rcu_barrier() under RTNL), and a forked child deletes them one by one, one
/// drain at a time on the node, so under a parallel suite the wait can be long.
/// podtap's bridges are those with its marker, or with its bridge names
/// (`br_*`: a kill can land between creating a bridge and marking it). A
/// bridge still there afterwards shows up in the snapshot, as any leftover does.
pub fn wait_for_drained_bridges(ns: &Netns) {
    poll(Duration::from_secs(30), Duration::from_millis(20), || {
        let links = ns.ip_json("-d link show");
        let links = links.as_array().expect("links array");
        let str_of = |l: &Value, k: &str| l.get(k).and_then(|v| v.as_str()).map(str::to_string);
        !links.iter().any(|l| {
            let name = str_of(l, "ifname");
            l["linkinfo"]["info_kind"] == "bridge"
                && (str_of(l, "ifalias").is_some_and(|a| a.starts_with("podtap:"))
                    || name.as_deref().is_some_and(|n| n.starts_with("br_")))
                && !links.iter().any(|p| str_of(p, "master") == name)
        })
    });
}

// ---- The CNI chain runner (shared by tests/cni.rs and tests/vm.rs) ----

use std::path::Path;

use serde_json::{json, Value};

/// Where Debian installs containernetworking-plugins.
pub const PLUGINS: &str = "/usr/lib/cni";

/// A containerd-style container id: 64 hex digits.
pub fn container_id(n: u32) -> String {
    format!(
        "{:064x}",
        0xc0ffee_u64 * 1000 + u64::from(n) + u64::from(std::process::id()) * 7
    )
}

/// One plugin invocation's outcome.
pub struct Run {
    pub out: Output,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.out.status.success()
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.out.stdout).unwrap_or(Value::Null)
    }
    pub fn expect_ok(&self, what: &str) -> Value {
        assert!(
            self.ok(),
            "{what} failed ({:?}): stdout {} stderr {}",
            self.out.status.code(),
            stdout(&self.out),
            stderr(&self.out)
        );
        self.json()
    }
    /// Assert a CNI error object with `code` on stdout and exit status 1.
    pub fn expect_err(&self, code: u64) -> Value {
        let v = self.json();
        assert_eq!(
            self.out.status.code(),
            Some(1),
            "exit status; stdout {}",
            stdout(&self.out)
        );
        assert_eq!(
            v["code"],
            code,
            "error object {v}; stderr {}",
            stderr(&self.out)
        );
        assert!(
            v["msg"].as_str().is_some_and(|m| !m.is_empty()),
            "msg in {v}"
        );
        assert!(v["cniVersion"].is_string(), "cniVersion in {v}");
        v
    }
}

/// A conflist run the libcni way inside `node`.
pub struct Chain {
    conf: Value,
    bin: TempDir,
    node: Option<String>,
}

impl Chain {
    /// `conf` is a parsed conflist; `bin` gets the plugins it names (podtap = the binary under test).
    pub fn new(conf: Value, node: Option<&Netns>) -> Self {
        let bin = TempDir::new();
        for name in ["bridge", "macvlan", "host-local", "ptp"] {
            let _ = std::os::unix::fs::symlink(format!("{PLUGINS}/{name}"), bin.path().join(name));
        }
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_podtap"), bin.path().join("podtap"))
            .expect("link podtap");
        Chain {
            conf,
            bin,
            node: node.map(|n| n.name.clone()),
        }
    }

    pub fn plugins(&self) -> Vec<Value> {
        self.conf["plugins"].as_array().expect("plugins").clone()
    }

    /// The config libcni gives plugin `p`: its own keys plus name, cniVersion and prevResult.
    pub fn plugin_conf(&self, p: &Value, prev: Option<&Value>) -> Value {
        let mut c = p.clone();
        c["name"] = self.conf["name"].clone();
        c["cniVersion"] = self.conf["cniVersion"].clone();
        if let Some(prev) = prev {
            c["prevResult"] = prev.clone();
        }
        c
    }

    pub fn exec(&self, plugin_type: &str, stdin: &str, env: &[(&str, &str)]) -> Run {
        let exe = self.bin.path().join(plugin_type);
        let mut cmd = match &self.node {
            Some(node) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", node]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        cmd.env("CNI_PATH", self.bin.path())
            .env("PODTAP_LOG", "info");
        for (k, v) in env {
            cmd.env(k, v);
        }
        Run {
            out: run_with_stdin(&mut cmd, stdin),
        }
    }

    pub fn env<'a>(
        cmd: &'a str,
        cid: &'a str,
        netns: &'a str,
        ifname: &'a str,
    ) -> Vec<(&'a str, &'a str)> {
        vec![
            ("CNI_COMMAND", cmd),
            ("CNI_CONTAINERID", cid),
            ("CNI_NETNS", netns),
            ("CNI_IFNAME", ifname),
        ]
    }

    /// ADD every plugin in order, threading the result; returns (results per plugin).
    pub fn add(&self, cid: &str, netns: &str, ifname: &str) -> Vec<Value> {
        let mut prev: Option<Value> = None;
        let mut results = Vec::new();
        for p in self.plugins() {
            let t = p["type"].as_str().expect("type").to_string();
            let stdin = self.plugin_conf(&p, prev.as_ref()).to_string();
            let r = self
                .exec(&t, &stdin, &Self::env("ADD", cid, netns, ifname))
                .expect_ok(&format!("ADD {t}"));
            prev = Some(r.clone());
            results.push(r);
        }
        results
    }

    /// CHECK every plugin in order with the cached final result.
    pub fn check(&self, cid: &str, netns: &str, ifname: &str, result: &Value) -> Vec<Run> {
        self.plugins()
            .iter()
            .map(|p| {
                let stdin = self.plugin_conf(p, Some(result)).to_string();
                self.exec(
                    p["type"].as_str().expect("type"),
                    &stdin,
                    &Self::env("CHECK", cid, netns, ifname),
                )
            })
            .collect()
    }

    /// DEL every plugin in reverse order, with the cached result when there is one.
    pub fn del(&self, cid: &str, netns: &str, ifname: &str, result: Option<&Value>) {
        for p in self.plugins().iter().rev() {
            let t = p["type"].as_str().expect("type");
            let stdin = self.plugin_conf(p, result).to_string();
            self.exec(t, &stdin, &Self::env("DEL", cid, netns, ifname))
                .expect_ok(&format!("DEL {t}"));
        }
    }

    /// Run podtap alone (the last plugin) with a config of `version` plus `extra` keys.
    pub fn podtap(&self, version: &str, extra: Value, env: &[(&str, &str)]) -> Run {
        let mut c = self.plugin_conf(self.plugins().last().expect("podtap"), None);
        c["cniVersion"] = json!(version);
        if let (Some(o), Some(e)) = (c.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                o.insert(k.clone(), v.clone());
            }
        }
        self.exec("podtap", &c.to_string(), env)
    }
}

/// The repository's conflist with test-private paths and subnet.
pub fn conflist(file: &str, state: &Path, data: &Path, net: u32) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("hooks/cni")
        .join(file);
    let mut conf: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read conflist"))
            .expect("conflist is JSON");
    conf["name"] = json!(format!("{}-{net}", conf["name"].as_str().unwrap_or("net")));
    for p in conf["plugins"].as_array_mut().expect("plugins") {
        if p["type"] == "podtap" {
            p["stateDir"] = json!(state);
        }
        if p.get("ipam").is_some() {
            p["ipam"]["dataDir"] = json!(data);
            p["ipam"]["ranges"] = json!([[{ "subnet": format!("198.19.{net}.0/24"), "gateway": format!("198.19.{net}.1") }]]);
        }
        if p["type"] == "bridge" {
            p["bridge"] = json!(format!("cnipt{net}"));
        }
    }
    conf
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

/// Root, `ip` and `tc`, or skip (printing why).
pub fn net_tools_or_skip(test: &str) -> bool {
    root_or_skip(test) && tool_or_skip(test, "ip") && tool_or_skip(test, "tc")
}

/// A process's exit code (-1 when a signal ended it).
pub fn exit_code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

impl Pod {
    /// An empty pod and peer with IPv6 DAD off in the pod, so link-local
    /// addresses are not "tentative" in one snapshot and settled in the next.
    pub fn without_dad() -> Self {
        let pod = Pod::new();
        pod.pod
            .exec("sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0");
        pod
    }
}

// ---- Reading a netns and a description ----

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

/// Interface `name` of a description (`podtap scan` / `attach` JSON); panics when absent.
pub fn iface<'a>(desc: &'a Value, name: &str) -> &'a Value {
    desc["interfaces"]
        .as_array()
        .unwrap_or_else(|| panic!("expected an array: {}", desc["interfaces"]))
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no interface {name} in {desc:#}"))
}

// ---- Waiting for the kernel to settle ----

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

// ---- One CNI reference plugin, run as a runtime would ----

/// Run CNI `plugin` (from [`PLUGINS`]) inside the netns `node` with `CNI_COMMAND=command`
/// for container `cid` in the netns at `netns`, `conf` on stdin.
pub fn cni_plugin(
    node: &str,
    command: &str,
    plugin: &str,
    cid: &str,
    netns: &str,
    ifname: &str,
    conf: &Value,
) -> Output {
    run_with_stdin(
        Command::new("ip")
            .args(["netns", "exec", node, &format!("{PLUGINS}/{plugin}")])
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", cid)
            .env("CNI_NETNS", netns)
            .env("CNI_IFNAME", ifname)
            .env("CNI_PATH", PLUGINS),
        &conf.to_string(),
    )
}

// ---- podtap watch ----

/// A running `podtap watch` and its events.
pub struct Watch {
    child: std::process::Child,
    events: std::sync::mpsc::Receiver<Value>,
}

impl Watch {
    pub fn start(state: &Path, id: &str, extra: &[&str]) -> Watch {
        let mut child = podtap_cmd(state)
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
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let left = deadline
                .checked_duration_since(Instant::now())
                .unwrap_or_else(|| panic!("no {kind:?} event in {secs} s"));
            let event = self
                .events
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {kind:?} event in {secs} s"));
            assert_ne!(event["event"], "error", "{event}");
            if event["event"] == kind {
                return event;
            }
        }
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
