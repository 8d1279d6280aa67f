//! The pod side of teardown: bridge release, strangers at recorded ifindexes.

use super::decide::{undo_recorded, Action, Proof};
use super::test_states::*;
use crate::kernel::links::LinkState;
use crate::kernel::mac::MacAddr;
use crate::model::Wiring;
use crate::plan;

fn our_bridge(ifindex: u32) -> LinkState {
    LinkState {
        group: GROUP,
        alias: Some(plan::bridge_marker(&id(), 2, Some(mac(2)))),
        ..link(ifindex, "br_eth2", Some("bridge"))
    }
}

fn bridged_pod(controller: u32) -> LinkState {
    LinkState {
        controller: Some(controller),
        mac: Some(MacAddr([0x06, 1, 2, 3, 4, 2])),
        ..link(2, "eth2", Some("veth"))
    }
}

#[test]
fn bridge_undo_releases_the_pod_interface_with_its_own_mac() {
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Bridge)]);
    let now = observed(
        vec![bridged_pod(6), our_bridge(6), tap(5, "tap_eth2")],
        vec![],
    );
    let c = [
        created(5, "tap_eth2", "tap"),
        created(6, "br_eth2", "bridge"),
    ];
    let undo = undo_recorded(&plan, &c, &now, Proof::Recorded);
    assert!(undo.pod_side[0].contains(&Action::ReleaseFromBridge {
        ifindex: 2,
        name: "eth2".into(),
        mac: mac(2)
    }));
    // The bridge out of the group, the TAPs' group deletion, then the bridge
    // alone (its rcu_barrier runs under RTNL).
    assert_eq!(
        undo.links,
        vec![
            Action::LeaveGroup {
                ifindex: 6,
                name: our_bridge(6).name,
            },
            Action::DeleteGroup {
                group: GROUP,
                members: vec![5]
            },
            Action::DeleteLink {
                ifindex: 6,
                name: our_bridge(6).name,
                kind: "bridge".into()
            },
        ]
    );
}

#[test]
fn a_pod_interface_moved_into_someone_elses_bridge_stays_there() {
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Bridge)]);
    let theirs = link(9, "br_theirs", Some("bridge"));
    let now = observed(vec![bridged_pod(9), theirs, tap(5, "tap_eth2")], vec![]);
    let undo = undo_recorded(
        &plan,
        &[created(5, "tap_eth2", "tap")],
        &now,
        Proof::Recorded,
    );
    assert!(undo
        .pod_side
        .iter()
        .flatten()
        .all(|a| !matches!(a, Action::ReleaseFromBridge { .. })));
    assert!(
        undo.warnings
            .iter()
            .any(|w| w.contains("not of podtap's bridge")),
        "{:?}",
        undo.warnings
    );
}

#[test]
fn a_stranger_at_a_recorded_ifindex_is_left_alone() {
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Tc)]);
    // Ifindex 5 was podtap's TAP; now an unrelated bridge without marker or group.
    let stranger = link(5, "br_other", Some("bridge"));
    let now = observed(
        vec![link(2, "eth2", Some("veth")), stranger],
        vec![(2, vec![])],
    );
    let undo = undo_recorded(
        &plan,
        &[created(5, "tap_eth2", "tap")],
        &now,
        Proof::Recorded,
    );
    assert!(undo.links.is_empty(), "{:?}", undo.links);
    assert!(undo
        .warnings
        .iter()
        .any(|w| w.contains("left it untouched")));
    // An unmarked TAP at the recorded ifindex (someone else's TAP) is not ours either.
    let foreign_tap = LinkState {
        alias: Some("theirs".into()),
        group: 0,
        ..link(5, "tapx", Some("tun"))
    };
    let now = observed(vec![link(2, "eth2", Some("veth")), foreign_tap], vec![]);
    let undo = undo_recorded(
        &plan,
        &[created(5, "tap_eth2", "tap")],
        &now,
        Proof::Recorded,
    );
    assert!(undo.links.is_empty());
}

#[test]
fn a_replaced_pod_interface_is_not_restored() {
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Tc)]);
    // Another kind of link now sits at the recorded ifindex.
    let other = link(2, "eth2", Some("macvlan"));
    let now = observed(
        vec![other, tap(5, "tap_eth2")],
        vec![(2, vec![ours_filter(5)])],
    );
    let undo = undo_recorded(
        &plan,
        &[created(5, "tap_eth2", "tap")],
        &now,
        Proof::Recorded,
    );
    assert!(undo.pod_side.is_empty(), "{:?}", undo.pod_side);
    assert!(undo
        .warnings
        .iter()
        .any(|w| w.contains("not the recorded pod interface")));
}
