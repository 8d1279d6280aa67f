//! Which checkpoints podtap's CNI plugin made: CNI GC may only remove those.
//!
//! One small file per attachment in `<stateDir>/cni/<id>.json`, written
//! before attach touches the kernel and removed after DEL (or GC) detached
//! it. It records the network name (GC is per network), the container id,
//! the interface and the netns, so a corrupt checkpoint can still be cleaned.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::write::read_entry;
use super::{SandboxId, StateDir};
use crate::error::{Error, Result};

/// What the CNI plugin records of one attachment it made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryEntry {
    /// The CNI network name (the conflist's `name`): GC is per network.
    pub network: String,
    /// The container id (`CNI_CONTAINERID`).
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// The interface (`CNI_IFNAME`).
    pub ifname: String,
    /// The netns path (`CNI_NETNS`), for a DEL that is not given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
}

/// The CNI registry beside a state dir's checkpoints (`<state dir>/cni/`).
#[derive(Debug, Clone)]
pub struct Registry {
    dir: StateDir,
}

impl Registry {
    /// The registry that belongs to the checkpoints in `state_dir`.
    pub fn new(state_dir: &Path) -> Self {
        Registry {
            dir: StateDir::new(state_dir.join("cni")),
        }
    }

    /// Record `entry` for `id` unless an entry exists: a repeated ADD, or one
    /// refused as a conflict, must not repoint the record of an attachment
    /// that already exists. Under the entry's own lock, so two doors never
    /// interleave their check and write.
    pub fn record_if_absent(&self, id: &SandboxId, entry: &RegistryEntry) -> Result<()> {
        self.dir.locked(id, || {
            if self.get(id).is_some() {
                return Ok(());
            }
            let text =
                serde_json::to_vec(entry).map_err(|e| Error::serialize("CNI registry entry", e))?;
            self.dir.write(id, &text)
        })
    }

    /// The entry for `id`; `None` when absent or unreadable (a hint, never fatal).
    pub fn get(&self, id: &SandboxId) -> Option<RegistryEntry> {
        let text = read_entry(&self.dir.file(id)).ok()??;
        serde_json::from_str(&text).ok()
    }

    /// Drop the entry for `id` (nothing to do, and no lock taken, when there is none).
    pub fn forget(&self, id: &SandboxId) -> Result<()> {
        if std::fs::symlink_metadata(self.dir.file(id)).is_err() {
            return Ok(());
        }
        self.dir.locked(id, || self.dir.remove(id))
    }

    /// How long ago the entry of `id` was written; `None` without one.
    pub fn age(&self, id: &SandboxId) -> Option<std::time::Duration> {
        let written = std::fs::symlink_metadata(self.dir.file(id))
            .ok()?
            .modified()
            .ok()?;
        Some(written.elapsed().unwrap_or_default())
    }

    /// The ids that have an entry.
    pub fn ids(&self) -> Result<Vec<SandboxId>> {
        self.dir.ids()
    }
}
