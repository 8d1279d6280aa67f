//! `podtap exec`: hand TAP fds to a VMM, or run a command inside the pod netns.
//!
//! Two ways to start a VMM on the TAPs `attach` built for sandbox `ID`:
//!
//! - `--vmm qemu|cloud-hypervisor` (fd handover): podtap opens every queue of
//!   every TAP inside the pod netns (a TAP fd keeps its netns for life; a
//!   macvtap's queues are opens of its `tap.device` node), plus
//!   one `/dev/vhost-net` fd per queue with `--vhost` (QEMU only), leaves those
//!   fds open across exec, appends the matching fd arguments to `argv`
//!   (`-netdev tap,fds=…[,vhostfds=…]` + `-device …` for QEMU, `--net fd=[…],…`
//!   for Cloud Hypervisor) and execs `argv` in the caller's own netns. The
//!   VMM then needs neither the pod netns nor the right to open
//!   `/dev/net/tun`.
//! - `--enter-netns`: exec `argv` unchanged inside the pod netns, for VMMs
//!   that open TAPs by name (Firecracker and its jailer, QEMU `ifname=`).
//!
//! Either way the command inherits stdio and the handed-over fds only
//! (everything else podtap inherited is closed across the exec), and with
//! `--user UID[:GID]` it runs as that user with no capabilities
//! (`handover/confine.rs`).
//!
//! This door parses and checks the options; the fd handover itself (the
//! netns proof, the queues, the fd arguments, the exec) is
//! [`podtap::handover`].
//!
//! Exit codes: on success the process *is* the VMM, so its exit status is the
//! VMM's. Before the exec, podtap's documented codes apply (14 no checkpoint,
//! 3 netns gone, 12 the netns path now names another netns (or a TAP or
//! macvtap node is not the recorded one any more), 13 invalid
//! options such as `--vhost` without `/dev/vhost-net`, 10 a TAP queue could
//! not be opened, 15 the renderer refused). If the exec itself fails (command
//! not found, not executable), podtap prints one line and exits 1.

mod confine;
mod run;

use std::os::fd::{AsFd, BorrowedFd};

use nix::fcntl::{fcntl, FcntlArg, FdFlag};

pub use confine::RunAs;

use crate::error::{Error, Result};
use podtap::handover::{self, Handover, HandoverOptions};
use podtap::state::{SandboxId, StateDir};

/// Which VMM's fd arguments to append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Vmm {
    Qemu,
    CloudHypervisor,
}

impl Vmm {
    /// The arguments that name `handover`'s fds.
    pub fn args(self, handover: &Handover) -> Result<Vec<String>> {
        Ok(match self {
            Vmm::Qemu => handover.qemu_args()?,
            Vmm::CloudHypervisor => handover.cloud_hypervisor_args()?,
        })
    }
}

/// Run `argv` per the options, as `user` when given (with no capability and
/// only the handed-over fds); returns only on error (exec replaces the
/// process).
pub fn exec(
    id: &SandboxId,
    state: &StateDir,
    (vmm, vhost, enter_netns): (Option<Vmm>, bool, bool),
    user: Option<RunAs>,
    argv: &[String],
) -> Result<i32> {
    if argv.is_empty() {
        return Err(Error::Invalid("exec: no command given after --".into()));
    }
    if enter_netns {
        if vmm.is_some() || vhost {
            return Err(Error::Invalid(
                "exec: --enter-netns runs the command unchanged; it takes no --vmm or --vhost"
                    .into(),
            ));
        }
        let ns = state.prove_netns(id)?;
        return Err(run::exec_in_netns(&ns, argv, user));
    }
    let vmm = vmm.ok_or_else(|| {
        Error::Invalid("exec: give --vmm qemu|cloud-hypervisor, or --enter-netns".into())
    })?;
    if vhost && vmm != Vmm::Qemu {
        return Err(Error::Invalid(
            "exec: --vhost is for QEMU (Cloud Hypervisor runs its own virtio-net backend)".into(),
        ));
    }
    let handover = handover::open(id, state, &HandoverOptions { vhost_net: vhost })?;
    let args = vmm.args(&handover)?;
    let keep: Vec<BorrowedFd<'_>> = handover.fds().collect();
    Err(run::exec_vmm(argv, &args, &keep, user))
}

/// Clear FD_CLOEXEC on `fds`, so a child this process spawns inherits them
/// (the demo's QEMU).
pub fn inheritable<'a>(fds: impl Iterator<Item = BorrowedFd<'a>>) -> Result<()> {
    for fd in fds {
        fcntl(fd.as_fd(), FcntlArg::F_SETFD(FdFlag::empty()))
            .map_err(|e| Error::io("clear FD_CLOEXEC on", "a TAP queue fd", e.into()))?;
    }
    Ok(())
}
