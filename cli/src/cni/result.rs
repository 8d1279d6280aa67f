//! Building the ADD result: the previous result plus the TAP, and reading results back.
//!
//! The previous result is kept as JSON so every field podtap does not know
//! (DNS, routes, 1.1 additions) passes through byte for byte in meaning.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::version::CniVersion;
use super::{code, CniError};
use podtap::model::Dns;

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

/// One address the tc-redirect-tap style gives the VM interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmIp {
    /// `address/prefix`, as the pod interface carries it.
    pub address: String,
    pub gateway: Option<String>,
}

/// What podtap adds to the result for one attached interface.
#[derive(Debug, Clone)]
pub struct TapEntry<'a> {
    pub tap_name: &'a str,
    /// The TAP's own hardware address.
    pub tap_mac: Option<&'a str>,
    /// The MAC the guest NIC must use (the pod interface's own, before
    /// bridge mode gave the pod interface a new one).
    pub guest_mac: Option<&'a str>,
    pub sandbox: &'a str,
    /// The container id (the tc-redirect-tap style's VM sandbox).
    pub container_id: &'a str,
    /// The pod interface the TAP serves.
    pub pod_ifname: &'a str,
    /// The pod interface's MAC now, when bridge mode changed it.
    pub pod_mac_now: Option<&'a str>,
    /// The pod interface's addresses (from the scan) for the VM interface.
    pub vm_ips: Vec<VmIp>,
    /// How to list the TAP.
    pub style: ResultTap,
}

