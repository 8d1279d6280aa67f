//! The CNI commands: ADD, DEL, CHECK, VERSION, STATUS, GC.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{json, Value};

use super::config::{self, NetConf, TeardownConf};
use super::result::{self, ResultTap, TapEntry, VmIp};
use super::version::CniVersion;
use super::{code, CniError, Env};
use podtap::detach::LinkDeletion;
use podtap::model::{Description, Family};
use podtap::state::{Registry, RegistryEntry};
use podtap::state::{SandboxId, StateDir};

/// Dispatch on `CNI_COMMAND`; `Ok(Some(json))` is printed on stdout.
pub fn run(env: &Env, stdin: &str) -> Result<Option<Value>, CniError> {
    match env.command.as_str() {
        "VERSION" => Ok(Some(version(stdin))),
        "ADD" => {
            let limit = table_limit()?;
            add(env, &config::parse(stdin)?, limit).map(Some)
        }
        "DEL" => del(env, &config::parse_teardown(stdin)?).map(|()| None),
        "CHECK" => {
            let conf = since(config::parse(stdin)?, CniVersion::FIRST_WITH_CHECK)?;
            table_limit()?;
            check(env, &conf).map(|()| None)
        }
        "STATUS" => {
            let conf = since(config::parse(stdin)?, CniVersion::FIRST_WITH_STATUS_AND_GC)?;
            super::status::probe(&conf).map(|()| None)
        }
        "GC" => {
            let conf = since(config::parse(stdin)?, CniVersion::FIRST_WITH_STATUS_AND_GC)?;
            gc(&conf).map(|()| None)
        }
        other => Err(CniError::new(
            code::INVALID_ENV,
            format!("unknown CNI_COMMAND {other:?}"),
        )),
    }
}

/// `conf`, if its version defines the command, which `first` did (error 1
/// otherwise: libcni never sends it then, so another caller asked for the
/// wrong version).
fn since(conf: NetConf, first: CniVersion) -> Result<NetConf, CniError> {
    if conf.cni_version >= first {
        return Ok(conf);
    }
    Err(CniError::new(
        code::INCOMPATIBLE_VERSION,
        format!(
            "CNI version {} does not define this command",
            conf.cni_version
        ),
    )
    .details(format!("it is defined from cniVersion {first} on")))
}

/// The node's bound on a dump of the pod's tables (`PODTAP_TABLE_LIMIT_MIB`),
/// for ADD and CHECK, which read them. DEL and GC read none: a bad value
/// must not stop a teardown.
fn table_limit() -> Result<usize, CniError> {
    crate::table_limit::from_env().map_err(|e| CniError::new(code::INVALID_ENV, e.to_string()))
}

/// VERSION answers in the request's version when podtap speaks it (the
/// newest otherwise) and lists every version it speaks. Its stdin is only
/// `{"cniVersion": ...}`, or nothing at all from older runtimes.
fn version(stdin: &str) -> Value {
    let asked = config::requested_version(stdin).and_then(|v| CniVersion::parse(&v));
    json!({
        "cniVersion": asked.unwrap_or(CniVersion::LATEST).as_str(),
        "supportedVersions": CniVersion::names(),
    })
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

fn add(env: &Env, conf: &NetConf, table_answer_limit: usize) -> Result<Value, CniError> {
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
    opts.table_answer_limit = table_answer_limit;
    let state_path = conf.state_dir();
    let state = StateDir::new(&state_path);
    let registry = Registry::new(&state_path);
    registry.record_if_absent(
        &id,
        &RegistryEntry {
            network: network_name(conf),
            container_id: container_id.to_string(),
            ifname: ifname.to_string(),
            netns: Some(netns.to_string()),
        },
    )?;
    let desc = match podtap::attach::attach(Path::new(netns), &id, &opts, &state) {
        Ok(attached) => attached.description,
        Err(e) => {
            // attach undoes a failed attempt; drop the marker unless a checkpoint survived.
            if matches!(state.load(&id), Ok(None)) {
                let _ = registry.forget(&id);
            }
            return Err(e.into());
        }
    };
    let at = Where {
        netns,
        container_id,
        ifname,
    };
    result_of(&desc, prev, conf, at)
}

/// Where one CNI attachment lives: the netns, the container and the interface.
struct Where<'a> {
    netns: &'a str,
    container_id: &'a str,
    ifname: &'a str,
}

/// ADD's result: `prev` with the TAP as `resultTap` says, in the conf's version.
fn result_of(
    desc: &Description,
    prev: &Value,
    conf: &NetConf,
    at: Where<'_>,
) -> Result<Value, CniError> {
    let iface = desc.interface(at.ifname);
    let tap = iface.and_then(|i| i.tap.as_ref()).ok_or_else(|| {
        CniError::new(
            code::PODTAP_BASE + 1,
            format!("attach built no TAP for {}", at.ifname),
        )
    })?;
    let entry = TapEntry {
        tap_name: &tap.name,
        tap_mac: tap.mac.as_deref(),
        guest_mac: iface.and_then(|i| i.guest_mac.as_deref()),
        sandbox: at.netns,
        container_id: at.container_id,
        pod_ifname: at.ifname,
        pod_mac_now: iface
            .and_then(|i| i.bridge.as_ref())
            .map(|b| b.pod_interface_mac.as_str()),
        vm_ips: vm_ips(desc, prev, at.ifname),
        style: conf.result_tap,
    };
    Ok(result::with_tap(prev, conf.cni_version, &entry))
}

