//! STATUS (CNI 1.1): can this node attach in the configured mode?
//!
//! containerd runs STATUS on every CRI status poll and turns an error into
//! NetworkReady=false, so a probe that asks for more than the mode needs
//! makes a node NotReady for nothing: macvtap needs no `/dev/net/tun`, and
//! only tc mode needs the u32 filter and mirred action.
//!
//! Each probe tries rather than guesses from module lists (a built-in tc
//! action shows in neither /proc/modules nor /sys/module): it opens
//! `/dev/net/tun`, or makes what the mode makes in a scratch network
//! namespace that dies with the probe.

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rtnetlink::packet_route::link::{LinkMessage, MacVtapMode};
use rtnetlink::{LinkBridge, LinkMacVtap, LinkVeth};

use super::config::NetConf;
use super::{code, CniError};
use crate::error::Error;
use crate::kernel::links;
use crate::kernel::netlink::Netlink;
use crate::kernel::netns::NetNs;
use crate::kernel::tc;
use crate::model::Wiring;

pub fn probe(conf: &NetConf) -> Result<(), CniError> {
    match conf.node_mode()? {
        Wiring::Tc => {
            probe_tun()?;
            in_scratch_netns("tc ingress/u32/mirred do not work", tc_redirect)
        }
        Wiring::Bridge => {
            probe_tun()?;
            in_scratch_netns("Linux bridges cannot be made", bridge)
        }
        Wiring::Macvtap => in_scratch_netns("macvtap links cannot be made", macvtap),
    }
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

/// Run `make` on a session in a new, empty netns; `what` names the failure.
fn in_scratch_netns(
    what: &str,
    make: impl FnOnce(&Netlink) -> crate::error::Result<()>,
) -> Result<(), CniError> {
    let ns = scratch_netns().map_err(|e| unavailable("cannot make a scratch netns", e))?;
    Netlink::connect(&ns)
        .and_then(|nl| make(&nl))
        .map_err(|e| unavailable(what, e))
}

/// An ingress qdisc and a u32 + mirred redirect on `lo`, as tc wiring makes them.
fn tc_redirect(nl: &Netlink) -> crate::error::Result<()> {
    tc::add_ingress_qdisc(&nl.batch, 1).map_err(|e| nl.err("add ingress qdisc", "lo", e))?;
    tc::add_redirect(&nl.batch, 1, 1, crate::plan::TC_PRIO_BASE)
        .map_err(|e| nl.err("add u32 mirred redirect", "lo", e))
}

fn bridge(nl: &Netlink) -> crate::error::Result<()> {
    add_link(nl, LinkBridge::new("podtap-probe").build(), "podtap-probe")
}

/// A passthru macvtap on one end of a veth pair, as macvtap wiring makes it.
fn macvtap(nl: &Netlink) -> crate::error::Result<()> {
    add_link(nl, LinkVeth::new("probe0", "probe1").build(), "probe0")?;
    let lower = links::index_of(&nl.batch, "probe0")
        .map_err(|e| nl.err("list links", "probe0", e))?
        .ok_or_else(|| Error::Invalid("probe0: not listed after creation".into()))?;
    let msg = LinkMacVtap::new("probe-mvt", lower, MacVtapMode::Passthrough).build();
    add_link(nl, msg, "probe-mvt")
}

fn add_link(nl: &Netlink, msg: LinkMessage, name: &str) -> crate::error::Result<()> {
    links::add(&nl.batch, msg).map_err(|e| nl.err("create", name, e))
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
