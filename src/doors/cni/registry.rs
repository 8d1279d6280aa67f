//! Which checkpoints podtap's CNI plugin made: GC may only remove those.
//!
//! One small file per attachment in `<stateDir>/cni/<id>.json`, written
//! before attach touches the kernel and removed after DEL (or GC) detached
//! it. It records the network name (GC is per network), the container id,
//! the interface and the netns, so a corrupt checkpoint can still be cleaned.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::state::{read_entry, write_atomic, SandboxId, StateDir};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub network: String,
    #[serde(rename = "containerID")]
    pub container_id: String,
    pub ifname: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
}

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

    pub fn record(&self, id: &SandboxId, entry: &Entry) -> Result<()> {
        self.dir.ensure()?;
        let text = serde_json::to_vec(entry)
            .map_err(|e| Error::Invalid(format!("serialize CNI registry entry: {e}")))?;
        write_atomic(&self.dir.file(id), &text, 0o600)
    }

    /// The entry for `id`; `None` when absent or unreadable (a hint, never fatal).
    pub fn get(&self, id: &SandboxId) -> Option<Entry> {
        let text = read_entry(&self.dir.file(id)).ok()??;
        serde_json::from_str(&text).ok()
    }

    pub fn forget(&self, id: &SandboxId) -> Result<()> {
        self.dir.remove(id)
    }

    pub fn ids(&self) -> Result<Vec<SandboxId>> {
        self.dir.ids()
    }
}
