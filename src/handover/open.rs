//! Everything a VMM started by exec (or spawned) gets: every queue of every
//! TAP of a sandbox, vhost-net fds, kept across exec, and the arguments
//! that name them.

use std::os::fd::{AsRawFd, OwnedFd};

use super::args::{handover_args, Layout};
use super::queues;
use crate::error::{Error, Result};
use crate::kernel::netns::NetNs;
use crate::model::Description;

/// TAP queue fds (and `/dev/vhost-net` fds) opened for a VMM, without
/// close-on-exec, and the VMM arguments that name them.
#[derive(Debug)]
pub struct Handover {
    /// Append these to the VMM's argv.
    pub args: Vec<String>,
    /// Kept open for the child; closed on drop.
    pub(super) fds: Vec<OwnedFd>,
}

impl Handover {
    /// Close the fds in this process (after the VMM was spawned).
    pub fn close(self) {
        drop(self.fds);
    }
}

/// Open every TAP queue of `desc` inside its proven pod netns `ns`, plus
/// one `/dev/vhost-net` fd per queue when `vhost`, clear FD_CLOEXEC on them
/// and render the matching `layout` arguments.
pub(crate) fn open(
    id: &str,
    desc: &Description,
    ns: &NetNs,
    layout: Layout,
    vhost: bool,
) -> Result<Handover> {
    if vhost && layout != Layout::Qemu {
        return Err(Error::Invalid(
            "exec: --vhost is for QEMU (Cloud Hypervisor runs its own virtio-net backend)".into(),
        ));
    }
    let taps = queues::open_tap_fds(id, ns, desc)?;
    let vhosts = if vhost {
        queues::open_vhost_fds(&taps)?
    } else {
        Vec::new()
    };
    for fd in taps.iter().chain(&vhosts).flatten() {
        queues::inherit_across_exec(fd)?;
    }
    let args = handover_args(desc, layout, &raw(&taps), &raw(&vhosts))?;
    Ok(Handover {
        args,
        fds: taps.into_iter().chain(vhosts).flatten().collect(),
    })
}

fn raw(lists: &[Vec<OwnedFd>]) -> Vec<Vec<i32>> {
    lists
        .iter()
        .map(|fds| fds.iter().map(AsRawFd::as_raw_fd).collect())
        .collect()
}
