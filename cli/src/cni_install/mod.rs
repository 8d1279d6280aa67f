//! `podtap cni-install`: chain podtap into a node's existing CNI conflist,
//! idempotently, keep it chained while the node's CNI rewrites its file,
//! and take it out again without losing anyone's file.
//!
//! The runtime (containerd, CRI-O) uses the first network configuration of
//! its conf dir in lexical order, as libcni lists it; that is the file
//! podtap edits, except on a Multus node, where it is the cluster network
//! Multus delegates to (Multus rebuilds its own file from that one).
//! Install appends podtap's plugin entry after the others (podtap is a
//! chained plugin: it needs the interface plugin's result) and keeps the
//! owner's latest bytes beside it as `<file>.podtap-orig`; a second install
//! finds its entry and changes nothing.
//!
//! Flannel's init container, Calico's install-cni and the Cilium agent
//! rewrite their file when they restart, which drops podtap's entry:
//! `--wait` watches the conf dir and chains podtap in again ([`wait`]).
//! Uninstall puts the saved bytes back only when the file is still what
//! install wrote, removes only podtap's entry from a file edited since, and
//! leaves a file its owner rewrote alone.

mod wait;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};
use podtap::state::{write_atomic, StateDir};

/// `entry` with the node's pod policy (`--pod-policy`, a JSON object of
/// `docs/integration.md`, "Pod policy"), checked before anything is installed.
pub fn with_pod_policy(mut entry: Value, policy: &str) -> Result<Value> {
    let value: Value = serde_json::from_str(policy)
        .map_err(|e| Error::Invalid(format!("--pod-policy {policy:?}: not JSON: {e}")))?;
    if !value.is_object() {
        return Err(Error::Invalid(format!(
            "--pod-policy {policy:?}: not a JSON object"
        )));
    }
    serde_json::from_value::<crate::pod_policy::PodPolicy>(value.clone())
        .map_err(|e| Error::Invalid(format!("--pod-policy {policy:?}: {e}")))?;
    if let Some(o) = entry.as_object_mut() {
        o.insert("podPolicy".into(), value);
    }
    Ok(entry)
}

/// The suffix of the saved original conflist.
pub const BACKUP_SUFFIX: &str = ".podtap-orig";

/// What to chain: podtap's plugin entry.
pub fn plugin_entry(state_dir: &str, mode: &str) -> Value {
    serde_json::json!({
        "type": "podtap",
        "mode": mode,
        "stateDir": state_dir,
        "capabilities": { "io.kubernetes.cri.pod-annotations": true }
    })
}

