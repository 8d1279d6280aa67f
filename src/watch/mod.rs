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
//! // Returns on SIGTERM/SIGINT or once the attachment is detached.
//! watch(&id, &StateDir::new("/run/podtap"), &opts, &mut |event| {
//!     println!("{}", serde_json::to_string(event).unwrap_or_default());
//! })?;
//! # Ok(())
//! # }
//! ```
//!
//! How it waits: on a netlink subscription inside the pod netns (links,
//! addresses, routes), on inotify for checkpoints that come and go in the
//! state dir (detach; other attachments of the netns), and on a signalfd for
//! SIGTERM/SIGINT. The timers: the backoff of a VMM call (or a round) that
//! failed, and the pod-deleted check (`gone.rs`). A burst of
//! announcements (a veth moved in, renamed, addressed, brought up) is let
//! settle for [`SETTLE`] and then handled as one round. Each round compares
//! the netns with the checkpoint under the same locks attach takes, so
//! rounds are idempotent and a restarted watch picks up where the last one
//! stopped.
//!
//! The files, by concern (each imports only the ones listed after it, and
//! the floors below `watch`: `apply::late`, `handover`, `state`, `kernel`):
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | the entry point, the watcher's state and its loop |
//! | `round.rs` | one round, and the events it announces |
//! | `hotplug.rs` | putting the VMM in step with the checkpoint |
//! | `wanted.rs` | the NICs the VMM should have; plugging one |
//! | `sync.rs` | the checkpoint brought up to date with the netns, under the locks |
//! | `siblings.rs` | the other attachments in the netns, and adoption |
//! | `wakeup.rs` | signals, netlink and state-dir wakeups, settling |
//! | `backoff.rs` | what failed and when to try it again |
//! | `gone.rs` | noticing the pod was deleted |
//! | `choose.rs` | which VMM client, from the options |
//! | `qmp.rs`, `ch_api.rs` | the VMM clients (QEMU QMP, Cloud Hypervisor API) |
//! | `vmm.rs` | the one interface the clients implement, and the NIC they get |
//! | `bounded.rs` | VMM replies capped in size and time |
//! | `event.rs` | the events |
//!
//! TAP fds are opened and sent (to a peer proven by SO_PEERCRED) by the
//! `handover` floor, which `podtap exec` uses too.

mod backoff;
mod bounded;
mod ch_api;
mod choose;
mod event;
mod gone;
mod hotplug;
mod qmp;
mod round;
mod siblings;
mod sync;
mod vmm;
mod wakeup;
mod wanted;

pub use event::Event;
pub use wakeup::SETTLE;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use backoff::Backoff;
use vmm::VmmClient;
use wakeup::{Signals, Wakeups};

use crate::error::{Error, Result};
use crate::kernel::netns::NetNs;
use crate::model::Description;
use crate::state::{Checkpoint, Lock, SandboxId, StateDir};
use crate::teardown;

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

/// Follow sandbox `id` until SIGTERM/SIGINT, until it is detached, or until
/// its pod netns is gone (exit 3, see `gone.rs`), calling `emit` for every [`Event`]. Blocks the calling thread (and blocks
/// SIGTERM/SIGINT on it while it runs, to read them from a signalfd).
///
/// Fails up front when there is no finished attachment for `id` (exit 14),
/// its netns is gone (exit 3), or another watch follows it (exit 9).
pub fn watch(
    id: &SandboxId,
    state: &StateDir,
    opts: &WatchOptions,
    emit: &mut dyn FnMut(&Event),
) -> Result<()> {
    let vmm = choose::choose(opts)?;
    let signals = Signals::block()?;
    let result = Watcher::start(id, state, vmm).and_then(|mut w| {
        let result = w.run(&signals, emit);
        w.own.release();
        result
    });
    signals.restore();
    result
}

