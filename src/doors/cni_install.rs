//! `podtap cni-install`: chain podtap into a node's existing CNI conflist,
//! idempotently, and take it out again byte for byte.
//!
//! The runtime (containerd, CRI-O) uses the first network configuration of
//! its conf dir in lexical order, as libcni lists it; that is the file
//! podtap edits. Install appends podtap's plugin entry after the others
//! (podtap is a chained plugin: it needs the interface plugin's result) and
//! keeps the original bytes beside it as `<file>.podtap-orig`; a second
//! install finds its entry and changes nothing. Uninstall puts the original
//! bytes back when the file is still what install wrote, and otherwise
//! removes only podtap's entry.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};
use crate::state::write_atomic;

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
    serde_json::from_value::<crate::doors::pod_policy::PodPolicy>(value.clone())
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

fn backup_of(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_os_string();
    name.push(BACKUP_SUFFIX);
    PathBuf::from(name)
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io("read", path, e))
}

/// Chain podtap into the primary network configuration of `conf_dir`;
/// returns the file the runtime now reads and whether anything changed.
///
/// A `.conflist` is edited in place, its original saved as
/// `<file>.podtap-orig`. A single-plugin `.conf` (or `.json`) cannot hold a
/// chain: it is moved aside to `<file>.podtap-orig` and the chain is written
/// as `<stem>.conflist` beside it.
pub fn install(conf_dir: &Path, entry: &Value) -> Result<(PathBuf, bool)> {
    let file = primary_conf(conf_dir)?;
    let original = read(&file)?;
    let parsed: Value = serde_json::from_slice(&original)
        .map_err(|e| Error::Invalid(format!("{}: {e}", file.display())))?;
    let Some(new) = chained(&parsed, entry)? else {
        return Ok((file, false));
    };
    let mut text = serde_json::to_vec_pretty(&new)
        .map_err(|e| Error::Invalid(format!("serialize conflist: {e}")))?;
    text.push(b'\n');
    let is_list = file.extension().and_then(|e| e.to_str()) == Some("conflist");
    let target = if is_list {
        file.clone()
    } else {
        file.with_extension("conflist")
    };
    if !is_list && target.exists() {
        return Err(Error::Invalid(format!(
            "{}: exists already; cannot turn {} into a chain",
            target.display(),
            file.display()
        )));
    }
    let backup = backup_of(&file);
    if !backup.exists() {
        write_atomic(&backup, &original, 0o644)?;
    }
    write_atomic(&target, &text, 0o644)?;
    if !is_list {
        std::fs::remove_file(&file).map_err(|e| Error::io("remove", &file, e))?;
    }
    Ok((target, true))
}

/// Take podtap out of `conf_dir`: every saved original comes back byte for
/// byte when the chain is still what install wrote (a `.conflist` made from a
/// `.conf` goes); when someone edited the chain since, only podtap's entry
/// is removed from it.
pub fn uninstall(conf_dir: &Path) -> Result<Vec<PathBuf>> {
    let mut changed = Vec::new();
    let entries =
        std::fs::read_dir(conf_dir).map_err(|e| Error::io("read CNI conf dir", conf_dir, e))?;
    for backup in entries.flatten().map(|e| e.path()) {
        let Some(name) = backup.to_str().and_then(|n| n.strip_suffix(BACKUP_SUFFIX)) else {
            continue;
        };
        let file = PathBuf::from(name);
        let is_list = file.extension().and_then(|e| e.to_str()) == Some("conflist");
        let chain = if is_list {
            file.clone()
        } else {
            file.with_extension("conflist")
        };
        let original = read(&backup)?;
        let original_json: Value = serde_json::from_slice(&original)
            .map_err(|e| Error::Invalid(format!("{}: {e}", backup.display())))?;
        // What install made of the original, without podtap's entry.
        let marker = serde_json::json!({ "type": "podtap" });
        let expected =
            unchained(&chained(&original_json, &marker)?.unwrap_or_else(|| original_json.clone()));
        let now = read(&chain)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        match now {
            Some(now) if unchained(&now) != expected => {
                // Edited since install: keep their edits, drop only podtap.
                let mut text = serde_json::to_vec_pretty(&unchained(&now))
                    .map_err(|e| Error::Invalid(format!("serialize conflist: {e}")))?;
                text.push(b'\n');
                write_atomic(&chain, &text, 0o644)?;
                if !is_list {
                    // Their edited chain stays the configuration; the old .conf stays out.
                    std::fs::remove_file(&backup).map_err(|e| Error::io("remove", &backup, e))?;
                    changed.push(chain);
                    continue;
                }
            }
            _ => {
                write_atomic(&file, &original, 0o644)?;
                if !is_list {
                    let _ = std::fs::remove_file(&chain);
                }
            }
        }
        std::fs::remove_file(&backup).map_err(|e| Error::io("remove", &backup, e))?;
        changed.push(file);
    }
    Ok(changed)
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
    /// Install, then stay until SIGTERM or SIGINT and uninstall (`--wait`).
    InstallAndWait,
    /// Restore the configuration and remove the binary (`--uninstall`).
    Uninstall,
}

/// `podtap cni-install`: `action` on the node's `conf_dir` and `bin_dir`,
/// chaining `entry`; one line on stderr per thing done.
pub fn run(action: Action, conf_dir: &Path, bin_dir: &Path, entry: &Value) -> Result<()> {
    if action != Action::Uninstall {
        let bin = install_binary(bin_dir)?;
        let (file, changed) = install(conf_dir, entry)?;
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
        if action == Action::Install {
            return Ok(());
        }
        let signal = wait_for_stop()?;
        eprintln!("podtap: {signal}: uninstalling");
    }
    for f in uninstall(conf_dir)? {
        eprintln!("podtap: restored {}", f.display());
    }
    let bin = bin_dir.join("podtap");
    match std::fs::remove_file(&bin) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("remove", bin, e)),
    }
}

/// Block until SIGTERM or SIGINT arrives (`cni-install --wait`) and name it.
///
/// The signals are blocked and taken with `sigwait`: as a container's PID 1,
/// a signal whose action is the default would be dropped, but a blocked one
/// is always queued. The CLI has no other thread to take them instead.
fn wait_for_stop() -> Result<nix::sys::signal::Signal> {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGINT);
    let failed = |what, e: nix::errno::Errno| Error::io(what, "SIGTERM/SIGINT", e.into());
    set.thread_block().map_err(|e| failed("block", e))?;
    set.wait().map_err(|e| failed("sigwait", e))
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
}
