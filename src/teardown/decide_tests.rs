//! Unit tests of teardown's decisions, on hand-made kernel states.

use super::decide::{our_links, undo_recorded, Action, Proof};
use super::test_states::*;
use crate::kernel::links::LinkState;
use crate::kernel::mac::MacAddr;
use crate::kernel::tc::FilterInfo;
use crate::model::Wiring;
use crate::plan::TC_PRIO_BASE;

#[test]
fn tc_undo_removes_filter_qdisc_and_restores_txqlen_then_deletes_the_group() {
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Tc)]);
    let now = observed(
        vec![link(2, "eth2", Some("veth")), tap(5, "tap_eth2")],
        vec![(2, vec![ours_filter(5)])],
    );
    let undo = undo_recorded(
        &plan,
        &[created(5, "tap_eth2", "tap")],
        &now,
        Proof::Recorded,
    );
    assert_eq!(
        undo.pod_side,
        // The qdisc podtap added holds only podtap's filter: deleting it takes the filter.
        vec![vec![
            Action::DeleteIngressQdisc {
                ifindex: 2,
                name: "eth2".into()
            },
            Action::SetTxqlen {
                ifindex: 2,
                name: "eth2".into(),
                txqlen: 0
            },
        ]]
    );
    assert_eq!(
        undo.links,
        vec![Action::DeleteGroup {
            group: GROUP,
            members: vec![5]
        }]
    );
    assert!(undo.warnings.is_empty(), "{:?}", undo.warnings);
}

#[test]
fn a_foreign_filter_keeps_the_qdisc() {
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Tc)]);
    let foreign = FilterInfo {
        prio: 1,
        redirect_to: None,
        via: None,
    };
    let now = observed(
        vec![link(2, "eth2", Some("veth")), tap(5, "tap_eth2")],
        vec![(2, vec![ours_filter(5), foreign])],
    );
    let undo = undo_recorded(
        &plan,
        &[created(5, "tap_eth2", "tap")],
        &now,
        Proof::Recorded,
    );
    // The qdisc stays for the foreign filter, so podtap's goes by priority.
    assert_eq!(
        undo.pod_side[0],
        vec![
            Action::DeleteFilter {
                ifindex: 2,
                name: "eth2".into(),
                prio: TC_PRIO_BASE
            },
            Action::SetTxqlen {
                ifindex: 2,
                name: "eth2".into(),
                txqlen: 0
            },
        ]
    );
    assert!(undo.warnings[0].contains("kept the ingress qdisc"));
}

#[test]
fn a_qdisc_that_was_there_before_attach_keeps_and_loses_only_our_filter() {
    let mut n = nic(2, "tap_eth2", Wiring::Tc);
    if let Some(tc) = n.tc.as_mut() {
        tc.create_pod_qdisc = false;
    }
    let plan = the_plan(vec![n]);
    let now = observed(
        vec![link(2, "eth2", Some("veth")), tap(5, "tap_eth2")],
        vec![(2, vec![ours_filter(5)])],
    );
    let undo = undo_recorded(
        &plan,
        &[created(5, "tap_eth2", "tap")],
        &now,
        Proof::Recorded,
    );
    assert_eq!(
        undo.pod_side[0],
        vec![
            Action::DeleteFilter {
                ifindex: 2,
                name: "eth2".into(),
                prio: TC_PRIO_BASE
            },
            Action::SetTxqlen {
                ifindex: 2,
                name: "eth2".into(),
                txqlen: 0
            },
        ]
    );
    assert!(undo.warnings.is_empty(), "{:?}", undo.warnings);
}

#[test]
fn gone_objects_are_warnings_and_nothing_is_deleted() {
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Tc)]);
    let now = observed(vec![link(1, "lo", None)], vec![]);
    let undo = undo_recorded(
        &plan,
        &[created(5, "tap_eth2", "tap")],
        &now,
        Proof::Recorded,
    );
    assert!(undo.pod_side.is_empty() && undo.links.is_empty());
    assert_eq!(undo.warnings.len(), 2, "{:?}", undo.warnings);
}

#[test]
fn a_foreign_link_in_the_group_means_one_by_one() {
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Tc)]);
    let stranger = LinkState {
        group: GROUP,
        ..link(9, "theirs", Some("veth"))
    };
    let now = observed(
        vec![link(2, "eth2", Some("veth")), tap(5, "tap_eth2"), stranger],
        vec![],
    );
    let undo = undo_recorded(
        &plan,
        &[created(5, "tap_eth2", "tap")],
        &now,
        Proof::Recorded,
    );
    assert_eq!(
        undo.links,
        vec![Action::DeleteLink {
            ifindex: 5,
            name: "tap_eth2".into(),
            kind: "tun".into()
        }]
    );
}

#[test]
fn names_count_only_for_a_dead_attach_and_only_when_unclaimed() {
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Tc)]);
    let ungrouped = LinkState {
        group: 0,
        alias: None,
        ..tap(5, "tap_eth2")
    };
    let theirs = LinkState {
        alias: Some("someone-else".into()),
        ..ungrouped.clone()
    };
    for (live, proof, expect) in [
        (&ungrouped, Proof::RecordedDead, 1),
        (&ungrouped, Proof::Recorded, 0),
        (&theirs, Proof::RecordedDead, 0),
    ] {
        let ours = our_links(&plan, &[], std::iter::once(live), proof);
        assert_eq!(ours.len(), expect, "{live:?} {proof:?}");
    }
    // What this process just made is proven by its ifindex and kind alone.
    let c = [created(5, "tap_eth2", "tap")];
    assert_eq!(
        our_links(&plan, &c, std::iter::once(&ungrouped), Proof::MadeNow).len(),
        1
    );
    assert_eq!(
        our_links(&plan, &c, std::iter::once(&ungrouped), Proof::Recorded).len(),
        0
    );
}

