//! Whether the netns a checkpoint recorded is still the one at its path,
//! by the full identity (`(dev, inode)` and cookie), for commands that act
//! on a finished attachment without a netlink connection (`exec`).

use std::path::Path;

use super::{Checkpoint, StateDir};
use crate::error::{Error, Result};
use crate::id::SandboxId;
use crate::kernel::netns::NetNs;
use crate::model::Description;

impl StateDir {
    /// Fail ([`Error::CheckFailed`]) unless the netns recorded for `id` is the one its
    /// path names now: a pod restart can put a new netns at the path, and
    /// the kernel can give it the old one's inode number; the cookie tells
    /// them apart. [`Error::NotFound`] without a checkpoint. Returns the netns so
    /// proven: act on this open file, never on the path again.
    pub fn prove_netns(&self, id: &SandboxId) -> Result<crate::netns::Netns> {
        self.proven_netns(id).map(crate::netns::Netns)
    }

    /// [`StateDir::prove_netns`], as the kernel layer's handle.
    pub(crate) fn proven_netns(&self, id: &SandboxId) -> Result<NetNs> {
        let cp = self.load(id)?.ok_or_else(|| Error::NotFound {
            id: id.to_string(),
            dir: self.path().to_path_buf(),
        })?;
        prove(id, &cp)
    }

    /// The description a finished attach recorded for `id`, with the pod's
    /// routes, neighbours and rules read live from its netns: what a
    /// repeated attach prints (a neighbour that was recorded keeps its
    /// recorded state; podtap's links, this attachment's and others', have
    /// no routes or neighbours in it). The checkpoint is read once, and the
    /// netns proven from that same copy (dev, inode and cookie) before it
    /// is dumped. [`StateDir::description`] reads no kernel state and has
    /// no routes or rules.
    ///
    /// [`Error::NotFound`] without a checkpoint; [`Error::CheckFailed`] when
    /// attach did not finish or the path names another netns now;
    /// [`Error::NetnsMissing`] when the netns is gone, [`Error::Permission`]
    /// when it may not be opened, [`Error::Kernel`] when the dump fails.
    /// Blocks the calling thread.
    pub fn description_live(
        &self,
        id: &SandboxId,
        table_answer_limit: usize,
    ) -> Result<Description> {
        let cp = self.load(id)?.ok_or_else(|| Error::NotFound {
            id: id.to_string(),
            dir: self.path().to_path_buf(),
        })?;
        if cp.description().is_none() {
            return finished(id, cp); // the error an unfinished attach gives
        }
        let ns = prove(id, &cp)?;
        let desc = finished(id, cp)?;
        let live = crate::scan::pod_view_ns(&ns, table_answer_limit)?;
        Ok(desc.with_live_tables(live))
    }
}

/// The description of a finished checkpoint `cp`.
pub(super) fn finished(id: &SandboxId, cp: Checkpoint) -> Result<Description> {
    cp.into_description().ok_or_else(|| Error::CheckFailed {
        id: id.to_string(),
        problems: vec!["attach did not finish (run detach, then attach again)".into()],
    })
}

/// The netns `cp` recorded, opened and proven to be the one at its path now.
fn prove(id: &SandboxId, cp: &Checkpoint) -> Result<NetNs> {
    let recorded = cp.netns_id();
    // attach already applied the host-netns rule.
    let ns = NetNs::open(Path::new(&cp.netns.path), true)?;
    let now = ns.id()?;
    if recorded.matches(&now) {
        return Ok(ns);
    }
    Err(Error::CheckFailed {
            id: id.to_string(),
            problems: vec![format!(
                "netns {} is now another namespace (inode {} dev {} cookie {:?}; attach recorded inode {} dev {} cookie {:?}): the pod netns was replaced; detach and attach again",
                cp.netns.path, now.inode, now.dev, now.cookie, recorded.inode, recorded.dev, recorded.cookie
            )],
        })
}