/// Pure: `conflist` with `entry` appended to its `plugins`, or `None` when a
/// `podtap` plugin is already there. A single-plugin `.conf` file becomes a
/// conflist with its plugin first.
pub fn chained(conflist: &Value, entry: &Value) -> Result<Option<Value>> {
    let obj = conflist
        .as_object()
        .ok_or_else(|| Error::Invalid("CNI configuration is not a JSON object".into()))?;
    let mut out = obj.clone();
    let plugins = match obj.get("plugins") {
        Some(Value::Array(p)) => p.clone(),
        Some(_) => return Err(Error::Invalid("CNI conflist: plugins is not a list".into())),
        None => {
            // A .conf file: one plugin, whose network keys go to the list.
            let mut plugin = obj.clone();
            for key in ["cniVersion", "name"] {
                plugin.remove(key);
            }
            out = obj
                .iter()
                .filter(|(k, _)| matches!(k.as_str(), "cniVersion" | "name"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            vec![Value::Object(plugin)]
        }
    };
    if plugins
        .iter()
        .any(|p| p.get("type").and_then(Value::as_str) == Some("podtap"))
    {
        return Ok(None);
    }
    let mut plugins = plugins;
    plugins.push(entry.clone());
    out.insert("plugins".into(), Value::Array(plugins));
    Ok(Some(Value::Object(out)))
}

/// Why the network of `conflist` configures its guests itself, if it does:
/// an IPAM of type `dhcp` (the CNI dhcp plugin leases from the network's
/// own DHCP server), or a macvlan, ipvlan or host-device with no IPAM (the
/// interface has no address; the network's DHCP configures what is on it).
/// podtap answering there would hide that server from the guest.
pub fn own_dhcp(conflist: &Value) -> Option<String> {
    let plugins: Vec<&Value> = match conflist.get("plugins") {
        Some(Value::Array(p)) => p.iter().collect(),
        _ => vec![conflist],
    };
    for p in plugins {
        let kind = p.get("type").and_then(Value::as_str).unwrap_or_default();
        let ipam = p
            .get("ipam")
            .and_then(|i| i.get("type"))
            .and_then(Value::as_str);
        if ipam == Some("dhcp") {
            return Some(format!(
                "the {kind} plugin's IPAM is dhcp: the network's DHCP server answers"
            ));
        }
        if matches!(kind, "macvlan" | "ipvlan" | "host-device") && ipam.is_none() {
            return Some(format!(
                "the {kind} plugin has no IPAM: the network configures its guests"
            ));
        }
    }
    None
}

/// Pure: `conflist` without podtap's plugin entries.
pub fn unchained(conflist: &Value) -> Value {
    let mut out = conflist.clone();
    if let Some(Value::Array(plugins)) = out.get_mut("plugins") {
        plugins.retain(|p| p.get("type").and_then(Value::as_str) != Some("podtap"));
    }
    out
}

/// The network configuration files of CNI conf dir `dir` (`.conflist`,
/// `.conf`, `.json`), in the lexical order runtimes read them in.
pub fn conf_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e, "conflist" | "conf" | "json"))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// The network configuration the runtime uses: the first `.conflist`,
/// `.conf` or `.json` file of `dir` in lexical order (podtap's own backups
/// are not candidates).
pub fn primary_conf(dir: &Path) -> Result<PathBuf> {
    let files = conf_files(dir).map_err(|e| Error::io("read CNI conf dir", dir, e))?;
    files.into_iter().next().ok_or_else(|| {
        Error::Invalid(format!(
            "CNI conf dir {}: no network configuration to chain podtap into",
            dir.display()
        ))
    })
}

/// The plugin types of Multus's own configuration (thin and thick).
const MULTUS_TYPES: [&str; 2] = ["multus", "multus-shim"];

/// The file podtap chains into: the runtime's network configuration
/// ([`primary_conf`]), or on a Multus node the cluster network Multus
/// delegates to. Multus regenerates its `00-multus.conf` from that file (thin
/// Multus copies it in as its delegate), so every pod's chain reaches
/// podtap; an entry added to Multus's own file would be lost on its next
/// rewrite, and a `.conflist` made from it would sort after the `.conf`
/// Multus writes again.
pub fn chain_target(conf_dir: &Path) -> Result<PathBuf> {
    let primary = primary_conf(conf_dir)?;
    let conf: Value = serde_json::from_slice(&read(&primary)?)
        .map_err(|e| Error::Invalid(format!("{}: {e}", primary.display())))?;
    let kind = conf.get("type").and_then(Value::as_str);
    if !kind.is_some_and(|k| MULTUS_TYPES.contains(&k)) {
        return Ok(primary);
    }
    // Multus's `clusterNetwork` may name a file of this dir (by its path on
    // Multus's side of a mount, so only the file name counts).
    let named = conf
        .get("clusterNetwork")
        .and_then(Value::as_str)
        .and_then(|p| Path::new(p).file_name())
        .map(|n| conf_dir.join(n))
        .filter(|p| p.is_file());
    let files = conf_files(conf_dir).map_err(|e| Error::io("read CNI conf dir", conf_dir, e))?;
    named
        .or_else(|| files.into_iter().find(|f| *f != primary))
        .ok_or_else(|| {
            Error::Invalid(format!(
                "{}: Multus's configuration, and no cluster network beside it to chain podtap into",
                primary.display()
            ))
        })
}

fn backup_of(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_os_string();
    name.push(BACKUP_SUFFIX);
    PathBuf::from(name)
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io("read", path, e))
}

