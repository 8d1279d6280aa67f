//! Whether the netns a checkpoint recorded is still the one at its path,
//! by the full identity (`(dev, inode)` and cookie), for commands that act
//! on a finished attachment without a netlink connection (`exec`).

use std::path::Path;

use super::StateDir;
use crate::error::{Error, Result};
use crate::id::SandboxId;
use crate::kernel::netns::NetNs;

impl StateDir {
    /// Fail (exit 12) unless the netns recorded for `id` is the one its
    /// path names now: a pod restart can put a new netns at the path, and
    /// the kernel can give it the old one's inode number; the cookie tells
    /// them apart. Exit 14 without a checkpoint. Returns the netns so
    /// proven: act on this open file, never on the path again.
    pub fn prove_netns(&self, id: &SandboxId) -> Result<NetNs> {
        let cp = self.load(id)?.ok_or_else(|| Error::NotFound {
            id: id.to_string(),
            dir: self.path().to_path_buf(),
        })?;
        let recorded = cp.netns_id();
        // attach already applied the host-netns rule.
        let ns = NetNs::open(Path::new(&cp.netns.path), true)?;
        let now = ns.id()?;
        if recorded.matches(&now) {
            return Ok(ns);
        }
        Err(Error::CheckFailed {
            id: id.to_string(),
            problems: format!(
                "netns {} is now another namespace (inode {} dev {} cookie {:?}; attach recorded inode {} dev {} cookie {:?}): the pod netns was replaced; detach and attach again",
                cp.netns.path, now.inode, now.dev, now.cookie, recorded.inode, recorded.dev, recorded.cookie
            ),
        })
    }
}
