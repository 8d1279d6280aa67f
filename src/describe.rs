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
        revision: 0,
    });
    desc
}

/// The description `prev` (what attach, or an earlier revision, printed)
/// brought up to date with a `fresh` scan of the same netns, for the NICs
/// `plan` holds now (`podtap watch`).
///
/// podtap's own links (in `created`) and their routes and neighbours stay
/// out, as in the first description. An interface attached before keeps
/// what it had when it was attached (MAC, guest MAC, controller,
/// eligibility: in bridge mode the kernel now shows the bridged MAC and the
/// bridge as its controller) and takes the fresh name, state, MTU and
/// addresses. Everything else is taken from the scan. The revision goes up
/// by one when anything differs.
pub fn revised(
    prev: &Description,
    mut fresh: Description,
    plan: &Plan,
    created: &[Created],
) -> Description {
    let ours: Vec<String> = fresh
        .interfaces
        .iter()
        .filter(|i| created.iter().any(|c| c.ifindex == i.ifindex))
        .map(|i| i.name.clone())
        .collect();
    fresh
        .routes
        .retain(|r| r.interface.as_ref().is_none_or(|name| !ours.contains(name)));
    fresh.neighbours.retain(|n| !ours.contains(&n.interface));
    fresh
        .interfaces
        .retain(|i| !created.iter().any(|c| c.ifindex == i.ifindex));
    for iface in &mut fresh.interfaces {
        let Some(was) = prev
            .interfaces
            .iter()
            .find(|p| p.ifindex == iface.ifindex && p.tap.is_some())
        else {
            continue;
        };
        if plan.nics.iter().all(|n| n.pod.ifindex != iface.ifindex) {
            continue;
        }
        let mut kept = was.clone();
        kept.name = std::mem::take(&mut iface.name);
        kept.oper_state = std::mem::take(&mut iface.oper_state);
        kept.mtu = iface.mtu;
        kept.addresses = std::mem::take(&mut iface.addresses);
        kept.address_details = std::mem::take(&mut iface.address_details);
        *iface = kept;
    }
    let (timings, revision) = prev
        .attachment
        .as_ref()
        .map(|a| (a.timings_us.clone(), a.revision))
        .unwrap_or_default();
    fresh.netns = prev.netns.clone();
    let mut next = attached(fresh, plan, created, timings, prev.dns.clone());
    if let Some(a) = next.attachment.as_mut() {
        a.revision = revision;
    }
    if &next != prev {
        if let Some(a) = next.attachment.as_mut() {
            a.revision = revision + 1;
        }
    }
    next
}
