use std::collections::BTreeSet;

use super::*;
use crate::model::ifname::MAX_IFNAME;
use crate::model::{LinkKind, NetnsRef, Wiring, SCHEMA};

fn sid(s: &str) -> SandboxId {
    SandboxId::new(s).unwrap()
}

fn iface(name: &str, ifindex: u32, kind: LinkKind) -> Interface {
    Interface {
        name: name.into(),
        ifindex,
        kind,
        kind_raw: None,
        mac: Some(format!("aa:bb:cc:00:00:{ifindex:02x}")),
        mtu: 1500,
        oper_state: "UP".into(),
        flags: Vec::new(),
        controller: None,
        eligible: kind.eligible(),
        named_only: false,
        ineligible_reason: (!kind.eligible()).then(|| "no".into()),
        guest_mac: None,
        addresses: vec![],
        address_details: vec![],
        tap: None,
        wiring: None,
        wiring_note: None,
        bridge: None,
        l3: None,
    }
}

fn desc(ifaces: Vec<Interface>) -> Description {
    Description {
        schema: SCHEMA.into(),
        netns: NetnsRef {
            path: "/run/netns/t".into(),
            inode: 1,
            dev: 2,
        },
        ipv6_enabled: true,
        interfaces: ifaces,
        routes: vec![],
        neighbours: vec![],
        rules: vec![],
        dns: None,
        attachment: None,
    }
}

#[test]
fn picks_eligible_interfaces_and_names_taps() {
    let d = desc(vec![
        iface("lo", 1, LinkKind::Loopback),
        iface("eth0", 2, LinkKind::Veth),
        iface("net1", 3, LinkKind::Macvlan),
    ]);
    let p = plan(
        &d,
        &Inventory::default(),
        &AttachOptions::default(),
        &sid("s1"),
    )
    .unwrap();
    let names: Vec<_> = p.nics.iter().map(|n| n.tap.name.as_str()).collect();
    assert_eq!(names, ["tap_eth0", "tap_net1"]);
    assert!(p
        .nics
        .iter()
        .all(|n| n.wiring == Wiring::Tc && n.tc.as_ref().unwrap().create_pod_qdisc));
}

#[test]
fn long_names_fall_back_to_ifindex_and_stay_unique() {
    let d = desc(vec![
        iface("abcdefghijklmno", 7, LinkKind::Veth),
        iface("tap7", 8, LinkKind::Veth),
    ]);
    let p = plan(
        &d,
        &Inventory::default(),
        &AttachOptions::default(),
        &sid("s"),
    )
    .unwrap();
    assert_eq!(p.nics[0].tap.name, "tap7_1");
    assert_eq!(p.nics[1].tap.name, "tap_tap7");
    assert!(p.nics.iter().all(|n| n.tap.name.len() <= MAX_IFNAME));
}

#[test]
fn hostile_pod_names_never_reach_a_tap_name() {
    // Names the kernel accepts for a link, and no renderer can carry.
    let hostile = ["e$(id>x)", "a b", "q'\"", "x,y=z", "-x", ".x", "é"];
    let ifaces = hostile
        .iter()
        .zip(10u32..)
        .map(|(name, ifindex)| iface(name, ifindex, LinkKind::Veth))
        .collect();
    let opts = AttachOptions {
        mode: Wiring::Bridge,
        ..Default::default()
    };
    let p = plan(&desc(ifaces), &Inventory::default(), &opts, &sid("s")).unwrap();
    let taps: Vec<_> = p.nics.iter().map(|n| n.tap.name.as_str()).collect();
    // `-x` and `.x` are fine behind the prefix.
    let want = [
        "tap10", "tap11", "tap12", "tap13", "tap_-x", "tap_.x", "tap16",
    ];
    assert_eq!(taps, want);
    for n in &p.nics {
        assert!(crate::model::ifname::is_safe_ifname(&n.tap.name));
        let br = &n.bridge.as_ref().unwrap().name;
        assert!(crate::model::ifname::is_safe_ifname(br), "{br}");
    }
}

