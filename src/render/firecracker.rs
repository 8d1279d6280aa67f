//! Firecracker: the `network-interfaces` part of a config file.

use serde::Serialize;

use super::nic::{attached_nics, Nic};
use super::RenderError;
use crate::model::Description;

/// One entry of `network-interfaces`; also the body of
/// `PUT /network-interfaces/{iface_id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FirecrackerInterface {
    /// The NIC id, `net{n}`.
    pub iface_id: String,
    /// Name of the TAP Firecracker opens.
    pub host_dev_name: String,
    /// The guest MAC, lower case.
    pub guest_mac: String,
    /// Only Firecracker v1.16 and later know this field; older ones reject
    /// the whole request, so it is emitted only on request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
}

#[derive(Serialize)]
struct FirecrackerConfig {
    #[serde(rename = "network-interfaces")]
    network_interfaces: Vec<FirecrackerInterface>,
}

/// One interface per NIC. Firecracker opens TAPs single-queue, so a TAP with
/// several queues (or the multiqueue flag) is an error.
pub fn firecracker_interfaces(
    desc: &Description,
    with_mtu: bool,
) -> Result<Vec<FirecrackerInterface>, RenderError> {
    attached_nics(desc)?
        .iter()
        .map(|nic| {
            nic.opened_by_name(
                "Firecracker (host_dev_name, opened through /dev/net/tun)",
                "Firecracker cannot use a macvtap: attach with --mode tc or --mode bridge",
            )?;
            check_single_queue(nic)?;
            Ok(FirecrackerInterface {
                iface_id: nic.id.clone(),
                host_dev_name: nic.tap.name.clone(),
                guest_mac: nic.mac.clone(),
                mtu: with_mtu.then_some(nic.interface.mtu),
            })
        })
        .collect()
}

/// `{"network-interfaces": [...]}`, pretty-printed, to merge into a config file.
pub fn firecracker_config(desc: &Description, with_mtu: bool) -> Result<String, RenderError> {
    let config = FirecrackerConfig {
        network_interfaces: firecracker_interfaces(desc, with_mtu)?,
    };
    serde_json::to_string_pretty(&config).map_err(|error| RenderError::Json {
        what: "Firecracker network-interfaces",
        message: error.to_string(),
    })
}

/// Text form: the config fragment without `mtu` (works on every version).
pub(crate) fn render_firecracker(desc: &Description) -> Result<String, RenderError> {
    Ok(firecracker_config(desc, false)? + "\n")
}

fn check_single_queue(nic: &Nic<'_>) -> Result<(), RenderError> {
    if nic.tap.queues == 1 && !nic.tap.multi_queue {
        return Ok(());
    }
    Err(RenderError::FirecrackerMultiQueue {
        interface: nic.interface.name.clone(),
        tap: nic.tap.name.clone(),
        queues: nic.tap.queues,
        multi_queue: nic.tap.multi_queue,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::samples;

    /// Fields Firecracker accepts in a network interface (swagger).
    const ALLOWED: &[&str] = &[
        "iface_id",
        "host_dev_name",
        "guest_mac",
        "mtu",
        "rx_rate_limiter",
        "tx_rate_limiter",
    ];

    fn single_queue_pod() -> Description {
        let mut desc = samples::pod();
        samples::set_queues(&mut desc, "net1", 1);
        desc
    }

    fn interface_keys(text: &str) -> Vec<Vec<String>> {
        let config: serde_json::Value = serde_json::from_str(text).unwrap();
        let top: Vec<&String> = config.as_object().unwrap().keys().collect();
        assert_eq!(top, ["network-interfaces"]);
        config["network-interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| {
                let mut keys: Vec<String> = entry.as_object().unwrap().keys().cloned().collect();
                keys.sort();
                keys
            })
            .collect()
    }

    #[test]
    fn default_output_has_no_mtu_and_only_known_fields() {
        let text = render_firecracker(&single_queue_pod()).unwrap();
        for keys in interface_keys(&text) {
            assert_eq!(keys, ["guest_mac", "host_dev_name", "iface_id"]);
            assert!(keys.iter().all(|k| ALLOWED.contains(&k.as_str())));
        }
    }

    #[test]
    fn entries_name_the_tap_and_guest_mac() {
        let entries = firecracker_interfaces(&single_queue_pod(), false).unwrap();
        assert_eq!(
            entries[0],
            FirecrackerInterface {
                iface_id: "net0".into(),
                host_dev_name: "tap0".into(),
                guest_mac: "0a:58:0a:f4:01:05".into(),
                mtu: None,
            }
        );
        assert_eq!(entries[1].iface_id, "net1");
    }

    #[test]
    fn mtu_only_when_opted_in() {
        let text = firecracker_config(&single_queue_pod(), true).unwrap();
        for keys in interface_keys(&text) {
            assert!(keys.contains(&"mtu".to_string()));
            assert!(keys.iter().all(|k| ALLOWED.contains(&k.as_str())));
        }
        let entries = firecracker_interfaces(&single_queue_pod(), true).unwrap();
        assert_eq!(entries[1].mtu, Some(9000));
    }

    #[test]
    fn multiqueue_taps_are_refused() {
        let error = firecracker_interfaces(&samples::pod(), false).unwrap_err();
        assert!(matches!(
            error,
            RenderError::FirecrackerMultiQueue { queues: 4, .. }
        ));
        assert!(error.to_string().contains("single-queue"), "{error}");
    }
}