/// One running watch.
struct Watcher<'a> {
    id: &'a SandboxId,
    state: &'a StateDir,
    ns: NetNs,
    vmm: Option<Box<dyn VmmClient>>,
    wake: Wakeups,
    /// Held for the watch's life: one watch per sandbox.
    own: Lock,
    /// Interfaces refused once (ifindex -> name), not tried again under that name.
    refused: BTreeMap<u32, String>,
    /// TAPs (name, ifindex) of other attachments in this netns that existed
    /// when watch started: the launcher booted the VM with them (or chose not to).
    boot_siblings: BTreeSet<(String, u32)>,
    /// The TAP ifindex each device was plugged with by this watch (a TAP
    /// replaced under the same name needs its device plugged again).
    plugged_at: BTreeMap<String, u32>,
    /// What failed, and when to try it again.
    backoff: Backoff,
    /// The checkpoint as the last round left it.
    last: Option<Checkpoint>,
    /// Whether anything but this watch still holds the netns.
    alive: gone::Liveness,
}

impl<'a> Watcher<'a> {
    fn start(
        id: &'a SandboxId,
        state: &'a StateDir,
        vmm: Option<Box<dyn VmmClient>>,
    ) -> Result<Self> {
        let cp = sync::finished(state, id)?;
        // A name no sandbox id can have (ids never start with '.').
        let own = Lock::acquire(
            state.path().join(format!(".watch-{id}.lock")),
            &format!("{id} (another podtap watch follows it)"),
            Duration::ZERO,
        )?;
        let ns = match teardown::open_recorded(&cp, &state.file(id), &[])? {
            Ok(ns) => ns,
            Err(why) => {
                return Err(Error::NetnsMissing {
                    path: PathBuf::from(format!("{} ({why})", cp.netns.path)),
                    hint: "",
                })
            }
        };
        // Subscribe before the first round, so no change falls between them.
        let wake = Wakeups::open(&ns, state, id)?;
        let boot_siblings = siblings::boot_siblings(state, id, &cp);
        let alive = gone::Liveness::new(cp.netns_id(), ns.path().to_path_buf());
        Ok(Watcher {
            id,
            state,
            ns,
            vmm,
            wake,
            own,
            refused: BTreeMap::new(),
            boot_siblings,
            plugged_at: BTreeMap::new(),
            backoff: Backoff::default(),
            last: None,
            alive,
        })
    }

    fn run(&mut self, signals: &Signals, emit: &mut dyn FnMut(&Event)) -> Result<()> {
        // The first round also undoes what a watch that died mid-add left,
        // and puts the VMM in step with the checkpoint.
        if !self.round(true, emit)? {
            emit(&self.detached());
            return Ok(());
        }
        let Some(cp) = &self.last else {
            return Ok(());
        };
        emit(&Event::Ready {
            id: self.id.to_string(),
            revision: revision(cp.description.as_ref()),
            interfaces: cp.plan.nics.iter().map(|n| n.pod.name.clone()).collect(),
        });
        loop {
            let timeout = self.alive.timeout(self.backoff.next_retry());
            let woke = self.wake.wait(signals, timeout)?;
            if let Some(signal) = signals.take() {
                emit(&Event::Stopped {
                    id: self.id.to_string(),
                    signal,
                });
                return Ok(());
            }
            if self.alive.gone() {
                return Err(self.alive.exit(self.id.as_str(), &self.ns.display(), emit));
            }
            if woke.state && !self.state.file(self.id).exists() {
                emit(&self.detached());
                return Ok(());
            }
            if woke.netns || woke.state || woke.timeout {
                self.wake.settle(signals)?;
                if !self.round(false, emit)? {
                    emit(&self.detached());
                    return Ok(());
                }
            }
        }
    }

    fn detached(&self) -> Event {
        Event::Detached {
            id: self.id.to_string(),
        }
    }
}

fn revision(desc: Option<&Description>) -> u64 {
    desc.and_then(|d| d.attachment.as_ref())
        .map_or(0, |a| a.revision)
}
