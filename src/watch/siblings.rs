//! The other attachments in the watched netns (a later CNI ADD, such as a
//! Multus network, is a sandbox of its own there): which exist, which of
//! their TAPs the VM booted with, and which arrived since and are adopted.

use std::collections::BTreeSet;

use crate::kernel::netns_id::NetnsId;
use crate::state::{Checkpoint, Phase, SandboxId, StateDir};

/// The finished attachments other than `id` in the netns `identity`.
pub(super) fn siblings(
    state: &StateDir,
    id: &SandboxId,
    identity: &NetnsId,
) -> Vec<(SandboxId, Checkpoint)> {
    state
        .ids()
        .unwrap_or_default()
        .into_iter()
        .filter(|other| other != id)
        .filter_map(|other| {
            let cp = state.load(&other).ok().flatten()?;
            let same = cp.netns_id().matches(identity)
                && cp.phase() == Phase::Complete
                && cp.description().is_some();
            same.then_some((other, cp))
        })
        .collect()
}

/// The TAPs (name, ifindex) of other attachments in `cp`'s netns when watch
/// starts: the launcher booted the VM with them (or chose not to).
pub(super) fn boot_siblings(
    state: &StateDir,
    id: &SandboxId,
    cp: &Checkpoint,
) -> BTreeSet<(String, u32)> {
    siblings(state, id, &cp.netns_id())
        .iter()
        .flat_map(|(_, other)| sibling_taps(other))
        .filter(|(t, _)| !cp.adopted.contains(t))
        .collect()
}

/// Record in `cp` the NICs of other attachments in its netns that arrived
/// after watch started, and forget those that left; whether `cp` changed.
/// `boot` (TAPs there at the start) loses the TAPs that are gone, so a TAP
/// made again under the same name is adopted.
pub(super) fn adopt(
    others: &[(SandboxId, Checkpoint)],
    boot: &mut BTreeSet<(String, u32)>,
    cp: &mut Checkpoint,
) -> bool {
    let now: BTreeSet<(String, u32)> = others
        .iter()
        .flat_map(|(_, other)| sibling_taps(other))
        .collect();
    boot.retain(|t| now.contains(t));
    let names: BTreeSet<&String> = now.iter().map(|(t, _)| t).collect();
    let before = cp.adopted.clone();
    cp.adopted.retain(|t| names.contains(t));
    for (tap, _) in now.iter().filter(|t| !boot.contains(*t)) {
        if !cp.adopted.contains(tap) {
            cp.adopted.push(tap.clone());
        }
    }
    cp.adopted != before
}

/// The TAPs (name, ifindex) of another attachment that this one may adopt:
/// not the NICs that attachment's own watch added (its `late`, which that
/// watch hotplugs).
fn sibling_taps(other: &Checkpoint) -> Vec<(String, u32)> {
    other
        .description()
        .into_iter()
        .flat_map(|d| d.attached())
        .filter(|(_, tap)| !other.late.contains(&tap.name))
        .map(|(_, tap)| (tap.name.clone(), tap.ifindex))
        .collect()
}
