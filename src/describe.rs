//! Describe: the scanned description plus what attach built (TAPs, wiring,
//! bridges, timings). Pure; the result is the JSON contract.

use crate::model::{Attachment, BridgeInfo, Description, Dns, TapInfo, Timings};
use crate::plan::Plan;
use crate::state::{created_ifindex, Created};

/// `desc` (as scanned before attach) with the objects of `plan` that `created`
/// records, and the resolver configuration the caller gave (`dns`).
pub fn attached(
    mut desc: Description,
    plan: &Plan,
    created: &[Created],
    timings_us: Timings,
    dns: Option<Dns>,
) -> Description {
    let index_of = |name: &str| created_ifindex(created, name);
    for nic in &plan.nics {
        let Some(iface) = desc
            .interfaces
            .iter_mut()
            .find(|i| i.ifindex == nic.pod.ifindex)
        else {
            continue;
        };
        iface.tap = Some(TapInfo {
            name: nic.tap.name.clone(),
            ifindex: index_of(&nic.tap.name),
            queues: nic.tap.queues,
            vnet_hdr: nic.tap.vnet_hdr,
            multi_queue: nic.tap.multi_queue,
            owner: nic.tap.owner,
            group: nic.tap.group,
            mac: created
                .iter()
                .find(|c| c.name == nic.tap.name)
                .and_then(|c| c.mac)
                .map(|m| m.to_string()),
            device: nic.macvtap.as_ref().map(|m| m.device.clone()),
        });
        iface.wiring = Some(nic.wiring);
        iface.wiring_note = nic.wiring_note.clone();
        iface.bridge = nic.bridge.as_ref().map(|b| BridgeInfo {
            name: b.name.clone(),
            ifindex: index_of(&b.name),
            pod_interface_mac: b.pod_mac.to_string(),
        });
    }
    desc.dns = dns.filter(|d| !d.is_empty());
    desc.attachment = Some(Attachment {
        id: plan.id.to_string(),
        mode: plan.mode,
        timings_us,
    });
    desc
}