/// Chain podtap into the network configuration of `conf_dir` that pods
/// use ([`chain_target`]); returns the file the runtime now reads and
/// whether anything changed.
///
/// A `.conflist` is edited in place, the owner's bytes saved as
/// `<file>.podtap-orig` (each time podtap chains in again, so the saved
/// bytes are the owner's latest). A single-plugin `.conf` (or `.json`)
/// cannot hold a chain: it is moved aside to `<file>.podtap-orig` and the
/// chain is written as `<stem>.conflist`; when the owner writes the `.conf`
/// again, the chain is made anew from it.
pub fn install(conf_dir: &Path, entry: &Value) -> Result<(PathBuf, bool)> {
    let file = chain_target(conf_dir)?;
    let original = read(&file)?;
    let parsed: Value = serde_json::from_slice(&original)
        .map_err(|e| Error::Invalid(format!("{}: {e}", file.display())))?;
    let mut entry = entry.clone();
    if entry.get("serve") == Some(&Value::Bool(true)) {
        if let Some(why) = own_dhcp(&parsed) {
            eprintln!("podtap: {}: guests are not served: {why}", file.display());
            if let Some(o) = entry.as_object_mut() {
                o.remove("serve");
            }
        }
    }
    let Some(new) = chained(&parsed, &entry)? else {
        return Ok((file, false));
    };
    let is_list = file.extension().and_then(|e| e.to_str()) == Some("conflist");
    let target = if is_list {
        file.clone()
    } else {
        file.with_extension("conflist")
    };
    let backup = backup_of(&file);
    // A `<stem>.conflist` beside a `.conf` is podtap's own when podtap saved
    // that `.conf`; anyone else's is never written over.
    if !is_list && target.exists() && !backup.exists() {
        return Err(Error::Invalid(format!(
            "{}: exists already and is not podtap's; cannot turn {} into a chain",
            target.display(),
            file.display()
        )));
    }
    write_atomic(&backup, &original, 0o644)?;
    write_atomic(&target, &pretty(&new)?, 0o644)?;
    if !is_list {
        std::fs::remove_file(&file).map_err(|e| Error::io("remove", &file, e))?;
    }
    Ok((target, true))
}

fn pretty(conf: &Value) -> Result<Vec<u8>> {
    let mut text = serde_json::to_vec_pretty(conf)
        .map_err(|e| Error::Invalid(format!("serialize conflist: {e}")))?;
    text.push(b'\n');
    Ok(text)
}

fn has_podtap(conf: &Value) -> bool {
    conf.get("plugins")
        .and_then(Value::as_array)
        .is_some_and(|p| {
            p.iter()
                .any(|p| p.get("type").and_then(Value::as_str) == Some("podtap"))
        })
}

/// Take podtap out of `conf_dir`, one saved original at a time ([`restore`]).
pub fn uninstall(conf_dir: &Path) -> Result<Vec<PathBuf>> {
    let mut changed = Vec::new();
    let entries =
        std::fs::read_dir(conf_dir).map_err(|e| Error::io("read CNI conf dir", conf_dir, e))?;
    for backup in entries.flatten().map(|e| e.path()) {
        let Some(name) = backup.to_str().and_then(|n| n.strip_suffix(BACKUP_SUFFIX)) else {
            continue;
        };
        changed.extend(restore(Path::new(name), &backup)?);
        std::fs::remove_file(&backup).map_err(|e| Error::io("remove", &backup, e))?;
    }
    Ok(changed)
}

/// Undo install for `file`, whose owner's bytes are in `backup`; the file
/// changed, if any. The saved bytes come back when the chain is still what
/// install wrote. A chain edited since keeps its edits without podtap's
/// entry. A file its owner rewrote since (no podtap in it, or a `.conf`
/// written again beside podtap's `.conflist`) is the owner's and stays.
fn restore(file: &Path, backup: &Path) -> Result<Option<PathBuf>> {
    let is_list = file.extension().and_then(|e| e.to_str()) == Some("conflist");
    let chain = if is_list {
        file.to_path_buf()
    } else {
        file.with_extension("conflist")
    };
    let now = read(&chain)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .filter(has_podtap);
    let Some(now) = now else {
        return Ok(None);
    };
    if !is_list && file.exists() {
        std::fs::remove_file(&chain).map_err(|e| Error::io("remove", &chain, e))?;
        return Ok(Some(chain));
    }
    let original = read(backup)?;
    let original_json: Value = serde_json::from_slice(&original)
        .map_err(|e| Error::Invalid(format!("{}: {e}", backup.display())))?;
    // What install made of the original, without podtap's entry.
    let marker = serde_json::json!({ "type": "podtap" });
    let expected =
        unchained(&chained(&original_json, &marker)?.unwrap_or_else(|| original_json.clone()));
    if unchained(&now) != expected {
        write_atomic(&chain, &pretty(&unchained(&now))?, 0o644)?;
        return Ok(Some(chain));
    }
    write_atomic(file, &original, 0o644)?;
    if !is_list {
        let _ = std::fs::remove_file(&chain);
    }
    Ok(Some(file.to_path_buf()))
}

