//! Teardown: the one way podtap undoes what it built, for detach, rollback,
//! crash recovery, `detach --force`, CNI DEL/GC and OCI poststop, and the
//! one way `check` finds what is missing.
//!
//! [`decide`] holds the decisions as pure functions of what the kernel holds
//! now; [`execute`] reads the kernel and carries them out. Anything already
//! gone is a warning, not an error, so teardown never blocks pod deletion.

pub mod decide;
#[cfg(test)]
mod decide_tests;
pub mod execute;

pub use execute::UndoReport;

use std::path::Path;

use crate::error::{Error, Result};
use crate::id::SandboxId;
use crate::kernel::netlink::Netlink;
use crate::kernel::netns::NetNs;
use crate::plan::Plan;
use crate::state::{Checkpoint, Created};

/// Undo everything `plan` may have built in the netns `nl` talks to.
/// `match_names`: see [`decide::undo_recorded`].
pub async fn undo_recorded(
    nl: &Netlink,
    plan: &Plan,
    created: &[Created],
    match_names: bool,
) -> UndoReport {
    let qdisc_owners: Vec<u32> = plan
        .nics
        .iter()
        .filter(|n| n.tc.as_ref().is_some_and(|t| t.create_pod_qdisc))
        .map(|n| n.pod.ifindex)
        .collect();
    match execute::observe(nl, |l| qdisc_owners.contains(&l.ifindex)).await {
        Ok(now) => {
            let undo = decide::undo_recorded(plan, created, &now, match_names);
            execute::execute(nl, undo, false).await
        }
        Err(e) => UndoReport {
            warnings: Vec::new(),
            errors: vec![e],
        },
    }
}

/// Without a checkpoint: undo what podtap's markers for `id` show (`detach --force`).
pub async fn undo_by_markers(nl: &Netlink, id: &SandboxId) -> Result<UndoReport> {
    // Filters sit on the pod interfaces, which carry no marker: read them all,
    // except on podtap's own TAPs and bridges (their filters go with them).
    let now = execute::observe(nl, |l| !l.is_tap_or_bridge()).await?;
    let undo = decide::undo_by_markers(id, &now);
    Ok(execute::execute(nl, undo, true).await)
}

/// What is not as `plan` recorded it; empty when all is well.
pub async fn missing(nl: &Netlink, plan: &Plan, created: &[Created]) -> Result<Vec<String>> {
    let wired: Vec<u32> = plan
        .nics
        .iter()
        .filter(|n| n.tc.is_some())
        .flat_map(|n| {
            [
                n.pod.ifindex,
                crate::state::created_ifindex(created, &n.tap.name),
            ]
        })
        .collect();
    let now = execute::observe(nl, |l| wired.contains(&l.ifindex)).await?;
    Ok(decide::missing(plan, created, &now))
}

/// Open the netns a checkpoint recorded if it is still the same one
/// (`Ok(Ok(ns))`); say why there is nothing to undo when it is gone or
/// replaced (`Ok(Err(why))`). Any other failure (permission, fd limit, ...)
/// is an error and the checkpoint stays, since podtap's objects may still be there.
pub fn open_recorded(cp: &Checkpoint) -> Result<std::result::Result<NetNs, String>> {
    let path = Path::new(&cp.netns.path);
    match NetNs::open(path, true) {
        Ok(ns) if ns.identity() == (cp.netns.dev, cp.netns.inode) => Ok(Ok(ns)),
        Ok(ns) => Ok(Err(format!(
            "netns {} is now a different namespace (inode {} != recorded {}); left it untouched",
            cp.netns.path,
            ns.inode(),
            cp.netns.inode
        ))),
        Err(Error::NetnsMissing { .. }) | Err(Error::NotNetns { .. }) => Ok(Err(format!(
            "netns {} is gone; its virtual links went with it",
            cp.netns.path
        ))),
        Err(e) => Err(e),
    }
}
