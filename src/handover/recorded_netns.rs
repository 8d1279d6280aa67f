//! Proving the pod netns is the one attach recorded, before any fd is
//! opened in it or any command enters it.

use std::os::fd::AsFd;
use std::path::Path;

use nix::sched::{setns, CloneFlags};

use crate::error::{Error, Result};
use crate::kernel::netns::NetNs;
use crate::model::Description;
use crate::state::{SandboxId, StateDir};

/// The full identity (dev, inode and cookie) of `id`'s recorded netns
/// against the one at its path now ([`StateDir::prove_netns`]): exit 12 when
/// it was replaced, 14 without a checkpoint. The netns returned is the very
/// file proven: queues are opened and commands enter through it, so the
/// path is never looked up again.
pub(crate) fn prove(state: &StateDir, id: &SandboxId) -> Result<NetNs> {
    // The cookie too: (dev, inode) alone can name a newer netns.
    state.prove_netns(id)
}

/// Open the netns the description names and make sure it is still the one
/// attach recorded (a pod restart can reuse the path for a new netns).
pub(crate) fn open_recorded_netns(id: &str, desc: &Description) -> Result<NetNs> {
    let path = Path::new(&desc.netns.path);
    // attach already applied the host-netns rule; the recorded identity is checked below.
    let ns = NetNs::open(path, true)?;
    check_identity(id, desc, ns.identity())?;
    Ok(ns)
}

fn check_identity(id: &str, desc: &Description, (dev, inode): (u64, u64)) -> Result<()> {
    if (dev, inode) == (desc.netns.dev, desc.netns.inode) {
        return Ok(());
    }
    Err(Error::CheckFailed {
        id: id.into(),
        problems: format!(
            "netns {} is now inode {inode} dev {dev}, but attach recorded inode {} dev {} \
             (the pod netns was replaced; detach and attach again)",
            desc.netns.path, desc.netns.inode, desc.netns.dev
        ),
    })
}

/// Move this process into the proven pod netns `ns` before exec.
///
/// `NetNs::run` (a fresh thread) is the rule everywhere else, because
/// `setns(2)` changes only the calling thread. Here the calling thread is
/// the one about to exec: `podtap exec` starts no other
/// thread before this point, and the exec replaces the whole process with
/// the command, which then runs entirely in the pod netns.
pub(super) fn enter(ns: &NetNs) -> Result<()> {
    let fd = ns.fd_clone()?;
    setns(fd.as_fd(), CloneFlags::CLONE_NEWNET)
        .map_err(|e| Error::kernel(&ns.display(), "enter netns", "", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_netns_is_refused() {
        let desc = super::super::args::tests::desc_with_taps();
        assert!(check_identity("x", &desc, (4, 4026532000)).is_ok());
        let err = check_identity("x", &desc, (4, 4026532001)).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::exit::CHECK_FAILED);
        assert!(err.to_string().contains("replaced"), "{err}");
    }
}
