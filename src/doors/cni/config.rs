//! The network configuration podtap receives on stdin, and the options it yields.
//!
//! Precedence, lowest first: the plugin's own keys in the conflist, then
//! `args.cni.podtap`, then `CNI_ARGS` (`PODTAP_MODE`, `PODTAP_QUEUES`), then
//! `runtimeConfig.podtap` (the runtime's capability `podtap`), then the pod's
//! `io.podtap.*` annotations, which containerd and CRI-O pass as
//! `runtimeConfig["io.kubernetes.cri.pod-annotations"]` when the plugin
//! declares that capability (the same keys the OCI hook door reads).

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

use super::{code, CniError};
use crate::model::Wiring;
use crate::plan::{check_queues, parse_queues, AttachOptions, TapOwner};
use crate::state::DEFAULT_STATE_DIR;

/// CNI spec versions podtap speaks (it needs a 1.0-format `prevResult`).
pub const SUPPORTED_VERSIONS: &[&str] = &["1.0.0", "1.1.0"];
/// The version podtap answers with when the request names none it supports.
pub const LATEST_VERSION: &str = "1.1.0";

/// The parts of the network configuration podtap reads. Everything else is ignored.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetConf {
    pub cni_version: String,
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
    /// GC (1.1): the attachments the runtime still knows. `null` (what a Go
    /// runtime sends for a nil slice when no pod is left) is an empty list;
    /// the older key `cni.dev/attachments` is accepted too.
    #[serde(
        rename = "cni.dev/valid-attachments",
        alias = "cni.dev/attachments",
        default,
        deserialize_with = "null_is_empty"
    )]
    pub valid_attachments: Option<Vec<ValidAttachment>>,
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
}

impl Overrides {
    fn merge(&mut self, over: Overrides) {
        self.mode = over.mode.or(self.mode.take());
        self.queues = over.queues.or(self.queues);
        self.tap_owner = over.tap_owner.or(self.tap_owner);
        self.tap_group = over.tap_group.or(self.tap_group);
        self.vnet_hdr = over.vnet_hdr.or(self.vnet_hdr);
    }
}

/// Parse stdin. Invalid JSON is error 6; a missing or unsupported `cniVersion` is error 1.
pub fn parse(stdin: &str) -> Result<NetConf, CniError> {
    let value: Value = serde_json::from_str(stdin).map_err(|e| {
        CniError::new(
            code::DECODING_FAILURE,
            "failed to decode network configuration",
        )
        .details(e.to_string())
    })?;
    let version = value.get("cniVersion").and_then(Value::as_str);
    match version {
        None => {
            return Err(CniError::new(
                code::INVALID_CONFIG,
                "network configuration has no cniVersion",
            ))
        }
        Some(v) if !SUPPORTED_VERSIONS.contains(&v) => {
            return Err(CniError::new(
                code::INCOMPATIBLE_VERSION,
                format!("incompatible CNI version {v:?}"),
            )
            .details(format!("podtap supports {}", SUPPORTED_VERSIONS.join(", "))))
        }
        Some(_) => {}
    }
    serde_json::from_value(value).map_err(|e| {
        CniError::new(code::INVALID_CONFIG, "invalid network configuration").details(e.to_string())
    })
}

/// The cniVersion of a request, if it can be read at all (for error replies).
pub fn requested_version(stdin: &str) -> Option<String> {
    let value: Value = serde_json::from_str(stdin).ok()?;
    value.get("cniVersion")?.as_str().map(str::to_string)
}

impl NetConf {
    pub fn state_dir(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR))
    }

    /// The attach options for interface `ifname`, from every source in precedence order.
    pub fn attach_options(&self, ifname: &str, cni_args: &str) -> Result<AttachOptions, CniError> {
        let mut o = self.options.clone();
        if let Some(v) = self
            .args
            .as_ref()
            .and_then(|a| a.get("cni"))
            .and_then(|c| c.get("podtap"))
        {
            o.merge(overrides_from("args.cni.podtap", v)?);
        }
        o.merge(overrides_from_cni_args(cni_args)?);
        if let Some(v) = self.runtime_config.as_ref().and_then(|r| r.get("podtap")) {
            o.merge(overrides_from("runtimeConfig.podtap", v)?);
        }
        // containerd sends `null` for a pod without annotations (a nil Go map).
        if let Some(v) = self
            .runtime_config
            .as_ref()
            .and_then(|r| r.get(POD_ANNOTATIONS))
            .filter(|v| !v.is_null())
        {
            o.merge(overrides_from_annotations(v)?);
        }
        let mode = match o.mode.as_deref() {
            None => Wiring::Tc,
            Some(m) => m
                .parse::<Wiring>()
                .map_err(|e| CniError::new(code::INVALID_CONFIG, e.to_string()))?,
        };
        let queues = check_queues(o.queues.unwrap_or(1))
            .map_err(|why| CniError::new(code::INVALID_CONFIG, format!("queues: {why}")))?;
        Ok(AttachOptions {
            mode,
            queues,
            vnet_hdr: o.vnet_hdr.unwrap_or(true),
            owner: o.tap_owner,
            group: o.tap_group,
            interfaces: Some(vec![ifname.to_string()]),
            dns: None,
        })
    }
}

/// The capability under which containerd and CRI-O pass the pod's annotations.
pub const POD_ANNOTATIONS: &str = "io.kubernetes.cri.pod-annotations";

