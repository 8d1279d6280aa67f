//! The network configuration podtap receives on stdin, and the options it yields.
//!
//! Precedence, lowest first: the plugin's own keys in the conflist, then
//! `CNI_ARGS` (`PODTAP_*`, and tc-redirect-tap's `TC_REDIRECT_TAP_NAME`,
//! `_UID` and `_GID`), then `args.cni.podtap` (the CNI conventions let
//! `args` win over `CNI_ARGS`), then `runtimeConfig.podtap` (the runtime's
//! capability `podtap`), then the pod's `io.podtap.*` annotations, which
//! containerd and CRI-O pass as
//! `runtimeConfig["io.kubernetes.cri.pod-annotations"]` when the plugin
//! declares that capability (the same keys the OCI hook door reads).
//!
//! The first two are the node's: the conflist is the admin's, and
//! `CNI_ARGS` is what the runtime writes (Kubernetes runtimes put only
//! `K8S_POD_*` keys there, whose values are DNS names; firecracker-containerd
//! its jailer's uid). The rest a pod can reach (Multus passes a pod's
//! `cni-args` as `args.cni`), so what they ask for passes the node's pod
//! policy first.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

use super::version::CniVersion;
use super::{code, CniError};
use crate::nic_spec::parse_queues;
use crate::pod_policy::{NodeSettings, PodAsk, PodPolicy, Refused};
use podtap::attach::{AttachOptions, NicOptions, TapOwner};
use podtap::model::Wiring;
use podtap::state::DEFAULT_STATE_DIR;
use podtap::MacAddr;

/// The parts of the network configuration podtap reads. Everything else is ignored.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetConf {
    #[serde(deserialize_with = "supported_version")]
    pub cni_version: CniVersion,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub prev_result: Option<Value>,
    #[serde(default)]
    pub runtime_config: Option<Value>,
    #[serde(default)]
    pub args: Option<Value>,
    #[serde(flatten)]
    pub options: Overrides,
    /// Where checkpoints live; `/run/podtap` when absent.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    /// How the TAP appears in the result: `listed` (default), `omitted`, `tc-redirect-tap`.
    #[serde(default)]
    pub result_tap: super::result::ResultTap,
    /// What a pod may ask for beyond the keys above (`docs/integration.md`, "Pod policy").
    #[serde(default, deserialize_with = "policy_object")]
    pub pod_policy: PodPolicy,
    /// GC (1.1): the attachments the runtime still knows. `null` (what a Go
    /// runtime sends for a nil slice when no pod is left) is an empty list.
    #[serde(
        rename = "cni.dev/valid-attachments",
        default,
        deserialize_with = "null_is_empty"
    )]
    valid_attachments: Option<Vec<ValidAttachment>>,
    /// The same list under its older key: libcni 1.2.3 and later send both.
    #[serde(
        rename = "cni.dev/attachments",
        default,
        deserialize_with = "null_is_empty"
    )]
    attachments: Option<Vec<ValidAttachment>>,
}

/// A `cniVersion` that [`parse`] has already checked.
fn supported_version<'de, D: serde::Deserializer<'de>>(d: D) -> Result<CniVersion, D::Error> {
    use serde::de::Error as _;
    let text = String::deserialize(d)?;
    CniVersion::parse(&text).ok_or_else(|| D::Error::custom(format!("cniVersion {text:?}")))
}

/// `podPolicy` is an object (serde would also take a positional list).
fn policy_object<'de, D: serde::Deserializer<'de>>(d: D) -> Result<PodPolicy, D::Error> {
    use serde::de::Error as _;
    let v = Value::deserialize(d)?;
    if !v.is_object() {
        return Err(D::Error::custom("podPolicy is not an object"));
    }
    serde_json::from_value(v).map_err(D::Error::custom)
}

/// A present key is a list, even when its value is `null`.
fn null_is_empty<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<ValidAttachment>>, D::Error> {
    Ok(Some(
        Option::<Vec<ValidAttachment>>::deserialize(d)?.unwrap_or_default(),
    ))
}

/// One entry of `cni.dev/valid-attachments`.
#[derive(Debug, Clone, Deserialize)]
pub struct ValidAttachment {
    #[serde(rename = "containerID")]
    pub container_id: String,
    pub ifname: String,
}

/// The option keys, in any of the places that may set them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Overrides {
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub queues: Option<u32>,
    #[serde(default)]
    pub tap_owner: Option<u32>,
    #[serde(default)]
    pub tap_group: Option<u32>,
    #[serde(default)]
    pub vnet_hdr: Option<bool>,
    /// The TAP's name (KubeVirt's tap binding wants `tap0`).
    #[serde(default)]
    pub tap_name: Option<String>,
    /// The guest NIC's MAC, instead of the pod interface's own.
    #[serde(default)]
    pub guest_mac: Option<String>,
    /// Serve the guest its configuration (DHCP, router advertisements).
    #[serde(default)]
    pub serve: Option<bool>,
}

