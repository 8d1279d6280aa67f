//! The CNI commands: ADD, DEL, CHECK, VERSION, STATUS, GC.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{json, Value};

use super::config::{self, NetConf, LATEST_VERSION, SUPPORTED_VERSIONS};
use super::registry::{Entry, Registry};
use super::result::{self, ResultTap, TapEntry};
use super::{code, CniError, Env};
use crate::state::{SandboxId, StateDir};

/// Dispatch on `CNI_COMMAND`; `Ok(Some(json))` is printed on stdout.
pub fn run(env: &Env, stdin: &str) -> Result<Option<Value>, CniError> {
    match env.command.as_str() {
        "VERSION" => Ok(Some(version())),
        "ADD" => {
            table_limit()?;
            add(env, &config::parse(stdin)?).map(Some)
        }
        "DEL" => del(env, &config::parse(stdin)?).map(|()| None),
        "CHECK" => {
            table_limit()?;
            check(env, &config::parse(stdin)?).map(|()| None)
        }
        "STATUS" => {
            config::parse(stdin)?;
            super::status::probe().map(|()| None)
        }
        "GC" => gc(&config::parse(stdin)?).map(|()| None),
        other => Err(CniError::new(
            code::INVALID_ENV,
            format!("unknown CNI_COMMAND {other:?}"),
        )),
    }
}

/// The node's bound on a dump of the pod's tables (`PODTAP_TABLE_LIMIT_MIB`),
/// for ADD and CHECK, which read them. DEL and GC read none: a bad value
/// must not stop a teardown.
fn table_limit() -> Result<(), CniError> {
    crate::doors::table_limit::apply_env()
        .map_err(|e| CniError::new(code::INVALID_ENV, e.to_string()))
}

fn version() -> Value {
    json!({ "cniVersion": LATEST_VERSION, "supportedVersions": SUPPORTED_VERSIONS })
}

/// The sandbox id of one CNI attachment: `<containerID>-<ifname>`.
pub fn sandbox_id(container_id: &str, ifname: &str) -> Result<SandboxId, CniError> {
    SandboxId::for_cni(container_id, ifname).map_err(|e| {
        CniError::new(
            code::INVALID_ENV,
            "CNI_CONTAINERID/CNI_IFNAME do not make a valid sandbox id",
        )
        .details(e.to_string())
    })
}

fn network_name(conf: &NetConf) -> String {
    conf.name.clone().unwrap_or_default()
}

fn add(env: &Env, conf: &NetConf) -> Result<Value, CniError> {
    let container_id = env.required("CNI_CONTAINERID")?;
    let netns = env.required("CNI_NETNS")?;
    let ifname = env.required("CNI_IFNAME")?;
    let id = sandbox_id(container_id, ifname)?;
    let prev = conf.prev_result.as_ref().ok_or_else(|| {
        CniError::new(
            code::INVALID_CONFIG,
            "podtap is a chained plugin: ADD needs a prevResult",
        )
        .details("place podtap after an interface plugin (bridge, macvlan, ptp, ...) in a conflist")
    })?;
    result::validate(prev)?;
    let mut opts = conf.attach_options(ifname, &env.args)?;
    opts.dns = result::dns(prev)?;
    let state_path = conf.state_dir();
    let state = StateDir::new(&state_path);
    let registry = Registry::new(&state_path);
    registry.record_if_absent(
        &id,
        &Entry {
            network: network_name(conf),
            container_id: container_id.to_string(),
            ifname: ifname.to_string(),
            netns: Some(netns.to_string()),
        },
    )?;
    let desc = match crate::attach::attach(Path::new(netns), &id, &opts, &state) {
        Ok(desc) => desc,
        Err(e) => {
            // attach undoes a failed attempt; drop the marker unless a checkpoint survived.
            if matches!(state.load(&id), Ok(None)) {
                let _ = registry.forget(&id);
            }
            return Err(e.into());
        }
    };
    let iface = desc.interface(ifname);
    let tap = iface.and_then(|i| i.tap.as_ref()).ok_or_else(|| {
        CniError::new(
            code::PODTAP_BASE + 1,
            format!("attach built no TAP for {ifname}"),
        )
    })?;
    let pod_mac_now = iface
        .and_then(|i| i.bridge.as_ref())
        .map(|b| (ifname, b.pod_interface_mac.as_str()));
    let entry = TapEntry {
        tap_name: &tap.name,
        tap_mac: tap.mac.as_deref(),
        guest_mac: iface.and_then(|i| i.guest_mac.as_deref()),
        sandbox: netns,
        container_id,
        pod_ifname: ifname,
        pod_mac_now,
        style: conf.result_tap,
    };
    Ok(result::with_tap(prev, &conf.cni_version, &entry))
}

