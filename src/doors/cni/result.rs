//! Building the ADD result: the previous result plus the TAP, and reading results back.
//!
//! The previous result is kept as JSON so every field podtap does not know
//! (DNS, routes, 1.1 additions) passes through byte for byte in meaning.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{code, CniError};
use crate::model::Dns;

/// The interface entry of a result, as podtap reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultInterface {
    pub name: String,
    pub mac: Option<String>,
    pub sandbox: Option<String>,
}

/// Check the shape podtap relies on: an object whose `interfaces`, if present,
/// is a list of objects with a string `name`, and whose `dns`, if present, is
/// an object of string lists (`nameservers`, `search`, `options`) and a string
/// `domain`.
pub fn validate(prev: &Value) -> Result<(), CniError> {
    let bad = |why: &str| {
        CniError::new(code::INVALID_CONFIG, "invalid prevResult").details(why.to_string())
    };
    let obj = prev
        .as_object()
        .ok_or_else(|| bad("prevResult is not an object"))?;
    match obj.get("interfaces") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for (i, iface) in list.iter().enumerate() {
                if iface.get("name").and_then(Value::as_str).is_none() {
                    return Err(bad(&format!("interfaces[{i}] has no string name")));
                }
            }
        }
        Some(_) => return Err(bad("interfaces is not a list")),
    }
    for key in ["ips", "routes"] {
        if !matches!(
            obj.get(key),
            None | Some(Value::Null) | Some(Value::Array(_))
        ) {
            return Err(bad(&format!("{key} is not a list")));
        }
    }
    dns(prev).map(|_| ())
}

/// The `dns` of a result as the description records it: `None` when absent,
/// `null` or empty. Lenient: unknown keys are ignored and the values are kept
/// as given (not checked as addresses or names); only a wrong JSON type is an
/// error (invalid config, code 7).
pub fn dns(result: &Value) -> Result<Option<Dns>, CniError> {
    let bad = |why: String| CniError::new(code::INVALID_CONFIG, "invalid prevResult").details(why);
    let obj = match result.get("dns") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(obj)) => obj,
        Some(_) => return Err(bad("dns is not an object".into())),
    };
    let list = |key: &str| -> Result<Vec<String>, CniError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad(format!("dns.{key}[{i}] is not a string")))
                })
                .collect(),
            Some(_) => Err(bad(format!("dns.{key} is not a list of strings"))),
        }
    };
    let domain = match obj.get("domain") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) if d.is_empty() => None,
        Some(Value::String(d)) => Some(d.clone()),
        Some(_) => return Err(bad("dns.domain is not a string".into())),
    };
    let dns = Dns {
        nameservers: list("nameservers")?,
        domain,
        search: list("search")?,
        options: list("options")?,
    };
    Ok((!dns.is_empty()).then_some(dns))
}

/// The interfaces of a (validated) result.
pub fn interfaces(result: &Value) -> Vec<ResultInterface> {
    let Some(list) = result.get("interfaces").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|i| {
            let s = |k: &str| i.get(k).and_then(Value::as_str).map(str::to_string);
            Some(ResultInterface {
                name: s("name")?,
                mac: s("mac"),
                sandbox: s("sandbox"),
            })
        })
        .collect()
}

/// The interface named `name` inside `sandbox` (an entry without sandbox is a host interface).
pub fn find(result: &Value, name: &str, sandbox: &str) -> Option<ResultInterface> {
    interfaces(result)
        .into_iter()
        .find(|i| i.name == name && i.sandbox.as_deref() == Some(sandbox))
}

/// How the TAP appears in podtap's CNI result (the `resultTap` config key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResultTap {
    /// Listed with its own hardware address (the spec's meaning of `mac`) and
    /// the pod's sandbox, as the spec words an interface made in a netns.
    Listed,
    /// Left out (the default): readers take every result interface with a
    /// `sandbox` for the pod's own. podman keeps one per network and, on
    /// `network reload`, re-runs the chain with whichever its map yields first
    /// (the TAP's name and MAC half the time); Multus reports each as a pod
    /// network. The TAP is in podtap's description and checkpoint instead.
    #[default]
    Omitted,
    /// As tc-redirect-tap reports it, for firecracker-go-sdk: the TAP, plus
    /// a "VM interface" of the same name in the container-id sandbox that
    /// carries the guest MAC and the pod interface's IPs.
    TcRedirectTap,
}

