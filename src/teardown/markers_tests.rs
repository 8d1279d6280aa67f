//! Unit tests of the marker-only teardown and of what check reports.

use super::actions::Action;
use super::markers::undo_by_markers;
use super::missing::missing;
use super::test_states::*;
use crate::kernel::links::LinkState;
use crate::model::Wiring;
use crate::plan;

#[test]
fn markers_find_taps_filters_and_bridged_ports() {
    let bridge = LinkState {
        alias: Some(plan::bridge_marker(&id(), 3, Some(mac(3)))),
        group: GROUP,
        ..link(7, "br_eth3", Some("bridge"))
    };
    let port = LinkState {
        controller: Some(7),
        ..link(3, "eth3", Some("veth"))
    };
    let other_ids_tap = LinkState {
        alias: Some("podtap:s10".into()),
        ..link(8, "tap_x", Some("tun"))
    };
    let now = observed(
        vec![
            link(2, "eth2", Some("veth")),
            port,
            tap(5, "tap_eth2"),
            bridge,
            other_ids_tap,
        ],
        vec![(2, vec![ours_filter(5), ours_filter(8)])],
    );
    let undo = undo_by_markers(&id(), &now);
    let all: Vec<&Action> = undo.pod_side.iter().flatten().collect();
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all
        .iter()
        .any(|a| matches!(a, Action::DeleteFilter { ifindex: 2, .. })));
    assert!(all.contains(&&Action::ReleaseFromBridge {
        ifindex: 3,
        name: "eth3".into(),
        mac: mac(3)
    }));
    let deleted: Vec<u32> = undo
        .links
        .iter()
        .filter_map(|a| match a {
            Action::DeleteLink { ifindex, .. } => Some(*ifindex),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, vec![5, 7], "another id's TAP stays");
}

#[test]
fn missing_lists_every_problem() {
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Tc)]);
    let c = [created(5, "tap_eth2", "tap")];
    let healthy = observed(
        vec![link(2, "eth2", Some("veth")), tap(5, "tap_eth2")],
        vec![(2, vec![ours_filter(5)]), (5, vec![ours_filter(2)])],
    );
    assert!(missing(&plan, &c, &healthy).is_empty());
    let broken = observed(
        vec![
            link(2, "eth2", Some("veth")),
            LinkState {
                up: false,
                mtu: 1400,
                ..tap(5, "tap_eth2")
            },
        ],
        vec![(2, vec![ours_filter(5)])],
    );
    let problems = missing(&plan, &c, &broken);
    assert_eq!(problems.len(), 4, "{problems:?}");
    assert!(
        problems.iter().any(|p| p.contains("but its TAP")),
        "{problems:?}"
    );
    assert!(problems.iter().any(|p| p.contains("is down")));
    assert!(problems.iter().any(|p| p.contains("MTU 1400")));
    assert!(problems.iter().any(|p| p.contains("tap_eth2 -> eth2")));
    let gone = observed(vec![link(2, "eth2", Some("veth"))], vec![]);
    assert_eq!(missing(&plan, &c, &gone).len(), 1);
}

#[test]
fn missing_checks_a_macvtap_by_kind_and_lower() {
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Macvtap)]);
    let c = [created(5, "tap_eth2", "macvtap")];
    let macvtap = LinkState {
        kind: Some("macvtap".into()),
        lower: Some(2),
        ..tap(5, "tap_eth2")
    };
    let healthy = observed(vec![link(2, "eth2", Some("veth")), macvtap.clone()], vec![]);
    assert!(missing(&plan, &c, &healthy).is_empty());
    let moved = observed(
        vec![
            link(2, "eth2", Some("veth")),
            LinkState {
                lower: Some(9),
                ..macvtap
            },
        ],
        vec![],
    );
    let problems = missing(&plan, &c, &moved);
    assert!(
        problems.iter().any(|p| p.contains("does not sit on")),
        "{problems:?}"
    );
    // A TAP where a macvtap was recorded is not it.
    let tap_instead = observed(
        vec![link(2, "eth2", Some("veth")), tap(5, "tap_eth2")],
        vec![],
    );
    assert!(missing(&plan, &c, &tap_instead)[0].contains("macvtap tap_eth2"));
}

#[test]
fn per_nic_tells_missing_from_drifted_and_sees_a_renamed_tap() {
    use super::missing::per_nic;
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Tc)]);
    let c = [created(5, "tap_eth2", "tap")];
    let filters = vec![(2, vec![ours_filter(5)]), (5, vec![ours_filter(2)])];
    let renamed = observed(
        vec![link(2, "eth2", Some("veth")), tap(5, "guestnic0")],
        filters.clone(),
    );
    let found = per_nic(&plan, &c, &renamed);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].missing, None);
    assert_eq!(
        found[0].drifted,
        vec!["TAP tap_eth2 was renamed to guestnic0".to_string()]
    );
    let gone = observed(vec![link(2, "eth2", Some("veth"))], filters);
    let found = per_nic(&plan, &c, &gone);
    assert!(found[0]
        .missing
        .as_deref()
        .unwrap()
        .contains("TAP tap_eth2"));
    assert!(found[0].drifted.is_empty());
    assert!(found[0].missing.is_some() && found[0].drifted.is_empty());
}
