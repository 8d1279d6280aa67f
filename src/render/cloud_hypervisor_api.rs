//! Cloud Hypervisor REST API: `NetConfig` bodies for `PUT /api/v1/vm.add-net`.

use serde::Serialize;

use super::cloud_hypervisor::check_cloud_hypervisor_nic;
use super::nic::attached_nics;
use super::RenderError;
use crate::model::Description;

/// The subset of Cloud Hypervisor's `NetConfig` podtap fills in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CloudHypervisorNetConfig {
    /// Name of the TAP Cloud Hypervisor opens.
    pub tap: String,
    /// The guest MAC, lower case.
    pub mac: String,
    /// The pod interface's MTU in bytes.
    pub mtu: u32,
    /// rx + tx queues: twice the TAP's queue count.
    pub num_queues: u32,
    /// The NIC id, `net{n}`.
    pub id: String,
}

/// One `NetConfig` per NIC, by TAP name, checked like `--net`.
pub fn cloud_hypervisor_net_configs(
    desc: &Description,
) -> Result<Vec<CloudHypervisorNetConfig>, RenderError> {
    attached_nics(desc)?
        .iter()
        .map(|nic| {
            nic.opened_by_name(
                "a Cloud Hypervisor NetConfig with tap=",
                "open the macvtap's device node (tap.device) once per queue and send the fds with the request",
            )?;
            check_cloud_hypervisor_nic(nic)?;
            Ok(CloudHypervisorNetConfig {
                tap: nic.tap.name.clone(),
                mac: nic.mac.clone(),
                mtu: nic.interface.mtu,
                num_queues: 2 * nic.tap.queues,
                id: nic.id.clone(),
            })
        })
        .collect()
}

/// Text form: one compact JSON body per line, ready for one request each.
pub(crate) fn render_cloud_hypervisor_api(desc: &Description) -> Result<String, RenderError> {
    let mut text = String::new();
    for config in cloud_hypervisor_net_configs(desc)? {
        let body = serde_json::to_string(&config).map_err(|error| RenderError::Json {
            what: "Cloud Hypervisor NetConfig",
            message: error.to_string(),
        })?;
        text.push_str(&body);
        text.push('\n');
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::samples;

    /// Fields of NetConfig in Cloud Hypervisor's OpenAPI description.
    const NET_CONFIG_FIELDS: &[&str] = &[
        "tap",
        "ip",
        "mask",
        "mac",
        "host_mac",
        "mtu",
        "iommu",
        "num_queues",
        "queue_size",
        "id",
        "vhost_user",
        "vhost_socket",
        "vhost_mode",
        "pci_segment",
        "rate_limiter_config",
        "offload_tso",
        "offload_ufo",
        "offload_csum",
    ];

    #[test]
    fn one_json_body_per_line() {
        let text = render_cloud_hypervisor_api(&samples::pod()).unwrap();
        assert_eq!(
            text,
            "{\"tap\":\"tap0\",\"mac\":\"0a:58:0a:f4:01:05\",\"mtu\":1400,\"num_queues\":2,\"id\":\"net0\"}\n\
             {\"tap\":\"tap1\",\"mac\":\"52:54:00:12:34:04\",\"mtu\":9000,\"num_queues\":8,\"id\":\"net1\"}\n"
        );
    }

    #[test]
    fn only_net_config_fields_are_used() {
        let text = render_cloud_hypervisor_api(&samples::pod()).unwrap();
        for line in text.lines() {
            let body: serde_json::Value = serde_json::from_str(line).unwrap();
            for key in body.as_object().unwrap().keys() {
                assert!(NET_CONFIG_FIELDS.contains(&key.as_str()), "{key}");
            }
        }
    }

    #[test]
    fn cloud_hypervisor_rules_apply() {
        let mut desc = samples::pod();
        samples::interface_mut(&mut desc, "net1").mtu = 1000;
        assert!(matches!(
            cloud_hypervisor_net_configs(&desc),
            Err(RenderError::MtuBelowCloudHypervisorMinimum { mtu: 1000, .. })
        ));
    }
}
