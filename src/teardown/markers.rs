//! Teardown without a checkpoint (`detach --force`, a corrupt checkpoint at
//! CNI DEL or OCI poststop): decided by podtap's markers alone. Pure.

use std::collections::BTreeSet;

use super::decide::{delete_link, Action, Observed, Undo};
use crate::id::SandboxId;
use crate::kernel::links::LinkState;
use crate::plan;

/// Without a checkpoint: links marked `podtap:<id>` (or unmarked ones in the
/// id's preferred group), podtap-priority filters that redirect to them, and
/// bridged pod interfaces given back the MAC recorded in their bridge's
/// marker. `now.filters` must hold the filters of every link.
pub fn undo_by_markers(id: &SandboxId, now: &Observed) -> Undo {
    let group = plan::preferred_group(id);
    let ours: Vec<&LinkState> = now
        .links
        .values()
        .filter(|l| l.is_podtap_kind())
        .filter(|l| {
            // The marker decides. The group alone could be another id's (a
            // colliding id moves to the next free group), so it counts
            // only for an unmarked link: a bridge made just before a crash.
            match l.alias.as_deref() {
                Some(a) => plan::is_marker_of(a, id),
                None => l.group == group,
            }
        })
        .collect();
    let our_idx: BTreeSet<u32> = ours.iter().map(|l| l.ifindex).collect();
    let mut undo = Undo::default();
    for l in now.links.values().filter(|l| !our_idx.contains(&l.ifindex)) {
        let mut steps = Vec::new();
        let marked_mac = l
            .controller
            .filter(|c| our_idx.contains(c))
            .and_then(|c| now.links.get(&c))
            .and_then(|b| plan::bridge_marker_mac(b.alias.as_deref()?, l.ifindex));
        if let Some(mac) = marked_mac {
            steps.push(Action::ReleaseFromBridge {
                ifindex: l.ifindex,
                name: l.name.clone(),
                mac,
            });
        }
        for f in now.filters_of(l.ifindex) {
            if plan::is_podtap_prio(f.prio) && f.redirect_to.is_some_and(|t| our_idx.contains(&t)) {
                steps.push(Action::DeleteFilter {
                    ifindex: l.ifindex,
                    name: l.name.clone(),
                    prio: f.prio,
                });
            }
        }
        if !steps.is_empty() {
            undo.pod_side.push(steps);
        }
    }
    // Bridges last: their deletions finish after teardown returns (see `execute`).
    let (bridges, rest): (Vec<&LinkState>, Vec<&LinkState>) = ours
        .into_iter()
        .partition(|l| l.kind.as_deref() == Some("bridge"));
    undo.links = rest.into_iter().chain(bridges).map(delete_link).collect();
    undo
}
