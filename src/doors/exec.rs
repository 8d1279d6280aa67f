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
//! [`crate::handover`].
//!
//! Exit codes: on success the process *is* the VMM, so its exit status is the
//! VMM's. Before the exec, podtap's documented codes apply (14 no checkpoint,
//! 3 netns gone, 12 the netns path now names another netns (or a TAP or
//! macvtap node is not the recorded one any more), 13 invalid
//! options such as `--vhost` without `/dev/vhost-net`, 10 a TAP queue could
//! not be opened, 15 the renderer refused). If the exec itself fails (command
//! not found, not executable), podtap prints one line and exits 1.

use crate::error::{Error, Result};
use crate::handover::{self, Handover, Layout, RunAs};
use crate::model::Description;
use crate::state::{SandboxId, StateDir};

/// Which VMM's fd arguments to append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Vmm {
    Qemu,
    CloudHypervisor,
}

impl From<Vmm> for Layout {
    fn from(vmm: Vmm) -> Layout {
        match vmm {
            Vmm::Qemu => Layout::Qemu,
            Vmm::CloudHypervisor => Layout::CloudHypervisor,
        }
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
    let desc = state.description(id)?;
    let ns = handover::prove(state, id)?;
    let id = id.as_str();
    if enter_netns {
        if vmm.is_some() || vhost {
            return Err(Error::Invalid(
                "exec: --enter-netns runs the command unchanged; it takes no --vmm or --vhost"
                    .into(),
            ));
        }
        return Err(handover::exec_in_netns(&ns, argv, user));
    }
    let vmm = vmm.ok_or_else(|| {
        Error::Invalid("exec: give --vmm qemu|cloud-hypervisor, or --enter-netns".into())
    })?;
    let handover = handover::open(id, &desc, &ns, vmm.into(), vhost)?;
    Err(handover::exec_vmm(argv, &handover, user))
}

/// Open the fds of `desc` for `vmm` to be handed over by a spawn (the demo).
pub fn open_handover(id: &str, desc: &Description, vmm: Vmm, vhost: bool) -> Result<Handover> {
    let ns = handover::open_recorded_netns(id, desc)?;
    handover::open(id, desc, &ns, vmm.into(), vhost)
}
