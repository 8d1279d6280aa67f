//! STATUS (CNI 1.1): is this node able to attach?
//!
//! Two probes, both by trying rather than guessing from module lists (a
//! built-in tc action shows in neither /proc/modules nor /sys/module):
//! open `/dev/net/tun` read-write, and in a scratch network namespace that
//! dies with the probe, add an ingress qdisc and a u32 + mirred redirect on
//! `lo`, exactly as tc wiring does.

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::{code, CniError};
use crate::kernel::netlink::Netlink;
use crate::kernel::netns::NetNs;
use crate::kernel::tc;

pub fn probe() -> Result<(), CniError> {
    probe_tun()?;
    probe_tc()
}

fn unavailable(what: &str, why: impl ToString) -> CniError {
    CniError::new(code::NOT_AVAILABLE, format!("plugin not available: {what}"))
        .details(why.to_string())
}

fn probe_tun() -> Result<(), CniError> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open("/dev/net/tun")
        .map(drop)
        .map_err(|e| unavailable("/dev/net/tun is not usable", e))
}

fn probe_tc() -> Result<(), CniError> {
    let ns = scratch_netns().map_err(|e| unavailable("cannot make a scratch netns", e))?;
    crate::kernel::runtime::block_on(async {
        let nl = Netlink::connect(&ns)?;
        tc::add_ingress_qdisc(&nl.handle, 1)
            .await
            .map_err(|e| nl.err("add ingress qdisc", "lo", e))?;
        tc::add_redirect(&nl.handle, 1, 1, crate::plan::TC_PRIO_BASE)
            .await
            .map_err(|e| nl.err("add u32 mirred redirect", "lo", e))?;
        Ok(())
    })
    .map_err(|e| unavailable("tc ingress/u32/mirred do not work", e))
}

/// A new, empty netns held only by the returned handle.
fn scratch_netns() -> Result<NetNs, String> {
    let joined = std::thread::scope(|s| {
        s.spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| format!("unshare(CLONE_NEWNET): {e}"))?;
            NetNs::open(Path::new("/proc/thread-self/ns/net"), true).map_err(|e| e.to_string())
        })
        .join()
    });
    joined.unwrap_or_else(|_| Err("probe thread panicked".into()))
}