impl Overrides {
    fn merge(&mut self, over: Overrides) {
        self.mode = over.mode.or(self.mode.take());
        self.queues = over.queues.or(self.queues);
        self.tap_owner = over.tap_owner.or(self.tap_owner);
        self.tap_group = over.tap_group.or(self.tap_group);
        self.vnet_hdr = over.vnet_hdr.or(self.vnet_hdr);
        self.tap_name = over.tap_name.or(self.tap_name.take());
        self.guest_mac = over.guest_mac.or(self.guest_mac.take());
        self.serve = over.serve.or(self.serve);
    }

    /// The guest MAC asked for, parsed (error 7 naming `place`).
    fn mac(&self, place: &str) -> Result<Option<MacAddr>, CniError> {
        self.guest_mac
            .as_deref()
            .map(|m| {
                m.parse().map_err(|e| {
                    CniError::new(code::INVALID_CONFIG, format!("{place}: guestMac: {e}"))
                })
            })
            .transpose()
    }
}

/// Parse stdin. Invalid JSON is error 6; a missing `cniVersion` error 7, an
/// unsupported one error 1.
pub fn parse(stdin: &str) -> Result<NetConf, CniError> {
    let value = decode(stdin)?;
    let version = value.get("cniVersion").and_then(Value::as_str);
    match version {
        None => {
            return Err(CniError::new(
                code::INVALID_CONFIG,
                "network configuration has no cniVersion",
            ))
        }
        Some(v) if CniVersion::parse(v).is_none() => {
            return Err(CniError::new(
                code::INCOMPATIBLE_VERSION,
                format!("incompatible CNI version {v:?}"),
            )
            .details(format!(
                "podtap supports {}",
                CniVersion::names().join(", ")
            )))
        }
        Some(_) => {}
    }
    serde_json::from_value(value).map_err(|e| {
        CniError::new(code::INVALID_CONFIG, "invalid network configuration").details(e.to_string())
    })
}

fn decode(stdin: &str) -> Result<Value, CniError> {
    serde_json::from_str(stdin).map_err(|e| {
        CniError::new(
            code::DECODING_FAILURE,
            "failed to decode network configuration",
        )
        .details(e.to_string())
    })
}

/// What DEL reads of the configuration: the network's name and podtap's
/// state directory. DEL runs with whatever conflist the node has now, of any
/// version and with any (or no) `prevResult`; a failing DEL would stop the
/// chain's reverse walk before the IPAM plugin releases the pod's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeardownConf {
    pub name: String,
    state_dir: Option<PathBuf>,
}

impl TeardownConf {
    pub fn state_dir(&self) -> PathBuf {
        state_dir_or_default(self.state_dir.as_ref())
    }
}

/// Parse stdin for DEL. Only JSON that is no object, or a `stateDir` that
/// is no string (the node admin's mistake, which would point DEL at the
/// wrong checkpoints), is refused.
pub fn parse_teardown(stdin: &str) -> Result<TeardownConf, CniError> {
    let value = decode(stdin)?;
    let obj = value.as_object().ok_or_else(|| {
        CniError::new(
            code::INVALID_CONFIG,
            "network configuration is not an object",
        )
    })?;
    let state_dir = match obj.get("stateDir") {
        None | Some(Value::Null) => None,
        Some(Value::String(dir)) => Some(PathBuf::from(dir)),
        Some(_) => {
            return Err(CniError::new(
                code::INVALID_CONFIG,
                "invalid network configuration: stateDir is not a string",
            ))
        }
    };
    let name = obj.get("name").and_then(Value::as_str).unwrap_or_default();
    Ok(TeardownConf {
        name: name.to_string(),
        state_dir,
    })
}

/// The cniVersion of a request, if it can be read at all (for error replies).
pub fn requested_version(stdin: &str) -> Option<String> {
    let value: Value = serde_json::from_str(stdin).ok()?;
    value.get("cniVersion")?.as_str().map(str::to_string)
}

fn state_dir_or_default(dir: Option<&PathBuf>) -> PathBuf {
    dir.cloned()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR))
}

impl NetConf {
    pub fn state_dir(&self) -> PathBuf {
        state_dir_or_default(self.state_dir.as_ref())
    }

    /// The node's mode: the plugin's own `mode` key, tc when it has none.
    pub fn node_mode(&self) -> Result<Wiring, CniError> {
        Ok(parse_mode(self.options.mode.as_deref())?.unwrap_or(Wiring::Tc))
    }