#[test]
fn tc_mode_removes_the_redirect_even_when_the_pod_mac_changed() {
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Tc)]);
    let changed = LinkState {
        mac: Some(MacAddr([0x02, 9, 9, 9, 9, 9])),
        ..link(2, "eth2", Some("veth"))
    };
    let now = observed(
        vec![changed, tap(5, "tap_eth2")],
        vec![(2, vec![ours_filter(5)])],
    );
    let undo = undo_recorded(
        &plan,
        &[created(5, "tap_eth2", "tap")],
        &now,
        Proof::Recorded,
    );
    // The TAP goes, so a filter left behind would redirect into nothing: it
    // goes with the qdisc podtap added.
    assert!(undo.pod_side[0]
        .iter()
        .any(|a| matches!(a, Action::DeleteIngressQdisc { ifindex: 2, .. })));
    assert_eq!(
        undo.links,
        vec![Action::DeleteGroup {
            group: GROUP,
            members: vec![5]
        }]
    );
}

#[test]
fn txqlen_is_restored_only_where_podtaps_tc_was() {
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Tc)]);
    // No filter of ours, and a foreign one keeps the qdisc: podtap did not
    // leave its mark here, so it leaves txqueuelen alone.
    let foreign = FilterInfo {
        prio: 1,
        redirect_to: None,
        via: None,
    };
    let now = observed(
        vec![link(2, "eth2", Some("veth")), tap(5, "tap_eth2")],
        vec![(2, vec![foreign])],
    );
    let undo = undo_recorded(
        &plan,
        &[created(5, "tap_eth2", "tap")],
        &now,
        Proof::Recorded,
    );
    assert!(!undo
        .pod_side
        .iter()
        .flatten()
        .any(|a| matches!(a, Action::SetTxqlen { .. })));
}

#[test]
fn a_filter_at_our_priority_that_is_not_ours_stays() {
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Tc)]);
    let now = observed(
        vec![link(2, "eth2", Some("veth")), tap(5, "tap_eth2")],
        vec![(2, vec![ours_filter(77)])],
    );
    let undo = undo_recorded(
        &plan,
        &[created(5, "tap_eth2", "tap")],
        &now,
        Proof::Recorded,
    );
    let side = &undo.pod_side[0];
    assert!(!side
        .iter()
        .any(|a| matches!(a, Action::DeleteFilter { .. })));
    assert!(!side
        .iter()
        .any(|a| matches!(a, Action::DeleteIngressQdisc { .. })));
}

#[test]
fn macvtap_undo_leaves_the_pod_alone_and_deletes_only_a_marked_macvtap() {
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Macvtap)]);
    let macvtap = LinkState {
        kind: Some("macvtap".into()),
        lower: Some(2),
        ..tap(5, "tap_eth2")
    };
    let now = observed(vec![link(2, "eth2", Some("veth")), macvtap.clone()], vec![]);
    let made = [created(5, "tap_eth2", "macvtap")];
    let undo = undo_recorded(&plan, &made, &now, Proof::Recorded);
    // Deleting the macvtap is what gives the pod interface back its promiscuity.
    assert_eq!(undo.pod_side, vec![Vec::<Action>::new()]);
    assert_eq!(
        undo.links,
        vec![Action::DeleteGroup {
            group: GROUP,
            members: vec![5]
        }]
    );
    // A macvtap at the recorded ifindex that is not marked as ours stays.
    let stranger = LinkState {
        alias: Some("someone else".into()),
        group: 0,
        ..macvtap
    };
    let now = observed(vec![link(2, "eth2", Some("veth")), stranger], vec![]);
    let undo = undo_recorded(&plan, &made, &now, Proof::Recorded);
    assert!(undo.links.is_empty(), "{:?}", undo.links);
    assert_eq!(undo.warnings.len(), 1, "{:?}", undo.warnings);
}

#[test]
fn part_of_an_attachment_never_takes_its_siblings_by_group() {
    use super::decide::{our_links_in, Scope};
    // Two TAPs of one attachment, both marked and in its group; the plan
    // holds only the NIC of the first (a late interface that left).
    let plan = the_plan(vec![nic(2, "tap_eth2", Wiring::Tc)]);
    let first = tap(5, "tap_eth2");
    let sibling = tap(6, "tap_eth3");
    let live = [first.clone(), sibling.clone()];
    let c = [created(5, "tap_eth2", "tap")];
    for proof in [Proof::MadeNow, Proof::Recorded, Proof::RecordedDead] {
        let whole = our_links_in(&plan, &c, live.iter(), proof, Scope::Whole);
        assert_eq!(
            whole.len(),
            2,
            "the group proves both for a whole attachment ({proof:?})"
        );
        let part = our_links_in(&plan, &c, live.iter(), proof, Scope::Part);
        assert_eq!(
            part.iter().map(|l| l.ifindex).collect::<Vec<_>>(),
            [5],
            "{proof:?}"
        );
    }
    // A pending NIC (no ifindex recorded yet) is found by its planned name only.
    let part = our_links_in(&plan, &[], live.iter(), Proof::RecordedDead, Scope::Part);
    assert_eq!(part.iter().map(|l| l.ifindex).collect::<Vec<_>>(), [5]);
}
