//! Sync with the kernel: bring the checkpoint up to date with the netns
//! under the locks attach takes (late NICs built or undone by
//! `apply::late`), so each round is idempotent and a restarted watch picks
//! up where the last one stopped.

use std::collections::{BTreeMap, BTreeSet};

use super::siblings::{adopt, siblings};
use crate::apply::late::{self, Change};
use crate::error::{Error, Result};
use crate::kernel::netlink::Netlink;
use crate::kernel::netns::NetNs;
use crate::state::{Checkpoint, Phase, SandboxId, StateDir, LOCK_TIMEOUT};

/// A round's checkpoint, what changed, and the other attachments of the netns.
pub(super) type Reconciled = (Checkpoint, Vec<Change>, Vec<(SandboxId, Checkpoint)>);

/// `id`'s checkpoint brought up to date with `ns`, and what changed; `None`
/// when it is gone or now records another netns (detached, re-attached).
/// `first`: also undo what a watch that died mid-add left. `refused`:
/// interfaces not tried again; `boot_siblings`: see `siblings::adopt`. The
/// other attachments of the netns are read once, here, for the round.
pub(super) fn reconcile(
    (state, id, ns, table_answer_limit): (&StateDir, &SandboxId, &NetNs, usize),
    refused: &BTreeMap<u32, String>,
    boot_siblings: &mut BTreeSet<(String, u32)>,
    first: bool,
) -> Result<Option<Reconciled>> {
    state.locked(id, || {
        let Some(mut cp) = state.load(id)? else {
            return Ok(None);
        };
        if (cp.netns.dev, cp.netns.inode) != ns.identity() || cp.phase() != Phase::Complete {
            return Ok(None);
        }
        let netns_lock = ns.lock(id.as_str(), LOCK_TIMEOUT)?;
        let others = siblings(state, id, &cp.netns_id());
        let round = Round {
            state,
            ns,
            refused,
            first,
            table_answer_limit,
        };
        let result = round.run(&mut cp, &others);
        let adopted =
            result.as_ref().is_ok_and(Option::is_some) && adopt(&others, boot_siblings, &mut cp);
        drop(netns_lock);
        let result = result?;
        if adopted {
            state.save(&cp)?;
        }
        Ok(result.map(|changes| (cp, changes, others)))
    })
}

/// One round's kernel work on a loaded checkpoint.
struct Round<'a> {
    state: &'a StateDir,
    ns: &'a NetNs,
    refused: &'a BTreeMap<u32, String>,
    first: bool,
    table_answer_limit: usize,
}

impl Round<'_> {
    /// Bring `cp` in step with the netns (`None`: the netns is another one
    /// now); `others`' links are not the pod's.
    fn run(
        &self,
        cp: &mut Checkpoint,
        others: &[(SandboxId, Checkpoint)],
    ) -> Result<Option<Vec<Change>>> {
        let mut nl = Netlink::connect(self.ns)?;
        nl.set_table_answer_limit(self.table_answer_limit);
        if !cp.is_netns(self.ns.identity(), nl.cookie) {
            return Ok(None);
        }
        if self.first {
            late::recover(&nl, self.state, cp)?;
        }
        let foreign: BTreeSet<u32> = others
            .iter()
            .flat_map(|(_, other)| other.created.iter().map(|c| c.ifindex))
            .collect();
        let changes = late::reconcile(self.ns, &nl, self.state, cp, self.refused, &foreign)?;
        Ok(Some(changes))
    }
}

/// The finished checkpoint of `id`.
pub(super) fn finished(state: &StateDir, id: &SandboxId) -> Result<Checkpoint> {
    let cp = state.load(id)?.ok_or_else(|| Error::NotFound {
        id: id.to_string(),
        dir: state.path().into(),
    })?;
    if cp.phase() != Phase::Complete || cp.description().is_none() {
        return Err(Error::CheckFailed {
            id: id.to_string(),
            problems: vec!["attach did not finish (run detach, then attach again)".into()],
        });
    }
    Ok(cp)
}
