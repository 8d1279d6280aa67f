//! State dirs and temp dirs of a test's own, removed on drop.

use std::path::{Path, PathBuf};

use crate::run::unique;

/// A private state dir, removed on drop.
pub struct StateDir(pub PathBuf);

impl Default for StateDir {
    fn default() -> Self {
        Self::new()
    }
}

impl StateDir {
    /// A fresh path under the temp dir (not created: podtap makes it).
    pub fn new() -> Self {
        let p = std::env::temp_dir().join(unique("podtap-state-"));
        StateDir(p)
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A temp dir, created now and removed on drop (a [`StateDir`] that exists).
pub struct TempDir(StateDir);

impl Default for TempDir {
    fn default() -> Self {
        Self::new()
    }
}

impl TempDir {
    /// Create it.
    pub fn new() -> Self {
        let d = StateDir::new();
        std::fs::create_dir_all(&d.0).expect("create temp dir");
        TempDir(d)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.0 .0
    }
}

/// The checkpoint file of sandbox `id` in the state dir `state`.
pub fn checkpoint_path(state: &Path, id: &str) -> PathBuf {
    state.join(format!("{id}.json"))
}