/// `io.podtap.mode`, `io.podtap.queues` and `io.podtap.tap-owner` from the
/// pod's annotations (others, and `io.podtap.interfaces`, are ignored: the
/// CNI door attaches `CNI_IFNAME`).
fn overrides_from_annotations(v: &Value) -> Result<Overrides, CniError> {
    use crate::doors::oci_hook::annotation;
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
        mode.parse::<crate::model::Wiring>()
            .map_err(|e| bad(annotation::MODE, e.to_string()))?;
        o.mode = Some(mode.to_string());
    }
    if let Some(q) = get(annotation::QUEUES) {
        o.queues = Some(parse_queues(q).map_err(|e| bad(annotation::QUEUES, e))?);
    }
    if let Some(owner) = get(annotation::TAP_OWNER) {
        let owner: TapOwner = owner
            .parse()
            .map_err(|e: crate::error::Error| bad(annotation::TAP_OWNER, e.to_string()))?;
        o.tap_owner = Some(owner.uid);
        o.tap_group = owner.gid;
    }
    Ok(o)
}

fn overrides_from(place: &str, v: &Value) -> Result<Overrides, CniError> {
    serde_json::from_value(v.clone()).map_err(|e| {
        CniError::new(code::INVALID_CONFIG, format!("invalid {place}")).details(e.to_string())
    })
}

/// `CNI_ARGS` is `K=V;K=V`; podtap reads `PODTAP_MODE` and `PODTAP_QUEUES` and ignores the rest.
fn overrides_from_cni_args(cni_args: &str) -> Result<Overrides, CniError> {
    let mut o = Overrides::default();
    for pair in cni_args.split(';').filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(CniError::new(
                code::INVALID_ENV,
                format!("CNI_ARGS: {pair:?} is not KEY=VALUE"),
            ));
        };
        match k {
            "PODTAP_MODE" => o.mode = Some(v.to_string()),
            "PODTAP_QUEUES" => {
                o.queues = Some(v.parse().map_err(|_| {
                    CniError::new(
                        code::INVALID_ENV,
                        format!("CNI_ARGS: PODTAP_QUEUES={v:?} is not a number"),
                    )
                })?)
            }
            _ => {}
        }
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(extra: &str) -> NetConf {
        parse(&format!(
            r#"{{"cniVersion":"1.0.0","name":"n","type":"podtap"{extra}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn defaults() {
        let o = conf("").attach_options("eth0", "").unwrap();
        assert_eq!(o.mode, Wiring::Tc);
        assert_eq!(o.queues, 1);
        assert!(o.vnet_hdr);
        assert_eq!(o.interfaces, Some(vec!["eth0".to_string()]));
        assert_eq!(conf("").state_dir(), PathBuf::from("/run/podtap"));
    }

    #[test]
    fn precedence() {
        let c = conf(
            r#","mode":"tc","queues":2,"tapOwner":1000,
               "args":{"cni":{"podtap":{"mode":"bridge","queues":3}}},
               "runtimeConfig":{"podtap":{"queues":4}}"#,
        );
        let o = c.attach_options("eth0", "").unwrap();
        assert_eq!((o.mode, o.queues, o.owner), (Wiring::Bridge, 4, Some(1000)));
        let o = c
            .attach_options("eth0", "IgnoreUnknown=1;PODTAP_MODE=tc;K8S_POD_NAME=x")
            .unwrap();
        assert_eq!(o.mode, Wiring::Tc);
    }

    #[test]
    fn gc_lists_accept_null_and_the_older_key() {
        let c = conf(r#","cni.dev/valid-attachments":null"#);
        assert_eq!(c.valid_attachments.map(|v| v.len()), Some(0));
        let c = conf(r#","cni.dev/attachments":[{"containerID":"c","ifname":"eth0"}]"#);
        assert_eq!(c.valid_attachments.map(|v| v.len()), Some(1));
        assert!(conf("").valid_attachments.is_none());
    }

    #[test]
    fn pod_annotations_come_last() {
        let c = conf(
            r#","mode":"tc","runtimeConfig":{"podtap":{"queues":2},
               "io.kubernetes.cri.pod-annotations":{"io.podtap.mode":"bridge",
               "io.podtap.tap-owner":"1000:100","other":"x"}}"#,
        );
        let o = c.attach_options("eth0", "").unwrap();
        assert_eq!(o.mode, Wiring::Bridge);
        assert_eq!((o.queues, o.owner, o.group), (2, Some(1000), Some(100)));
        let none =
            conf(r#","mode":"bridge","runtimeConfig":{"io.kubernetes.cri.pod-annotations":null}"#);
        assert_eq!(
            none.attach_options("eth0", "").unwrap().mode,
            Wiring::Bridge
        );
        let bad = conf(
            r#","runtimeConfig":{"io.kubernetes.cri.pod-annotations":{"io.podtap.queues":"0"}}"#,
        );
        assert_eq!(
            bad.attach_options("eth0", "").unwrap_err().code,
            code::INVALID_CONFIG
        );
    }

    #[test]
    fn rejects() {
        assert_eq!(parse("{").unwrap_err().code, code::DECODING_FAILURE);
        assert_eq!(parse("{}").unwrap_err().code, code::INVALID_CONFIG);
        assert_eq!(
            parse(r#"{"cniVersion":"0.4.0"}"#).unwrap_err().code,
            code::INCOMPATIBLE_VERSION
        );
        assert_eq!(
            parse(r#"{"cniVersion":"1.0.0","queues":"x"}"#)
                .unwrap_err()
                .code,
            code::INVALID_CONFIG
        );
        let e = conf(r#","mode":"vepa""#)
            .attach_options("eth0", "")
            .unwrap_err();
        assert_eq!(e.code, code::INVALID_CONFIG);
        assert_eq!(
            conf(r#","queues":0"#)
                .attach_options("eth0", "")
                .unwrap_err()
                .code,
            code::INVALID_CONFIG
        );
        assert_eq!(
            conf("")
                .attach_options("eth0", "PODTAP_QUEUES=many")
                .unwrap_err()
                .code,
            code::INVALID_ENV
        );
    }
}