/// Put this very binary at `bin_dir/podtap` (atomically), for the runtime to run.
pub fn install_binary(bin_dir: &Path) -> Result<PathBuf> {
    let me = std::fs::read("/proc/self/exe").map_err(|e| Error::io("read", "/proc/self/exe", e))?;
    let target = bin_dir.join("podtap");
    write_atomic(&target, &me, 0o755)?;
    Ok(target)
}

/// What `podtap cni-install` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Binary into the bin dir, podtap chained in; then exit.
    Install,
    /// Install, then keep podtap chained and the state dir swept until
    /// SIGTERM or SIGINT, which leave it installed (`--wait`).
    InstallAndWait {
        /// The time between two sweeps (zero: only at start).
        sweep_every: std::time::Duration,
    },
    /// Restore the configuration, remove the binary, sweep the state dir
    /// (`--uninstall`); with `wait`, then stay until SIGTERM or SIGINT (the
    /// container of a DaemonSet that takes podtap off every node).
    Uninstall {
        /// Stay until a signal once done.
        wait: bool,
    },
}

/// `podtap cni-install`: `action` on the node's `conf_dir` and `bin_dir`,
/// chaining `entry`; one line on stderr per thing done.
pub fn run(action: Action, conf_dir: &Path, bin_dir: &Path, entry: &Value) -> Result<()> {
    let state = StateDir::new(
        entry
            .get("stateDir")
            .and_then(Value::as_str)
            .unwrap_or(podtap::state::DEFAULT_STATE_DIR),
    );
    match action {
        Action::Install => {
            let bin = install_binary(bin_dir)?;
            report(install(conf_dir, entry)?, &bin);
            Ok(())
        }
        Action::InstallAndWait { sweep_every } => {
            // Watch first: a change between the install and the watch
            // (an old pod's uninstall in a surging rollout) is not missed.
            let watch = wait::Watch::start(conf_dir, bin_dir)?;
            let bin = install_binary(bin_dir)?;
            // The node's CNI may not have written its file yet (its
            // DaemonSet starts beside this one): the watch chains podtap in
            // when it does.
            match install(conf_dir, entry) {
                Ok(done) => report(done, &bin),
                Err(e) => eprintln!(
                    "podtap: not chained yet: {e}; watching {}",
                    conf_dir.display()
                ),
            }
            sweep(&state);
            let mut again = || sweep(&state);
            let signal = watch.keep_chained((conf_dir, bin_dir, entry), sweep_every, &mut again)?;
            // A rolling update stops this pod and starts the next one: podtap
            // stays chained in the gap, so no pod made meanwhile goes
            // without its TAP. `--uninstall` takes podtap off the node.
            eprintln!(
                "podtap: {signal}: leaving podtap chained (cni-install --uninstall removes it)"
            );
            Ok(())
        }
        Action::Uninstall { wait } => {
            let watch = wait
                .then(|| wait::Watch::start(conf_dir, bin_dir))
                .transpose()?;
            for f in uninstall(conf_dir)? {
                eprintln!("podtap: restored {}", f.display());
            }
            let bin = bin_dir.join("podtap");
            match std::fs::remove_file(&bin) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("remove", bin, e)),
            }
            sweep(&state);
            if let Some(watch) = watch {
                eprintln!("podtap: uninstalled; waiting for SIGTERM");
                watch.until_signal()?;
            }
            Ok(())
        }
    }
}

