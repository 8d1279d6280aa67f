//! What a watch is told: which VMM to hotplug into.

use std::path::PathBuf;

/// Which VMM to hotplug into (neither: wire only, and report).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchOptions {
    /// QEMU's QMP socket (`-qmp unix:PATH,server=on,wait=off`).
    pub qmp: Option<PathBuf>,
    /// Cloud Hypervisor's `--api-socket`.
    pub cloud_hypervisor_api: Option<PathBuf>,
    /// Besides root, the uid a VMM socket's peer may run as to be sent TAP
    /// fds (SO_PEERCRED).
    pub vmm_uid: Option<u32>,
}
