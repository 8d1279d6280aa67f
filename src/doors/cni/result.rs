//! Building the ADD result: the previous result plus the TAP, and reading results back.
//!
//! The previous result is kept as JSON so every field podtap does not know
//! (DNS, routes, 1.1 additions) passes through byte for byte in meaning.

use serde_json::{json, Map, Value};

use super::{code, CniError};

/// The interface entry of a result, as podtap reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultInterface {
    pub name: String,
    pub mac: Option<String>,
    pub sandbox: Option<String>,
}

/// Check the shape podtap relies on: an object whose `interfaces`, if present,
/// is a list of objects with a string `name`.
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
    Ok(())
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

/// What podtap adds to the result for one attached interface.
#[derive(Debug, Clone)]
pub struct TapEntry<'a> {
    pub tap_name: &'a str,
    /// The MAC the guest NIC must use (the pod interface's own).
    pub guest_mac: Option<&'a str>,
    pub sandbox: &'a str,
    /// Pod interface whose MAC changed (bridge mode): name and its MAC now.
    pub pod_mac_now: Option<(&'a str, &'a str)>,
}

/// `prev` with `cniVersion` set and the TAP appended (once) to `interfaces`.
/// IPs, routes and DNS are untouched.
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
    let already = list.iter().any(|i| {
        i.get("name").and_then(Value::as_str) == Some(tap.tap_name)
            && i.get("sandbox").and_then(Value::as_str) == Some(tap.sandbox)
    });
    if !already {
        let mut entry = json!({ "name": tap.tap_name, "sandbox": tap.sandbox });
        if let (Some(mac), Some(o)) = (tap.guest_mac, entry.as_object_mut()) {
            o.insert("mac".into(), Value::String(mac.into()));
        }
        list.push(entry);
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

    #[test]
    fn appends_tap_once_and_keeps_the_rest() {
        let tap = TapEntry {
            tap_name: "tap0",
            guest_mac: Some("02:00:00:00:00:01"),
            sandbox: "/run/netns/p",
            pod_mac_now: None,
        };
        let r = with_tap(&prev(), "1.1.0", &tap);
        assert_eq!(r["cniVersion"], "1.1.0");
        assert_eq!(r["interfaces"].as_array().unwrap().len(), 3);
        assert_eq!(r["interfaces"][2]["name"], "tap0");
        assert_eq!(r["interfaces"][2]["mac"], "02:00:00:00:00:01");
        assert_eq!(r["ips"], prev()["ips"]);
        assert_eq!(r["routes"], prev()["routes"]);
        assert_eq!(r["dns"], prev()["dns"]);
        let again = with_tap(&r, "1.1.0", &tap);
        assert_eq!(again, r);
        assert!(find(&r, "tap0", "/run/netns/p").is_some());
        assert!(find(&r, "cni0", "/run/netns/p").is_none());
    }

    #[test]
    fn bridge_mode_updates_pod_mac() {
        let tap = TapEntry {
            tap_name: "tap0",
            guest_mac: Some("02:00:00:00:00:01"),
            sandbox: "/run/netns/p",
            pod_mac_now: Some(("eth0", "0a:00:00:00:00:09")),
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
}
