//! Proving the pod netns is the one attach recorded, before any fd is
//! opened in it.

use crate::error::Result;
use crate::kernel::netns::NetNs;
use crate::state::{SandboxId, StateDir};

/// The full identity (dev, inode and cookie) of `id`'s recorded netns
/// against the one at its path now ([`StateDir::prove_netns`]): a check
/// failure when it was replaced, not found without a checkpoint. The netns
/// returned is the very file proven: queues are opened through it, so the
/// path is never looked up again.
pub(crate) fn prove(state: &StateDir, id: &SandboxId) -> Result<NetNs> {
    // The cookie too: (dev, inode) alone can name a newer netns.
    state.proven_netns(id)
}