#[test]
fn bridge_mode_falls_back_to_tc_for_macvlan() {
    let d = desc(vec![
        iface("eth0", 2, LinkKind::Veth),
        iface("mv0", 3, LinkKind::Macvlan),
    ]);
    let opts = AttachOptions {
        mode: Wiring::Bridge,
        ..Default::default()
    };
    let p = plan(&d, &Inventory::default(), &opts, &sid("s")).unwrap();
    assert_eq!(p.nics[0].wiring, Wiring::Bridge);
    let br = p.nics[0].bridge.as_ref().unwrap();
    assert_eq!(br.name, "br_eth0");
    assert_ne!(Some(br.pod_mac), p.nics[0].pod.mac);
    assert!(
        br.pod_mac.is_local_unicast(),
        "locally administered unicast"
    );
    assert_eq!(p.nics[1].wiring, Wiring::Tc);
    assert!(p.nics[1]
        .wiring_note
        .as_deref()
        .unwrap()
        .contains("macvlan"));
}

#[test]
fn bridge_mode_falls_back_to_tc_under_a_stacked_link() {
    let d = desc(vec![iface("eth0", 2, LinkKind::Veth)]);
    let inv = Inventory {
        lower_of_stacked: [2].into_iter().collect(),
        ..Default::default()
    };
    let opts = AttachOptions {
        mode: Wiring::Bridge,
        ..Default::default()
    };
    let p = plan(&d, &inv, &opts, &sid("s")).unwrap();
    assert_eq!(p.nics[0].wiring, Wiring::Tc);
    assert!(p.nics[0].bridge.is_none());
    assert!(p.nics[0]
        .wiring_note
        .as_deref()
        .unwrap()
        .contains("cannot be bridged"));
}

#[test]
fn existing_ingress_is_kept_and_prio_avoids_theirs() {
    let d = desc(vec![iface("eth0", 2, LinkKind::Veth)]);
    let mut inv = Inventory::default();
    inv.ingress.insert(
        2,
        IngressState {
            qdisc: Some("clsact".into()),
            prios: [TC_PRIO_BASE, 1].into_iter().collect(),
            ..Default::default()
        },
    );
    let p = plan(&d, &inv, &AttachOptions::default(), &sid("s")).unwrap();
    let tc = p.nics[0].tc.as_ref().unwrap();
    assert!(!tc.create_pod_qdisc);
    assert_eq!(tc.prio, TC_PRIO_BASE + 1);
}

#[test]
fn an_interface_wired_by_another_attachment_is_refused() {
    let d = desc(vec![iface("eth0", 2, LinkKind::Veth)]);
    let mut inv = Inventory::default();
    inv.ingress.insert(
        2,
        IngressState {
            qdisc: Some("ingress".into()),
            prios: [TC_PRIO_BASE].into_iter().collect(),
            redirects: [TC_PRIO_BASE].into_iter().collect(),
        },
    );
    let err = plan(&d, &inv, &AttachOptions::default(), &sid("s2")).unwrap_err();
    assert!(err.to_string().contains("already wired"), "{err}");
}

#[test]
fn queues_set_multi_queue_only_above_one() {
    let d = desc(vec![iface("eth0", 2, LinkKind::Veth)]);
    let one = plan(
        &d,
        &Inventory::default(),
        &AttachOptions::default(),
        &sid("s"),
    )
    .unwrap();
    assert!(!one.nics[0].tap.multi_queue);
    let four = plan(
        &d,
        &Inventory::default(),
        &AttachOptions {
            queues: 4,
            ..Default::default()
        },
        &sid("s"),
    )
    .unwrap();
    assert!(four.nics[0].tap.multi_queue);
    assert_eq!(four.nics[0].tap.queues, 4);
    assert!(plan(
        &d,
        &Inventory::default(),
        &AttachOptions {
            queues: 0,
            ..Default::default()
        },
        &sid("s")
    )
    .is_err());
}