    /// GC's list of attachments still in use, from either key; `None` when
    /// the runtime sent neither (then nothing is known to be stale).
    pub fn valid_attachments(&self) -> Option<&[ValidAttachment]> {
        self.valid_attachments
            .as_deref()
            .or(self.attachments.as_deref())
    }

    /// The attach options for interface `ifname`, from every source in
    /// precedence order. What a pod can reach (every source after
    /// `CNI_ARGS`) must pass the node's pod policy.
    pub fn attach_options(&self, ifname: &str, cni_args: &str) -> Result<AttachOptions, CniError> {
        let mut o = self.options.clone();
        o.merge(overrides_from_cni_args(cni_args)?);
        let node = NodeSettings {
            mode: parse_mode(o.mode.as_deref())?.unwrap_or(Wiring::Tc),
            queues: o.queues.unwrap_or(1),
            owner: o.tap_owner,
            group: o.tap_group,
            serve: o.serve.unwrap_or(false),
        };
        for (place, over) in self.pod_sources(ifname)? {
            let nic = NicOptions {
                interface: ifname.to_string(),
                tap_name: over.tap_name.clone(),
                guest_mac: over.mac(place)?,
                ..NicOptions::default()
            };
            let ask = PodAsk {
                mode: parse_mode(over.mode.as_deref())?,
                queues: over.queues,
                owner: over.tap_owner,
                group: over.tap_group,
                serve: over.serve,
                nics: vec![nic],
            };
            self.pod_policy
                .admit(&node, &ask)
                .map_err(|refused| policy_refusal(place, &refused))?;
            o.merge(over);
        }
        let queues = o.queues.unwrap_or(1);
        if !(1..=podtap::attach::MAX_QUEUES).contains(&queues) {
            let why = format!(
                "queues: {queues} queues: must be 1..={}",
                podtap::attach::MAX_QUEUES
            );
            return Err(CniError::new(code::INVALID_CONFIG, why));
        }
        let nic = NicOptions {
            interface: ifname.to_string(),
            tap_name: o.tap_name.clone(),
            guest_mac: o.mac("the configuration")?,
            ..NicOptions::default()
        };
        let chosen = nic.tap_name.is_some() || nic.guest_mac.is_some();
        Ok(AttachOptions {
            mode: parse_mode(o.mode.as_deref())?.unwrap_or(Wiring::Tc),
            queues,
            vnet_hdr: o.vnet_hdr.unwrap_or(true),
            owner: o.tap_owner,
            group: o.tap_group,
            interfaces: Some(vec![ifname.to_string()]),
            nics: if chosen { vec![nic] } else { Vec::new() },
            serve: o.serve.unwrap_or(false),
            ..AttachOptions::default()
        })
    }

    /// The places the pod controls, in precedence order, with what each sets.
    fn pod_sources(&self, ifname: &str) -> Result<Vec<(&'static str, Overrides)>, CniError> {
        // CONVENTIONS.md: `args` in the configuration wins over `CNI_ARGS`.
        let mut sources = Vec::new();
        if let Some(v) = self
            .args
            .as_ref()
            .and_then(|a| a.get("cni"))
            .and_then(|c| c.get("podtap"))
        {
            sources.push(("args.cni.podtap", overrides_from("args.cni.podtap", v)?));
        }
        if let Some(v) = self.runtime_config.as_ref().and_then(|r| r.get("podtap")) {
            sources.push((
                "runtimeConfig.podtap",
                overrides_from("runtimeConfig.podtap", v)?,
            ));
        }
        // containerd sends `null` for a pod without annotations (a nil Go map).
        if let Some(v) = self
            .runtime_config
            .as_ref()
            .and_then(|r| r.get(POD_ANNOTATIONS))
            .filter(|v| !v.is_null())
        {
            sources.push((
                "the pod's annotations",
                overrides_from_annotations(v, ifname)?,
            ));
        }
        Ok(sources)
    }
}

/// A mode name, if any, as a [`Wiring`] (error 7 if unknown).
fn parse_mode(mode: Option<&str>) -> Result<Option<Wiring>, CniError> {
    mode.map(|m| {
        m.parse::<Wiring>()
            .map_err(|e| CniError::new(code::INVALID_CONFIG, e.to_string()))
    })
    .transpose()
}

/// The error for a pod's ask the node does not allow: podtap's exit code 6
/// (permission denied), so CNI code 106.
fn policy_refusal(place: &str, refused: &Refused) -> CniError {
    let (key, _) = refused.keys();
    CniError::from(crate::error::Error::NotAllowed(format!(
        "{place} asks for {}, which this node's pod policy does not allow \
         (podPolicy.{key} in podtap's entry of the conflist)",
        refused.asked()
    )))
}