fn del(env: &Env, conf: &NetConf) -> Result<(), CniError> {
    let container_id = env.required("CNI_CONTAINERID")?;
    let ifname = env.required("CNI_IFNAME")?;
    let Ok(id) = sandbox_id(container_id, ifname) else {
        tracing::warn!("DEL: {container_id}-{ifname} is no valid sandbox id; nothing can exist");
        return Ok(());
    };
    let state_path = conf.state_dir();
    let registry = Registry::new(&state_path);
    let netns = env.netns.clone().or_else(|| registry.get(&id)?.netns);
    detach(&id, &StateDir::new(&state_path), netns.as_deref())?;
    registry.forget(&id)?;
    Ok(())
}

/// Detach `id`; a corrupt checkpoint is cleaned up by podtap's markers in `netns`.
fn detach(id: &SandboxId, state: &StateDir, netns: Option<&str>) -> Result<(), CniError> {
    let report = crate::detach::detach_for_teardown(id, state, netns.map(Path::new))?;
    for w in report.warnings {
        tracing::warn!("sandbox {id}: {w}");
    }
    Ok(())
}

fn check(env: &Env, conf: &NetConf) -> Result<(), CniError> {
    let container_id = env.required("CNI_CONTAINERID")?;
    let netns = env.required("CNI_NETNS")?;
    let ifname = env.required("CNI_IFNAME")?;
    let id = sandbox_id(container_id, ifname)?;
    let prev = conf
        .prev_result
        .as_ref()
        .ok_or_else(|| CniError::new(code::INVALID_CONFIG, "CHECK needs a prevResult"))?;
    result::validate(prev)?;
    let failed = |why: String| CniError::new(code::PODTAP_BASE + 12, why);
    if result::find(prev, ifname, netns).is_none() {
        return Err(failed(format!(
            "prevResult has no interface {ifname} in sandbox {netns}"
        )));
    }
    let state = StateDir::new(conf.state_dir());
    crate::check::check(&id, &state)?;
    let desc = state
        .load(&id)?
        .and_then(|cp| cp.into_description())
        .ok_or_else(|| failed(format!("sandbox {id}: no recorded description")))?;
    let iface = desc.interface(ifname);
    let Some(tap) = iface.and_then(|i| i.tap.as_ref()) else {
        return Err(failed(format!(
            "sandbox {id}: no TAP recorded for {ifname}"
        )));
    };
    if conf.result_tap == ResultTap::Omitted {
        return Ok(());
    }
    let Some(listed) = result::find(prev, &tap.name, netns) else {
        return Err(failed(format!(
            "prevResult does not list TAP {} in sandbox {netns}",
            tap.name
        )));
    };
    if listed.mac.is_some() && tap.mac.is_some() && listed.mac != tap.mac {
        return Err(failed(format!(
            "prevResult lists TAP {} with MAC {:?}, but its own MAC is {:?}",
            tap.name, listed.mac, tap.mac
        )));
    }
    Ok(())
}

fn gc(conf: &NetConf) -> Result<(), CniError> {
    let valid = conf
        .valid_attachments
        .as_ref()
        .ok_or_else(|| CniError::new(code::INVALID_CONFIG, "GC needs cni.dev/valid-attachments"))?;
    // An attachment that makes no valid id cannot have a checkpoint to keep.
    let keep: BTreeSet<SandboxId> = valid
        .iter()
        .filter_map(|a| SandboxId::for_cni(&a.container_id, &a.ifname).ok())
        .collect();
    let network = network_name(conf);
    let state_path = conf.state_dir();
    let state = StateDir::new(&state_path);
    let registry = Registry::new(&state_path);
    let mut errors = Vec::new();
    for id in registry.ids()? {
        if keep.contains(&id) {
            continue;
        }
        let Some(entry) = registry.get(&id) else {
            // Unreadable: it may belong to another network; never GC what may not be ours.
            tracing::warn!("GC: registry entry for {id} is unreadable; left it for DEL");
            continue;
        };
        if entry.network != network {
            continue;
        }
        match detach(&id, &state, entry.netns.as_deref()) {
            Ok(()) => {
                tracing::info!("GC: detached {id}");
                if let Err(e) = registry.forget(&id) {
                    errors.push(CniError::from(e));
                }
            }
            Err(e) => errors.push(e),
        }
    }
    match errors.first() {
        None => Ok(()),
        Some(first) => Err(CniError::new(
            first.code,
            format!("GC: {} attachment(s) could not be removed", errors.len()),
        )
        .details(
            errors
                .iter()
                .map(|e| e.msg.clone())
                .collect::<Vec<_>>()
                .join("; "),
        )),
    }
}