#[test]
fn interface_selection_errors_are_clear() {
    let d = desc(vec![
        iface("lo", 1, LinkKind::Loopback),
        iface("eth0", 2, LinkKind::Veth),
    ]);
    let only = |names: &[&str]| AttachOptions {
        interfaces: Some(names.iter().map(|s| s.to_string()).collect()),
        ..Default::default()
    };
    assert!(plan(&d, &Inventory::default(), &only(&["nope"]), &sid("s"))
        .unwrap_err()
        .to_string()
        .contains("not found"));
    assert!(plan(&d, &Inventory::default(), &only(&["lo"]), &sid("s"))
        .unwrap_err()
        .to_string()
        .contains("not eligible"));
    assert_eq!(
        plan(&d, &Inventory::default(), &only(&["eth0"]), &sid("s"))
            .unwrap()
            .nics
            .len(),
        1
    );
    let none = desc(vec![iface("lo", 1, LinkKind::Loopback)]);
    assert!(plan(
        &none,
        &Inventory::default(),
        &AttachOptions::default(),
        &sid("s")
    )
    .is_err());
}

#[test]
fn link_group_is_stable_and_avoids_used() {
    let g = link_group(&sid("sandbox"), &BTreeSet::new());
    assert_eq!(g, preferred_group(&sid("sandbox")));
    let used: BTreeSet<u32> = [g].into_iter().collect();
    assert_ne!(link_group(&sid("sandbox"), &used), g);
}

#[test]
fn a_full_priority_range_is_refused_not_shared() {
    let d = desc(vec![iface("eth0", 2, LinkKind::Veth)]);
    let mut inv = Inventory::default();
    inv.ingress.insert(
        2,
        IngressState {
            qdisc: Some("clsact".into()),
            prios: (TC_PRIO_BASE..TC_PRIO_BASE + TC_PRIO_SPAN).collect(),
            ..Default::default()
        },
    );
    let err = plan(&d, &inv, &AttachOptions::default(), &sid("s")).unwrap_err();
    assert!(err.to_string().contains("every tc priority"), "{err}");
    inv.ingress
        .get_mut(&2)
        .unwrap()
        .prios
        .remove(&(TC_PRIO_BASE + 7));
    let p = plan(&d, &inv, &AttachOptions::default(), &sid("s")).unwrap();
    assert_eq!(p.nics[0].tc.as_ref().unwrap().prio, TC_PRIO_BASE + 7);
}

#[test]
fn macvtap_mode_plans_a_node_per_nic_and_falls_back_where_it_cannot_sit() {
    let d = desc(vec![
        iface("eth0", 2, LinkKind::Veth),
        iface("mv0", 3, LinkKind::Macvlan),
        iface("eth1", 4, LinkKind::Veth),
    ]);
    let inv = Inventory {
        lower_of_stacked: [4].into_iter().collect(),
        ..Default::default()
    };
    let opts = AttachOptions {
        mode: Wiring::Macvtap,
        ..Default::default()
    };
    let p = plan(&d, &inv, &opts, &sid("s")).unwrap();
    let n = &p.nics[0];
    assert_eq!(n.wiring, Wiring::Macvtap);
    assert!(n.tc.is_none() && n.bridge.is_none());
    assert_eq!(
        n.macvtap.as_ref().unwrap().device,
        format!("/dev/podtap/s/{}", n.tap.name)
    );
    for (nic, why) in [(&p.nics[1], "macvlan"), (&p.nics[2], "only upper")] {
        assert_eq!(nic.wiring, Wiring::Tc, "{}", nic.pod.name);
        assert!(nic.macvtap.is_none() && nic.tc.is_some());
        let note = nic.wiring_note.as_deref().unwrap();
        assert!(note.contains(why) && note.contains("tc redirect"), "{note}");
    }
}

#[test]
fn the_plan_records_each_pod_interfaces_txqlen_from_the_scan() {
    let d = desc(vec![
        iface("eth0", 2, LinkKind::Veth),
        iface("eth1", 3, LinkKind::Veth),
    ]);
    let inv = Inventory {
        txqlen: [(2, 1000)].into_iter().collect(),
        ..Default::default()
    };
    let p = plan(&d, &inv, &AttachOptions::default(), &sid("s")).unwrap();
    assert_eq!(p.nics[0].pod.txqlen, Some(1000));
    assert_eq!(
        p.nics[1].pod.txqlen, None,
        "not in the scan: nothing to put back"
    );
}