/// The capability under which containerd and CRI-O pass the pod's annotations.
pub const POD_ANNOTATIONS: &str = "io.kubernetes.cri.pod-annotations";

/// `io.podtap.mode`, `io.podtap.queues`, `io.podtap.tap-owner`,
/// `io.podtap.serve` and `io.podtap.nic.<ifname>` from the pod's annotations (others, and
/// `io.podtap.interfaces`, are ignored: the CNI door attaches `CNI_IFNAME`).
fn overrides_from_annotations(v: &Value, ifname: &str) -> Result<Overrides, CniError> {
    use crate::hook_state::annotation;
    let bad = |key: &str, why: String| {
        CniError::new(code::INVALID_CONFIG, format!("pod annotation {key}: {why}"))
    };
    let map = v.as_object().ok_or_else(|| {
        CniError::new(
            code::INVALID_CONFIG,
            format!("runtimeConfig.{POD_ANNOTATIONS} is not an object"),
        )
    })?;
    let get = |key: &str| map.get(key).and_then(Value::as_str);
    let mut o = Overrides::default();
    if let Some(mode) = get(annotation::MODE) {
        mode.parse::<podtap::model::Wiring>()
            .map_err(|e| bad(annotation::MODE, e.to_string()))?;
        o.mode = Some(mode.to_string());
    }
    if let Some(q) = get(annotation::QUEUES) {
        o.queues = Some(parse_queues(q).map_err(|e| bad(annotation::QUEUES, e))?);
    }
    if let Some(owner) = get(annotation::TAP_OWNER) {
        let owner: TapOwner = owner
            .parse()
            .map_err(|e: podtap::error::Error| bad(annotation::TAP_OWNER, e.to_string()))?;
        o.tap_owner = Some(owner.uid);
        o.tap_group = owner.gid;
    }
    if let Some(serve) = get(annotation::SERVE) {
        o.serve =
            Some(crate::nic_spec::parse_yes_no(serve).map_err(|e| bad(annotation::SERVE, e))?);
    }
    let key = format!("{}{ifname}", annotation::NIC_PREFIX);
    if let Some(spec) = get(&key) {
        let nic = crate::nic_spec::parse(ifname, spec).map_err(|why| bad(&key, why))?;
        o.serve = nic.serve.or(o.serve);
        o.tap_name = nic.tap_name;
        o.guest_mac = nic.guest_mac.map(|m| m.to_string());
        o.queues = nic.queues.or(o.queues);
        if let Some(owner) = nic.owner {
            o.tap_owner = Some(owner.uid);
            o.tap_group = owner.gid;
        }
    }
    Ok(o)
}

fn overrides_from(place: &str, v: &Value) -> Result<Overrides, CniError> {
    serde_json::from_value(v.clone()).map_err(|e| {
        CniError::new(code::INVALID_CONFIG, format!("invalid {place}")).details(e.to_string())
    })
}

/// `CNI_ARGS` is `K=V;K=V`; podtap reads `PODTAP_MODE`, `PODTAP_QUEUES`,
/// `PODTAP_TAP_NAME`, `PODTAP_GUEST_MAC` and, as tc-redirect-tap reads
/// them, `TC_REDIRECT_TAP_NAME`, `TC_REDIRECT_TAP_UID` and
/// `TC_REDIRECT_TAP_GID` (whole numbers), and ignores the rest.
fn overrides_from_cni_args(cni_args: &str) -> Result<Overrides, CniError> {
    let mut o = Overrides::default();
    for pair in cni_args.split(';').filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(CniError::new(
                code::INVALID_ENV,
                format!("CNI_ARGS: {pair:?} is not KEY=VALUE"),
            ));
        };
        let number = || {
            v.parse::<u32>()
                .ok()
                .filter(|n| *n != u32::MAX)
                .ok_or_else(|| {
                    CniError::new(
                        code::INVALID_ENV,
                        format!("CNI_ARGS: {k}={v:?} is not a number"),
                    )
                })
        };
        match k {
            "PODTAP_MODE" => o.mode = Some(v.to_string()),
            "PODTAP_QUEUES" => o.queues = Some(number()?),
            "PODTAP_TAP_NAME" | "TC_REDIRECT_TAP_NAME" => o.tap_name = Some(v.to_string()),
            "PODTAP_GUEST_MAC" => o.guest_mac = Some(v.to_string()),
            "TC_REDIRECT_TAP_UID" => o.tap_owner = Some(number()?),
            "TC_REDIRECT_TAP_GID" => o.tap_group = Some(number()?),
            _ => {}
        }
    }
    Ok(o)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
