//! Collect what is stale in a state dir: checkpoints whose netns is gone
//! (a pod deleted while podtap was not chained, a DEL that never came) and
//! CNI registry entries without a checkpoint (an ADD killed before it
//! attached). A node's podtap runs it at start and now and then
//! (`podtap cni-install --wait`, `podtap serve`).
//!
//! It removes only what it proves stale, each under the id's lock: a
//! checkpoint only once its netns is found nowhere on the node (the
//! rule teardown goes by: no pinned file, no root-owned process inside it
//! or with an fd on it; the recorded path may name another netns now),
//! a registry entry only when it is older than [`REGISTRY_GRACE`] (an ADD
//! records it just before it attaches). A live attachment, a corrupt
//! checkpoint and a stranger's file are left alone. Seeing every holder of
//! a netns needs the node's processes: in a PID namespace of its own the
//! sweep refuses to run.
//!
//! ```no_run
//! # fn main() -> podtap::error::Result<()> {
//! let swept = podtap::sweep::sweep(&podtap::state::StateDir::new("/run/podtap"))?;
//! for (id, why) in &swept.detached {
//!     println!("{id}: {why}");
//! }
//! # Ok(())
//! # }
//! ```

use std::os::fd::AsRawFd;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::state::{Registry, SandboxId, StateDir};
use crate::teardown;

/// How old a registry entry without a checkpoint must be before it goes.
pub const REGISTRY_GRACE: Duration = Duration::from_secs(60);

/// What a sweep removed and left.
#[derive(Debug, Default)]
pub struct Swept {
    /// Checkpoints of a gone netns, detached (and their registry entries
    /// forgotten), with why they were stale.
    pub detached: Vec<(SandboxId, String)>,
    /// Registry entries that had no checkpoint.
    pub forgotten: Vec<SandboxId>,
    /// Checkpoints left because they cannot be read, with why.
    pub unreadable: Vec<(SandboxId, String)>,
}

/// Sweep `state` (see the module). Fails only when the state dir cannot be
/// listed or trusted, or this process cannot see the node's processes.
pub fn sweep(state: &StateDir) -> Result<Swept> {
    sees_the_node()?;
    let mut swept = Swept::default();
    let registry = Registry::new(state.path());
    for id in state.ids()? {
        match stale(state, &id) {
            Ok(Some(why)) => match crate::detach::detach(&id, state, None) {
                Ok(_) => {
                    registry.forget(&id)?;
                    swept.detached.push((id, why));
                }
                Err(e) => swept.unreadable.push((id, e.to_string())),
            },
            Ok(None) => {}
            Err(e) => swept.unreadable.push((id, e.to_string())),
        }
    }
    for id in registry.ids()? {
        let recorded = state.load_for_teardown(&id).map(|cp| cp.is_some());
        let old = registry.age(&id).is_some_and(|age| age >= REGISTRY_GRACE);
        if matches!(recorded, Ok(false)) && old {
            registry.forget(&id)?;
            swept.forgotten.push(id);
        }
    }
    Ok(swept)
}

/// Why `id`'s checkpoint is stale (its netns is gone), or `None` when it
/// is live.
fn stale(state: &StateDir, id: &SandboxId) -> Result<Option<String>> {
    let Some(cp) = state.load_for_teardown(id)? else {
        return Ok(None);
    };
    Ok(teardown::open_recorded(&cp, &state.file(id), &[])?.err())
}

/// Fail unless this process is in the node's own PID namespace, where it
/// sees every process that could hold a netns. `NS_GET_PARENT` on the
/// initial one fails with EPERM (it has no parent).
fn sees_the_node() -> Result<()> {
    let path = "/proc/self/ns/pid";
    let ns = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
    // SAFETY: NS_GET_PARENT takes no argument; a parent's fd it returns is
    // closed at once.
    let parent = unsafe { libc::ioctl(ns.as_raw_fd(), libc::NS_GET_PARENT) };
    if parent < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) {
        return Ok(());
    }
    if parent >= 0 {
        // SAFETY: `parent` is a fresh fd this function owns.
        unsafe { libc::close(parent) };
    }
    Err(Error::Permission {
        action: "sweep: see every process of the node from",
        path: path.into(),
        source: std::io::Error::other("a PID namespace of its own (run it in the node's)"),
    })
}
