//! `podtap exec`: hand TAP fds to a VMM, or run a command inside the pod netns.
//! (Being written: see issue "VMM launchers".)

use crate::checkpoint::StateDir;
use crate::error::{Error, Result};

/// Which VMM's fd arguments to append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Vmm {
    Qemu,
    CloudHypervisor,
}

/// Run `argv` per the options; returns only on error (exec replaces the process).
pub fn exec(
    _id: &str,
    _state: &StateDir,
    _vmm: Option<Vmm>,
    _vhost: bool,
    _enter_netns: bool,
    _argv: &[String],
) -> Result<i32> {
    Err(Error::Invalid("exec: not implemented yet".into()))
}