/// The pod interface's addresses as the scan found them (link-local ones
/// left out: the guest makes its own), each with the gateway the previous
/// result gives it, or else the default route's through that interface.
/// The scan, not the previous result, says which addresses are the pod
/// interface's: Calico names its entry after the host veth and older Cilium
/// gives no `interface` index (tc-redirect-tap#7 broke on both).
fn vm_ips(desc: &Description, prev: &Value, ifname: &str) -> Vec<VmIp> {
    let Some(iface) = desc.interface(ifname) else {
        return Vec::new();
    };
    let prev_gateway = |cidr: &str| {
        prev.get("ips")?.as_array()?.iter().find_map(|ip| {
            (ip.get("address")?.as_str()? == cidr)
                .then(|| ip.get("gateway")?.as_str().map(str::to_string))?
        })
    };
    let default_gateway = |family: Family| {
        desc.routes.iter().find_map(|r| {
            let default = matches!(r.destination.as_str(), "0.0.0.0/0" | "::/0");
            (default && r.family == family && r.interface.as_deref() == Some(ifname))
                .then(|| r.gateway.clone())?
        })
    };
    iface
        .address_details
        .iter()
        .filter(|a| !a.link_local)
        .map(|a| VmIp {
            address: a.cidr.clone(),
            gateway: prev_gateway(&a.cidr).or_else(|| default_gateway(a.family)),
        })
        .collect()
}

/// DEL fails only when the kernel or the state directory refuses: it runs
/// whatever the configuration's version or `prevResult`, and with an empty
/// `CNI_NETNS` it finds the netns in podtap's own record.
fn del(env: &Env, conf: &TeardownConf) -> Result<(), CniError> {
    let container_id = env.required("CNI_CONTAINERID")?;
    let ifname = env.required("CNI_IFNAME")?;
    let Ok(id) = sandbox_id(container_id, ifname) else {
        tracing::warn!("DEL: {container_id}-{ifname} is no valid sandbox id; nothing can exist");
        return Ok(());
    };
    let state_path = conf.state_dir();
    let registry = Registry::new(&state_path);
    let netns = env.netns.clone().or_else(|| registry.get(&id)?.netns);
    detach(
        &id,
        &StateDir::new(&state_path),
        netns.as_deref(),
        AFTER_THE_CHAIN,
    )?;
    registry.forget(&id)?;
    Ok(())
}

/// How a DEL's link deletion waits for the chain: the next plugin starts a
/// few milliseconds after podtap's DEL returns (`at_most` leaves room for
/// a loaded node; past it, the deletion only overlaps the plugin's
/// again), and the kernel announces the pod's veth while it unregisters
/// it, then the deleting plugin waits 10-15 ms more in `netdev_run_todo`
/// (an `rcu_barrier()`). A deletion of ours started in between makes that
/// wait a second barrier long; one started after it costs the plugin
/// nothing. Measured on 6.18 with bridge + host-local: 30 ms after the
/// announcement left the chain's DEL +1.9 ms p50 over the chain alone.
const AFTER_THE_CHAIN: LinkDeletion = LinkDeletion::AfterPodInterfaces {
    at_most: std::time::Duration::from_millis(500),
    settle: std::time::Duration::from_millis(30),
};

/// Detach `id`; a corrupt checkpoint is cleaned up by podtap's markers in
/// `netns`. DEL leaves the links until the chain's next plugin has deleted
/// the pod's veth ([`LinkDeletion::AfterPodInterfaces`]); GC, which no
/// plugin follows, deletes them at once.
fn detach(
    id: &SandboxId,
    state: &StateDir,
    netns: Option<&str>,
    links: LinkDeletion,
) -> Result<(), CniError> {
    let report = podtap::detach::detach_for_teardown(id, state, netns.map(Path::new), links)?;
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
    // What podtap built is checked against the kernel, not against the
    // names the previous plugins gave their entries (Calico names the pod's
    // after the host veth).
    let failed = |why: String| CniError::new(code::PODTAP_BASE + 12, why);
    let state = StateDir::new(conf.state_dir());
    podtap::check::check(&id, &state)?;
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

/// GC removes this network's attachments the runtime no longer lists. With
/// no list at all (libcni sends none when its caller gave none) nothing is
/// known to be stale, so nothing is removed.
fn gc(conf: &NetConf) -> Result<(), CniError> {
    let Some(valid) = conf.valid_attachments() else {
        tracing::info!("GC: no list of valid attachments; removed nothing");
        return Ok(());
    };
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
        match detach(&id, &state, entry.netns.as_deref(), LinkDeletion::Now) {
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
