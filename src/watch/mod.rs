//! Watch: follow an attachment's netns and wire the interfaces that arrive
//! after attach (a second network, a late Multus network), hotplugging each
//! into the running VM; undo (and unplug) the ones that leave.
//!
//! ```no_run
//! # fn main() -> podtap::error::Result<()> {
//! use std::path::PathBuf;
//! use podtap::state::{SandboxId, StateDir};
//! use podtap::watch::{watch, WatchOptions};
//!
//! let id: SandboxId = "pod-1234".parse()?;
//! let opts = WatchOptions { qmp: Some(PathBuf::from("/run/vm/qmp.sock")), ..Default::default() };
//! // Returns once `stopper.stop()` is called (from another thread) or the
//! // attachment is detached.
//! let stopper = podtap::watch::Stopper::new()?;
//! watch(&id, &StateDir::new("/run/podtap"), &opts, &stopper, &mut |event| {
//!     println!("{}", serde_json::to_string(event).unwrap_or_default());
//! })?;
//! # Ok(())
//! # }
//! ```
//!
//! How it waits: on a netlink subscription inside the pod netns (links,
//! addresses, routes), on its FIFO in the netns's news directory (saves and
//! removals of the checkpoints that record this netns: detach, other
//! attachments of the netns; `state::News`), on what tells it the pod's
//! holder let go (a pidfd, or mount-table changes: `gone.rs`), and on a
//! signalfd for SIGTERM/SIGINT. The one timer: the backoff of a VMM call
//! (or a round) that failed (and the pod-deleted check's tick, only for a
//! holder that signals nothing). At rest it runs no code. A burst of
//! announcements (a veth moved in, renamed, addressed, brought up) is let
//! settle for [`SETTLE`] and then handled as one round. Each round compares
//! the netns with the checkpoint under the same locks attach takes, so
//! rounds are idempotent and a restarted watch picks up where the last one
//! stopped.
//!
//! The files, by concern. Each imports only files listed after it (and the
//! floors below `watch`: `apply::late`, `handover`, `state`, `kernel`,
//! `model`), so the arrows all point down the table:
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | the entry point, the options, and which VMM client they name |
//! | `watcher.rs` | the watcher's state, its loop and one round |
//! | `report.rs` | the events a round announces |
//! | `hotplug.rs` | putting the VMM in step with the checkpoint |
//! | `wanted.rs` | the NICs the VMM should have; plugging one |
//! | `sync.rs` | the checkpoint brought up to date with the netns, under the locks |
//! | `siblings.rs` | the other attachments in the netns, and adoption |
//! | `wakeup.rs` | the caller's stop, netlink and news wakeups, settling |
//! | `gone.rs` | noticing the pod was deleted |
//! | `backoff.rs` | what failed and when to try it again |
//! | `qmp.rs`, `ch_api.rs` | the VMM clients (QEMU QMP, Cloud Hypervisor API) |
//! | `qmp_session.rs` | one QMP connection, its replies bounded |
//! | `vmm.rs` | the one interface the clients implement (`VmmClient`), and the NIC they get |
//! | `bounded.rs` | VMM replies capped in size and time |
//! | `event.rs` | the events |
//!
//! A new VMM client is a file beside `qmp.rs` that implements `vmm.rs`'s
//! trait, and one line in `choose` (`mod.rs`).
//!
//! TAP fds are opened and sent (to a peer proven by SO_PEERCRED) by the
//! `handover` floor, which `podtap exec` uses too.

mod backoff;
mod bounded;
mod ch_api;
mod event;
mod gone;
mod hotplug;
mod qmp;
mod qmp_session;
mod report;
mod siblings;
mod sync;
mod vmm;
mod wakeup;
mod wanted;
mod watcher;

pub use event::Event;
pub use wakeup::SETTLE;

use std::path::PathBuf;

use crate::error::{Error, Input, Result};
use crate::state::{SandboxId, StateDir};
use ch_api::CloudHypervisorApi;
use qmp::QmpVmm;
use vmm::VmmClient;
use watcher::Watcher;

/// Follow sandbox `id` until `stop` says so, until it is detached, or
/// until its pod netns is gone ([`Error::PodDeleted`], see `gone.rs`), calling `emit` for
/// every [`Event`]. Blocks the calling thread. The watch touches no signal
/// disposition or mask: its caller decides what stops it (the CLI blocks
/// SIGTERM and SIGINT and passes a signalfd; a library caller a
/// [`Stopper`]).
///
/// Fails up front when there is no finished attachment for `id`
/// ([`Error::NotFound`], [`Error::CheckFailed`]), its netns is gone
/// ([`Error::NetnsMissing`]), or another watch follows it ([`Error::Busy`]).
pub fn watch(
    id: &SandboxId,
    state: &StateDir,
    opts: &WatchOptions,
    stop: &dyn Stop,
    emit: &mut dyn FnMut(&Event),
) -> Result<()> {
    let vmm = choose(opts)?;
    Watcher::start(id, state, vmm, opts.table_answer_limit).and_then(|mut w| {
        let serving = opts
            .serve
            .then(|| crate::serve::Serving::start(state, id, opts.table_answer_limit))
            .transpose()?;
        let result = w.run(stop, emit);
        w.release();
        drop(serving);
        result
    })
}

pub use crate::stop::{Stop, Stopper};

/// Which VMM to hotplug into (neither: wire only, and report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchOptions {
    /// QEMU's QMP socket (`-qmp unix:PATH,server=on,wait=off`).
    pub qmp: Option<PathBuf>,
    /// Cloud Hypervisor's `--api-socket`.
    pub cloud_hypervisor_api: Option<PathBuf>,
    /// Besides root, the uid a VMM socket's peer may run as to be sent TAP
    /// fds (SO_PEERCRED).
    pub vmm_uid: Option<u32>,
    /// The most read of one dump of the pod's tables
    /// ([`crate::attach::TABLE_ANSWER_LIMIT`] by default).
    pub table_answer_limit: usize,
    /// Also serve the attachment's served NICs (DHCP, router solicitations),
    /// the ones it hotplugs too, on a thread of its own: for a node without
    /// `podtap serve` ([`crate::serve::daemon`]).
    pub serve: bool,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            qmp: None,
            cloud_hypervisor_api: None,
            vmm_uid: None,
            table_answer_limit: crate::plan::TABLE_ANSWER_LIMIT,
            serve: false,
        }
    }
}

/// The VMM client `opts` names, if one (naming both is an error). Above
/// the clients: it imports them, they never import it.
fn choose(opts: &WatchOptions) -> Result<Option<Box<dyn VmmClient>>> {
    match (&opts.qmp, &opts.cloud_hypervisor_api) {
        (Some(_), Some(_)) => Err(Error::invalid(
            Input::VmmSocket,
            "a QMP socket or a Cloud Hypervisor API socket, not both",
        )),
        (Some(q), None) => Ok(Some(Box::new(QmpVmm::new(q, opts.vmm_uid)))),
        (None, Some(c)) => Ok(Some(Box::new(CloudHypervisorApi::new(c, opts.vmm_uid)))),
        (None, None) => Ok(None),
    }
}
