//! The fd handover: TAP (and macvtap) queue fds and vhost-net fds, opened
//! inside the pod netns they were proven to live in, passed to a VMM by exec
//! or by SCM_RIGHTS.
//!
//! A floor below the doors and `watch`, used by both (`podtap exec` and
//! `podtap demo` hand fds over by exec, `podtap watch` by SCM_RIGHTS to a
//! running VMM). It imports only `kernel`, `state`, `model`, `render` (the
//! pure fd argument layout) and `error`.
//!
//! | step | file |
//! |---|---|
//! | prove the netns is the recorded one (dev, inode, cookie) | `proof.rs` |
//! | open every queue of every TAP/macvtap, vhost-net fds | `queues.rs` |
//! | the VMM's fd arguments (`-netdev tap,fds=…`, `--net fd=[…]`) | `args.rs` |
//! | keep exactly those fds across exec, close_range the rest, drop root | `confine.rs` |
//! | exec the VMM (or a command in the pod netns) | `exec.rs` |
//! | send fds over a VMM socket, to a proven peer only | `scm.rs`, `peer.rs` |

mod args;
mod confine;
mod exec;
mod peer;
mod proof;
mod queues;
mod scm;

use std::os::fd::{AsRawFd, OwnedFd};

pub(crate) use args::handover_args;
pub(crate) use confine::RunAs;
pub(crate) use exec::{exec_in_netns, exec_vmm};
pub(crate) use proof::prove;
pub(crate) use queues::open_tap_fds;
pub(crate) use scm::send_with_fds;

use crate::error::{Error, Result};
use crate::model::Description;

/// Whose fd argument layout to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// QEMU: `-netdev tap,fds=…[,vhostfds=…]` + `-device …`.
    Qemu,
    /// Cloud Hypervisor: `--net fd=[…],…`.
    CloudHypervisor,
}

/// TAP queue fds (and `/dev/vhost-net` fds) opened for a VMM, without
/// close-on-exec, and the VMM arguments that name them.
#[derive(Debug)]
pub struct Handover {
    /// Append these to the VMM's argv.
    pub args: Vec<String>,
    /// Kept open for the child; closed on drop.
    fds: Vec<OwnedFd>,
}

impl Handover {
    /// Close the fds in this process (after the VMM was spawned).
    pub fn close(self) {
        drop(self.fds);
    }
}

/// Open every TAP queue of `desc` inside its (verified) pod netns, plus one
/// `/dev/vhost-net` fd per queue when `vhost`, clear FD_CLOEXEC on them and
/// render the matching `layout` arguments.
pub(crate) fn open(id: &str, desc: &Description, layout: Layout, vhost: bool) -> Result<Handover> {
    if vhost && layout != Layout::Qemu {
        return Err(Error::Invalid(
            "exec: --vhost is for QEMU (Cloud Hypervisor runs its own virtio-net backend)".into(),
        ));
    }
    let ns = proof::open_recorded_netns(id, desc)?;
    let taps = open_tap_fds(id, &ns, desc)?;
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
