//! CNI: the conflist runner (plugin by plugin, the libcni way) and single reference plugins.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::dirs::TempDir;
use crate::netns::Netns;
use crate::run::{run_with_stdin, stderr, stdout};

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
    /// `conf` is a parsed conflist; `bin` gets the plugins it names (`podtap`: the binary under test).
    pub fn new(podtap: &str, conf: Value, node: Option<&Netns>) -> Self {
        let bin = TempDir::new();
        for name in ["bridge", "macvlan", "host-local", "ptp"] {
            let _ = std::os::unix::fs::symlink(format!("{PLUGINS}/{name}"), bin.path().join(name));
        }
        std::os::unix::fs::symlink(podtap, bin.path().join("podtap")).expect("link podtap");
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

    /// CHECK every plugin in order with the cached final result; nothing
    /// before 0.4.0, where libcni refuses CHECK without running a plugin.
    pub fn check(&self, cid: &str, netns: &str, ifname: &str, result: &Value) -> Vec<Run> {
        if !self.version_at_least("0.4.0") {
            return Vec::new();
        }
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
        if let Err((t, run)) = self.try_del(cid, netns, ifname, result) {
            run.expect_ok(&format!("DEL {t}"));
        }
    }

    /// libcni's DelNetworkList: every plugin in reverse order with the
    /// cached result as `prevResult` (libcni sends none before 0.4.0), and
    /// stopping at the first plugin that fails, which is returned with its run.
    pub fn try_del(
        &self,
        cid: &str,
        netns: &str,
        ifname: &str,
        cached: Option<&Value>,
    ) -> Result<(), (String, Run)> {
        let cached = cached.filter(|_| self.version_at_least("0.4.0"));
        for p in self.plugins().iter().rev() {
            let t = p["type"].as_str().expect("type");
            let stdin = self.plugin_conf(p, cached).to_string();
            let run = self.exec(t, &stdin, &Self::env("DEL", cid, netns, ifname));
            if !run.ok() {
                return Err((t.to_string(), run));
            }
        }
        Ok(())
    }

    /// Whether the conflist's `cniVersion` is `min` or later.
    pub fn version_at_least(&self, min: &str) -> bool {
        let parts = |v: &str| -> Vec<u32> { v.split('.').filter_map(|p| p.parse().ok()).collect() };
        parts(self.conf["cniVersion"].as_str().unwrap_or("0.0.0")) >= parts(min)
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
    let path = crate::repo().join("hooks/cni").join(file);
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

/// CNI `plugin`'s ADD in the netns `node` for the pod netns `pod` (its
/// name as the container id), interface `ifname`; fails the test when the
/// plugin does.
pub fn cni_add(node: &Netns, pod: &Netns, plugin: &str, ifname: &str, conf: &Value) {
    let out = cni_plugin(
        &node.name,
        "ADD",
        plugin,
        &pod.name,
        &pod.path_str(),
        ifname,
        conf,
    );
    assert!(
        out.status.success(),
        "CNI {plugin} ADD: {}{}",
        stdout(&out),
        stderr(&out)
    );
}
