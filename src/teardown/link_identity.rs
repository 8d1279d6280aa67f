//! Pure proofs of a recorded link beyond its ifindex, kind and marker.

use crate::kernel::links::LinkState;
use crate::plan::Plan;

/// Whether the TAP `l`, recorded under `name`, has the tun flags podtap
/// made it with (a TAP, no PI header, the plan's vnet-header and
/// multi-queue choices). A kernel that reports no tun flags, or a name the
/// plan no longer has, leaves the other proofs to decide.
pub fn tap_flags(plan: &Plan, l: &LinkState, name: &str) -> bool {
    let planned = plan.nics.iter().find(|n| n.tap.name == name);
    match (l.tun, planned) {
        (Some(t), Some(n)) => t.is_podtap_tap(n.tap.vnet_hdr, n.tap.multi_queue),
        _ => true,
    }
}

/// Whether a link is no TUN device and no TAP with the PI header: podtap
/// makes neither, whatever its group or marker say.
pub fn tap_like(l: &LinkState) -> bool {
    l.tun.is_none_or(|t| t.tap && !t.pi)
}

#[cfg(test)]
mod tests {
    use super::super::decide::{our_links, Proof};
    use super::super::test_states::*;
    use crate::kernel::wire::TunInfo;
    use crate::model::Wiring;

    fn flags(tap: bool, vnet_hdr: bool) -> Option<TunInfo> {
        Some(TunInfo {
            tap,
            pi: false,
            vnet_hdr,
            multi_queue: false,
            persist: true,
        })
    }

    #[test]
    fn a_recorded_tap_is_proven_by_its_tun_flags_too() {
        let plan = the_plan(vec![nic(2, "tap0", Wiring::Tc)]);
        let created = vec![created(10, "tap0", "tap")];
        let mut ours = tap(10, "tap0");
        ours.tun = flags(true, true);
        // Same ifindex, kind and marker, but not in the group: only the
        // recorded ifindex can prove it, and its flags must agree.
        ours.group = 0;
        let got = our_links(&plan, &created, [&ours].into_iter(), Proof::Recorded);
        assert_eq!(got.len(), 1);
        let mut other_flags = ours.clone();
        other_flags.tun = flags(true, false);
        let got = our_links(&plan, &created, [&other_flags].into_iter(), Proof::Recorded);
        assert!(
            got.is_empty(),
            "a TAP made without vnet_hdr is not the recorded one"
        );
        let mut a_tun = tap(10, "tap0");
        a_tun.tun = flags(false, true);
        let got = our_links(&plan, &created, [&a_tun].into_iter(), Proof::Recorded);
        assert!(
            got.is_empty(),
            "a TUN device is never podtap's, group and marker or not"
        );
    }
}