/// What podtap adds to the result for one attached interface.
#[derive(Debug, Clone)]
pub struct TapEntry<'a> {
    pub tap_name: &'a str,
    /// The TAP's own hardware address.
    pub tap_mac: Option<&'a str>,
    /// The MAC the guest NIC must use (the pod interface's own).
    pub guest_mac: Option<&'a str>,
    pub sandbox: &'a str,
    /// The container id (the tc-redirect-tap style's VM sandbox).
    pub container_id: &'a str,
    /// The pod interface the TAP serves.
    pub pod_ifname: &'a str,
    /// Pod interface whose MAC changed (bridge mode): name and its MAC now.
    pub pod_mac_now: Option<(&'a str, &'a str)>,
    /// How to list the TAP.
    pub style: ResultTap,
}

/// `prev` with `cniVersion` set and the TAP appended (once) to `interfaces`
/// as `tap.style` says. Routes and DNS are untouched; IPs too, except that
/// the tc-redirect-tap style adds the pod interface's IPs for the VM interface.
pub fn with_tap(prev: &Value, version: &str, tap: &TapEntry<'_>) -> Value {
    let mut obj: Map<String, Value> = prev.as_object().cloned().unwrap_or_default();
    obj.insert("cniVersion".into(), Value::String(version.into()));
    let mut list = match obj.remove("interfaces") {
        Some(Value::Array(list)) => list,
        _ => Vec::new(),
    };
    if let Some((pod, mac)) = tap.pod_mac_now {
        for iface in list.iter_mut() {
            let matches = iface.get("name").and_then(Value::as_str) == Some(pod)
                && iface.get("sandbox").and_then(Value::as_str) == Some(tap.sandbox);
            if let (true, Some(o)) = (matches, iface.as_object_mut()) {
                o.insert("mac".into(), Value::String(mac.into()));
            }
        }
    }
    let listed = |list: &[Value], sandbox: &str| {
        list.iter().any(|i| {
            i.get("name").and_then(Value::as_str) == Some(tap.tap_name)
                && i.get("sandbox").and_then(Value::as_str) == Some(sandbox)
        })
    };
    let entry = |sandbox: &str, mac: Option<&str>| {
        let mut e = json!({ "name": tap.tap_name, "sandbox": sandbox });
        if let (Some(mac), Some(o)) = (mac, e.as_object_mut()) {
            o.insert("mac".into(), Value::String(mac.into()));
        }
        e
    };
    if tap.style != ResultTap::Omitted && !listed(&list, tap.sandbox) {
        list.push(entry(tap.sandbox, tap.tap_mac));
    }
    if tap.style == ResultTap::TcRedirectTap && !listed(&list, tap.container_id) {
        let pod_index = list.iter().position(|i| {
            i.get("name").and_then(Value::as_str) == Some(tap.pod_ifname)
                && i.get("sandbox").and_then(Value::as_str) == Some(tap.sandbox)
        });
        list.push(entry(tap.container_id, tap.guest_mac));
        let vm_index = list.len() - 1;
        if let (Some(pod_index), Some(Value::Array(ips))) = (pod_index, obj.get_mut("ips")) {
            let copies: Vec<Value> = ips
                .iter()
                .filter(|ip| ip.get("interface").and_then(Value::as_u64) == Some(pod_index as u64))
                .cloned()
                .map(|mut ip| {
                    if let Some(o) = ip.as_object_mut() {
                        o.insert("interface".into(), json!(vm_index));
                    }
                    ip
                })
                .collect();
            ips.extend(copies);
        }
    }
    obj.insert("interfaces".into(), Value::Array(list));
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prev() -> Value {
        json!({
            "cniVersion": "1.0.0",
            "interfaces": [
                {"name": "cni0", "mac": "aa:aa:aa:aa:aa:aa"},
                {"name": "eth0", "mac": "02:00:00:00:00:01", "sandbox": "/run/netns/p"}
            ],
            "ips": [{"address": "10.1.0.2/24", "gateway": "10.1.0.1", "interface": 1}],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dns": {"nameservers": ["10.1.0.1"]}
        })
    }

    fn entry(style: ResultTap) -> TapEntry<'static> {
        TapEntry {
            tap_name: "tap0",
            tap_mac: Some("7e:00:00:00:00:07"),
            guest_mac: Some("02:00:00:00:00:01"),
            sandbox: "/run/netns/p",
            container_id: "c1",
            pod_ifname: "eth0",
            pod_mac_now: None,
            style,
        }
    }

    #[test]
    fn appends_tap_once_with_its_own_mac_and_keeps_the_rest() {
        let tap = entry(ResultTap::Listed);
        let r = with_tap(&prev(), "1.1.0", &tap);
        assert_eq!(r["cniVersion"], "1.1.0");
        assert_eq!(r["interfaces"].as_array().unwrap().len(), 3);
        assert_eq!(r["interfaces"][2]["name"], "tap0");
        assert_eq!(
            r["interfaces"][2]["mac"], "7e:00:00:00:00:07",
            "the TAP's own MAC"
        );
        assert_eq!(r["ips"], prev()["ips"]);
        assert_eq!(r["routes"], prev()["routes"]);
        assert_eq!(r["dns"], prev()["dns"]);
        let again = with_tap(&r, "1.1.0", &tap);
        assert_eq!(again, r);
        assert!(find(&r, "tap0", "/run/netns/p").is_some());
        assert!(find(&r, "cni0", "/run/netns/p").is_none());
    }

    #[test]
    fn omitted_and_tc_redirect_tap_styles() {
        let r = with_tap(&prev(), "1.1.0", &entry(ResultTap::Omitted));
        assert_eq!(
            r["interfaces"],
            prev()["interfaces"],
            "Multus sees no extra network"
        );
        let r = with_tap(&prev(), "1.1.0", &entry(ResultTap::TcRedirectTap));
        let list = r["interfaces"].as_array().unwrap();
        assert_eq!(list.len(), 4);
        assert_eq!(list[2]["sandbox"], "/run/netns/p");
        assert_eq!(list[2]["mac"], "7e:00:00:00:00:07");
        assert_eq!(list[3]["name"], "tap0");
        assert_eq!(
            list[3]["sandbox"], "c1",
            "the VM interface lives in the container-id sandbox"
        );
        assert_eq!(list[3]["mac"], "02:00:00:00:00:01");
        let ips = r["ips"].as_array().unwrap();
        assert_eq!(ips.len(), 2);
        assert_eq!(ips[1]["interface"], 3);
        assert_eq!(ips[1]["address"], "10.1.0.2/24");
        assert_eq!(with_tap(&r, "1.1.0", &entry(ResultTap::TcRedirectTap)), r);
    }

    #[test]
    fn bridge_mode_updates_pod_mac() {
        let tap = TapEntry {
            pod_mac_now: Some(("eth0", "0a:00:00:00:00:09")),
            ..entry(ResultTap::Listed)
        };
        let r = with_tap(&prev(), "1.0.0", &tap);
        assert_eq!(r["interfaces"][1]["mac"], "0a:00:00:00:00:09");
        assert_eq!(r["interfaces"][0]["mac"], "aa:aa:aa:aa:aa:aa");
    }

    #[test]
    fn validates_shape() {
        assert!(validate(&prev()).is_ok());
        assert!(validate(&json!({})).is_ok());
        assert!(validate(&json!([])).is_err());
        assert!(validate(&json!({"interfaces": {}})).is_err());
        assert!(validate(&json!({"interfaces": [{"mac": "x"}]})).is_err());
        assert!(validate(&json!({"ips": 3})).is_err());
    }

    #[test]
    fn dns_is_read_leniently() {
        assert_eq!(
            dns(&prev()).unwrap(),
            Some(Dns {
                nameservers: vec!["10.1.0.1".into()],
                ..Dns::default()
            })
        );
        let full = json!({"dns": {
            "nameservers": ["10.1.0.1", "fd00::53"],
            "domain": "pod.example",
            "search": ["ns.svc.cluster.local", "svc.cluster.local"],
            "options": ["ndots:5"],
            "unknown": 1
        }});
        let d = dns(&full).unwrap().unwrap();
        assert_eq!(d.nameservers, ["10.1.0.1", "fd00::53"]);
        assert_eq!(d.domain.as_deref(), Some("pod.example"));
        assert_eq!(d.search, ["ns.svc.cluster.local", "svc.cluster.local"]);
        assert_eq!(d.options, ["ndots:5"]);
        for nothing in [
            json!({}),
            json!({"dns": null}),
            json!({"dns": {}}),
            json!({"dns": {"nameservers": [], "domain": "", "search": null}}),
        ] {
            assert_eq!(dns(&nothing).unwrap(), None, "{nothing}");
            assert!(validate(&nothing).is_ok(), "{nothing}");
        }
        for bad in [
            json!({"dns": []}),
            json!({"dns": "10.1.0.1"}),
            json!({"dns": {"nameservers": "10.1.0.1"}}),
            json!({"dns": {"nameservers": [53]}}),
            json!({"dns": {"search": [null]}}),
            json!({"dns": {"options": {}}}),
            json!({"dns": {"domain": 1}}),
        ] {
            let e = validate(&bad).unwrap_err();
            assert_eq!(e.code, code::INVALID_CONFIG, "{bad}");
            assert!(e.details.contains("dns"), "{bad}");
        }
    }
}
