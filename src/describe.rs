//! Describe: the scanned description plus what attach built (TAPs, wiring,
//! bridges, timings). Pure; the result is the JSON contract.

use crate::model::{Attachment, BridgeInfo, Description, Dns, L3Info, TapInfo, Timings};
use crate::plan::l3::{ROUTER4, ROUTER6};
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
    // The description's JSON says 0 for an ifindex it does not know.
    let index_of = |name: &str| created_ifindex(created, name).unwrap_or(0);
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
            served: nic.serve,
        });
        if let Some(mac) = nic.guest_mac {
            iface.guest_mac = Some(mac.to_string());
        }
        iface.wiring = Some(nic.wiring);
        iface.wiring_note = nic.wiring_note.clone();
        iface.bridge = nic.bridge.as_ref().map(|b| BridgeInfo {
            name: b.name.clone(),
            ifindex: index_of(&b.name),
            pod_interface_mac: b.pod_mac.to_string(),
        });
        iface.l3 = nic.l3.as_ref().map(|l| L3Info {
            router_mac: iface
                .tap
                .as_ref()
                .and_then(|t| t.mac.clone())
                .unwrap_or_default(),
            router4: (!l.v4.is_empty()).then(|| ROUTER4.to_string()),
            router6: (!l.v6.is_empty()).then(|| ROUTER6.to_string()),
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

/// The description `prev` (what attach, or an earlier revision, recorded:
/// without its routes and rules, whose digest with the neighbours was
/// `prev_digest`) brought up to date with a `fresh` [`crate::scan::pod_view`]
/// of the same netns, for the NICs `plan` holds now (`podtap watch`).
/// Returns it without its routes and rules (with its neighbours, a recorded
/// one in its recorded state), and the digest of the fresh tables.
///
/// podtap's own links (in `created`) stay out, as in the first
/// description; the pod view already left out their routes and neighbours. An interface attached before keeps
/// what it had when it was attached (MAC, guest MAC, controller,
/// eligibility: in bridge mode the kernel now shows the bridged MAC and the
/// bridge as its controller) and takes the fresh name, state, MTU and
/// addresses. Everything else is taken from the scan. The revision goes up
/// by one when anything differs, the tables included (a neighbour's state,
/// which changes all the time, does not count).
pub fn revised(
    prev: &Description,
    prev_digest: Option<u64>,
    mut fresh: Description,
    plan: &Plan,
    created: &[Created],
) -> (Description, u64) {
    let tables = fresh.take_tables();
    let digest = tables.digest();
    let neighbours = tables.with_recorded_neighbours(&prev.neighbours).neighbours;
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
    next.neighbours = neighbours;
    if let Some(a) = next.attachment.as_mut() {
        a.revision = revision;
    }
    if &next != prev || prev_digest != Some(digest) {
        if let Some(a) = next.attachment.as_mut() {
            a.revision = revision + 1;
        }
    }
    (next, digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::AttachOptions;
    use crate::render::samples;

    /// A scan before attach, the plan for eth0, its TAP (ifindex 90) and what
    /// attach recorded (the description without its tables, and their digest).
    fn attached_pod() -> (Description, Plan, Vec<Created>, (Description, u64)) {
        let mut scanned = samples::pod();
        for i in &mut scanned.interfaces {
            i.tap = None;
            i.wiring = None;
        }
        scanned.attachment = None;
        let id = "pod-1".parse().unwrap();
        let opts = AttachOptions {
            interfaces: Some(vec!["eth0".into()]),
            ..AttachOptions::default()
        };
        let plan = crate::plan::plan(&scanned, &Default::default(), &opts, &id).unwrap();
        let created = vec![Created {
            name: plan.nics[0].tap.name.clone(),
            ifindex: 90,
            kind: crate::state::CreatedKind::Tap,
            mac: None,
        }];
        let mut full = attached(scanned.clone(), &plan, &created, Timings::default(), None);
        let prev = full.without_tables();
        let digest = full.tables_digest();
        (scanned, plan, created, (prev, digest))
    }

    /// A pod view after attach: the TAP is there (its neighbours are not:
    /// the pod view leaves out those of podtap's links).
    fn rescanned(scanned: &Description, tap: &str) -> Description {
        let mut fresh = scanned.clone();
        let mut tap_link = fresh.interfaces[1].clone();
        tap_link.name = tap.into();
        tap_link.ifindex = 90;
        fresh.interfaces.push(tap_link);
        fresh
    }

    #[test]
    fn an_unchanged_netns_keeps_the_description_and_its_revision() {
        let (scanned, plan, created, (prev, digest)) = attached_pod();
        let mut fresh = rescanned(&scanned, &created[0].name);
        // A neighbour's state changes all the time: not a revision.
        fresh.neighbours[0].state = "stale".into();
        let (next, now) = revised(&prev, Some(digest), fresh, &plan, &created);
        assert_eq!(
            next, prev,
            "podtap's own TAP stays out, the neighbour's state is the recorded one"
        );
        assert_eq!(now, digest);
        assert_eq!(next.attachment.unwrap().revision, 0);
    }

    #[test]
    fn a_route_change_is_a_revision() {
        let (scanned, plan, created, (prev, digest)) = attached_pod();
        let mut fresh = rescanned(&scanned, &created[0].name);
        fresh.routes.pop();
        let (next, now) = revised(&prev, Some(digest), fresh, &plan, &created);
        assert_ne!(now, digest);
        assert!(next.routes.is_empty(), "returned without its routes");
        assert_eq!(next.neighbours, prev.neighbours, "and with its neighbours");
        assert_eq!(next.attachment.unwrap().revision, 1);
    }

    #[test]
    fn an_attached_interface_keeps_its_mac_and_takes_fresh_addresses() {
        let (scanned, plan, created, (prev, digest)) = attached_pod();
        let mut fresh = rescanned(&scanned, &created[0].name);
        // What bridge mode makes the kernel show, plus a new address.
        let eth0 = samples::interface_mut(&mut fresh, "eth0");
        eth0.mac = Some("0a:00:00:00:00:99".into());
        eth0.controller = Some("br_eth0".into());
        eth0.eligible = false;
        eth0.addresses.push("10.244.1.6/24".into());
        let (next, digest) = revised(&prev, Some(digest), fresh, &plan, &created);
        let was = prev.interface("eth0").unwrap();
        let now = next.interface("eth0").unwrap();
        assert_eq!(now.mac, was.mac);
        assert_eq!(now.guest_mac, was.guest_mac);
        assert_eq!(now.controller, None);
        assert!(now.eligible);
        assert!(now.addresses.contains(&"10.244.1.6/24".to_string()));
        assert_eq!(now.tap, was.tap);
        assert_eq!(next.attachment.as_ref().unwrap().revision, 1);
        // Revised again with nothing new: the revision stays.
        let mut again = rescanned(&scanned, &created[0].name);
        samples::interface_mut(&mut again, "eth0")
            .addresses
            .push("10.244.1.6/24".into());
        assert_eq!(
            revised(&next, Some(digest), again, &plan, &created)
                .0
                .attachment
                .unwrap()
                .revision,
            1
        );
    }
}