/// Sweep the state dir ([`podtap::sweep`]), one line for each thing
/// removed or left; a sweep that cannot run says why and stops nothing.
pub fn sweep(state: &StateDir) {
    match podtap::sweep::sweep(state) {
        Ok(swept) => {
            for (id, why) in &swept.detached {
                eprintln!("podtap: sweep: removed the checkpoint of {id}: {why}");
            }
            for id in &swept.forgotten {
                eprintln!(
                    "podtap: sweep: removed the CNI registry entry of {id}: it had no checkpoint"
                );
            }
            for (id, why) in &swept.unreadable {
                eprintln!("podtap: sweep: left {id}: {why}");
            }
        }
        Err(e) => eprintln!("podtap: sweep of {}: {e}", state.path().display()),
    }
}

fn report((file, changed): (PathBuf, bool), bin: &Path) {
    let what = if changed {
        "chained"
    } else {
        "already chained"
    };
    eprintln!(
        "podtap: {what} in {}; binary at {}",
        file.display(),
        bin.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chaining_is_idempotent_and_converts_a_single_plugin_conf() {
        let entry = plugin_entry("/run/podtap", "tc");
        let list = serde_json::json!({"cniVersion": "1.0.0", "name": "k8s",
            "plugins": [{"type": "bridge"}, {"type": "portmap", "capabilities": {"portMappings": true}}]});
        let once = chained(&list, &entry).unwrap().unwrap();
        assert_eq!(once["plugins"].as_array().unwrap().len(), 3);
        assert_eq!(once["plugins"][2]["type"], "podtap");
        assert!(
            chained(&once, &entry).unwrap().is_none(),
            "a second install adds nothing"
        );
        assert_eq!(unchained(&once), list);
        let conf = serde_json::json!({"cniVersion": "0.3.1", "name": "flannel", "type": "flannel",
            "delegate": {"isDefaultGateway": true}});
        let list = chained(&conf, &entry).unwrap().unwrap();
        assert_eq!(list["name"], "flannel");
        assert_eq!(list["plugins"][0]["type"], "flannel");
        assert_eq!(list["plugins"][0]["delegate"]["isDefaultGateway"], true);
        assert!(list["plugins"][0].get("cniVersion").is_none());
        assert!(chained(&serde_json::json!([]), &entry).is_err());
    }

    #[test]
    fn the_pod_policy_is_checked_and_written() {
        let entry = plugin_entry("/run/podtap", "tc");
        let e = with_pod_policy(entry.clone(), r#"{"modes":["bridge"],"maxQueues":2}"#).unwrap();
        assert_eq!(e["podPolicy"]["maxQueues"], 2);
        for bad in ["{", r#"{"maxQueue":2}"#, r#"{"modes":["vepa"]}"#, "[]"] {
            let err = with_pod_policy(entry.clone(), bad).unwrap_err();
            assert_eq!(err.exit_code(), crate::error::exit::INVALID, "{bad}");
        }
    }

    #[test]
    fn a_network_with_its_own_dhcp_is_found_and_others_are_not() {
        let own = |v: serde_json::Value| own_dhcp(&v);
        let dhcp = serde_json::json!({"plugins": [{"type": "bridge", "ipam": {"type": "dhcp"}}]});
        assert!(own(dhcp).unwrap().contains("bridge plugin's IPAM is dhcp"));
        for kind in ["macvlan", "ipvlan", "host-device"] {
            let bare = serde_json::json!({"plugins": [{"type": kind, "master": "eth0"}]});
            assert!(own(bare).unwrap().contains("has no IPAM"), "{kind}");
        }
        let single = serde_json::json!({"type": "macvlan", "ipam": {"type": "dhcp"}});
        assert!(
            own(single).is_some(),
            "a single-plugin conf is looked at too"
        );
        for served in [
            serde_json::json!({"plugins": [{"type": "bridge", "ipam": {"type": "host-local"}}]}),
            serde_json::json!({"plugins": [{"type": "macvlan", "ipam": {"type": "static"}}]}),
            serde_json::json!({"type": "calico", "ipam": {"type": "calico-ipam"}}),
            serde_json::json!({"type": "flannel", "delegate": {}}),
        ] {
            assert_eq!(own(served.clone()), None, "{served}");
        }
    }
}