/// `prev` (of any supported version) in `version`'s format with the TAP
/// appended (once) to `interfaces` as `tap.style` says. Routes and DNS are
/// untouched; IPs too, except that the tc-redirect-tap style adds the pod
/// interface's addresses for the VM interface.
pub fn with_tap(prev: &Value, version: CniVersion, tap: &TapEntry<'_>) -> Value {
    let mut obj: Map<String, Value> = prev.as_object().cloned().unwrap_or_default();
    let mut list = match obj.remove("interfaces") {
        Some(Value::Array(list)) => list,
        _ => Vec::new(),
    };
    if let Some(mac) = tap.pod_mac_now {
        for iface in list.iter_mut() {
            if lists_pod_interface(iface, tap) {
                if let Some(o) = iface.as_object_mut() {
                    o.insert("mac".into(), Value::String(mac.into()));
                }
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
        list.push(entry(tap.container_id, tap.guest_mac));
        let vm_index = list.len() - 1;
        let ips = obj.entry("ips").or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(ips) = ips {
            ips.extend(tap.vm_ips.iter().map(|ip| {
                let mut e = json!({ "address": ip.address, "interface": vm_index });
                if let (Some(gw), Some(o)) = (&ip.gateway, e.as_object_mut()) {
                    o.insert("gateway".into(), Value::String(gw.clone()));
                }
                e
            }));
        }
    }
    obj.insert("interfaces".into(), Value::Array(list));
    in_version(Value::Object(obj), version)
}

/// Whether result entry `iface` is the pod interface `tap` serves: named
/// so, or (Calico names its entry after the host veth) in the pod's sandbox
/// with the pod interface's MAC from before bridge mode changed it.
fn lists_pod_interface(iface: &Value, tap: &TapEntry<'_>) -> bool {
    let s = |k: &str| iface.get(k).and_then(Value::as_str);
    if s("sandbox") != Some(tap.sandbox) {
        return false;
    }
    let same_mac = match (s("mac"), tap.guest_mac) {
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
        _ => false,
    };
    s("name") == Some(tap.pod_ifname) || same_mac
}

/// `result` written in `version`'s format, as libcni's conversion writes it:
/// `ips[].version` (`"4"` or `"6"`) before 1.0.0, none from 1.0.0 on.
pub fn in_version(result: Value, version: CniVersion) -> Value {
    let Value::Object(mut obj) = result else {
        return result;
    };
    obj.insert("cniVersion".into(), Value::String(version.as_str().into()));
    if let Some(Value::Array(ips)) = obj.get_mut("ips") {
        for ip in ips.iter_mut().filter_map(Value::as_object_mut) {
            if !version.ips_carry_version() {
                ip.remove("version");
                continue;
            }
            let v6 = ip
                .get("address")
                .and_then(Value::as_str)
                .is_some_and(|a| a.contains(':'));
            ip.insert("version".into(), json!(if v6 { "6" } else { "4" }));
        }
    }
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
            vm_ips: vec![VmIp {
                address: "10.1.0.2/24".into(),
                gateway: Some("10.1.0.1".into()),
            }],
            style,
        }
    }

    #[test]
    fn appends_tap_once_with_its_own_mac_and_keeps_the_rest() {
        let tap = entry(ResultTap::Listed);
        let r = with_tap(&prev(), CniVersion::V1_1_0, &tap);
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
        let again = with_tap(&r, CniVersion::V1_1_0, &tap);
        assert_eq!(again, r);
        assert!(find(&r, "tap0", "/run/netns/p").is_some());
        assert!(find(&r, "cni0", "/run/netns/p").is_none());
    }

    #[test]
    fn omitted_and_tc_redirect_tap_styles() {
        let r = with_tap(&prev(), CniVersion::V1_1_0, &entry(ResultTap::Omitted));
        assert_eq!(
            r["interfaces"],
            prev()["interfaces"],
            "Multus sees no extra network"
        );
        let r = with_tap(
            &prev(),
            CniVersion::V1_1_0,
            &entry(ResultTap::TcRedirectTap),
        );
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
        assert_eq!(ips[1]["gateway"], "10.1.0.1");
        assert_eq!(
            with_tap(&r, CniVersion::V1_1_0, &entry(ResultTap::TcRedirectTap)),
            r
        );
    }

    #[test]
    fn bridge_mode_updates_pod_mac() {
        let tap = TapEntry {
            pod_mac_now: Some("0a:00:00:00:00:09"),
            ..entry(ResultTap::Listed)
        };
        let r = with_tap(&prev(), CniVersion::V1_0_0, &tap);
        assert_eq!(r["interfaces"][1]["mac"], "0a:00:00:00:00:09");
        assert_eq!(r["interfaces"][0]["mac"], "aa:aa:aa:aa:aa:aa");
    }

    /// Calico's result (cni-plugin/pkg/k8s/k8s.go): one entry named after
    /// the host veth with the pod's MAC and sandbox, a /32 with no gateway
    /// and no `interface` index, at 0.3.1.
    fn calico_prev() -> Value {
        json!({
            "cniVersion": "0.3.1",
            "interfaces": [{"name": "cali12345678901", "mac": "02:00:00:00:00:01",
                            "sandbox": "/run/netns/p"}],
            "ips": [{"version": "4", "address": "198.18.5.7/32"}],
            "dns": {}
        })
    }

    #[test]
    fn calico_shaped_results_get_the_new_pod_mac_and_vm_addresses() {
        let tap = TapEntry {
            pod_mac_now: Some("0a:00:00:00:00:09"),
            vm_ips: vec![VmIp {
                address: "198.18.5.7/32".into(),
                gateway: Some("169.254.1.1".into()),
            }],
            ..entry(ResultTap::TcRedirectTap)
        };
        let r = with_tap(&calico_prev(), CniVersion::V0_3_1, &tap);
        assert_eq!(r["cniVersion"], "0.3.1");
        assert_eq!(r["interfaces"][0]["mac"], "0a:00:00:00:00:09");
        assert_eq!(r["interfaces"][2]["sandbox"], "c1");
        let ips = r["ips"].as_array().unwrap();
        assert_eq!(ips.len(), 2);
        assert_eq!(ips[0], calico_prev()["ips"][0], "Calico's own IP as it was");
        assert_eq!(
            ips[1],
            json!({"version": "4", "address": "198.18.5.7/32",
                   "gateway": "169.254.1.1", "interface": 2})
        );
    }

    #[test]
    fn results_are_written_in_the_conf_version() {
        let v1 = json!({"cniVersion": "1.0.0",
            "ips": [{"address": "198.18.0.2/24"}, {"address": "2001:db8::2/64"}]});
        let old = in_version(v1.clone(), CniVersion::V0_3_0);
        assert_eq!(old["cniVersion"], "0.3.0");
        assert_eq!(old["ips"][0]["version"], "4");
        assert_eq!(old["ips"][1]["version"], "6");
        let back = in_version(old, CniVersion::V1_0_0);
        assert_eq!(back, v1, "1.0.0 has no ips[].version");
        let none = in_version(json!({"cniVersion": "1.1.0"}), CniVersion::V0_4_0);
        assert_eq!(none, json!({"cniVersion": "0.4.0"}));
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
