//! One running watch: its state, its loop, and one round (unplug what
//! left, sync the checkpoint with the netns, put the VMM in step, report).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use super::backoff::{Backoff, ROUND};
use super::event::Event;
use super::gone::Liveness;
use super::hotplug::{Hotplug, Synced};
use super::report::{revision, Outcome};
use super::siblings::boot_siblings;
use super::sync::{finished, reconcile};
use super::vmm::{device_id, VmmClient};
use super::wakeup::Wakeups;
use super::Stop;
use crate::apply::late::Change;
use crate::error::{Error, Result};
use crate::kernel::netns::NetNs;
use crate::state::{Checkpoint, Lock, SandboxId, StateDir};
use crate::teardown;

/// One running watch.
pub(super) struct Watcher<'a> {
    id: &'a SandboxId,
    state: &'a StateDir,
    ns: NetNs,
    /// The VMM to hotplug into, if any.
    hotplug: Option<Hotplug>,
    wake: Wakeups,
    /// Held for the watch's life: one watch per sandbox.
    own: Lock,
    /// Interfaces refused once (ifindex -> name), not tried again under that name.
    refused: BTreeMap<u32, String>,
    /// TAPs (name, ifindex) of other attachments in this netns that existed
    /// when watch started: the launcher booted the VM with them (or chose not to).
    boot_siblings: BTreeSet<(String, u32)>,
    /// When a failed round is tried again.
    backoff: Backoff,
    /// The checkpoint as the last round left it.
    last: Option<Checkpoint>,
    /// Whether anything but this watch still holds the netns.
    alive: Liveness,
    /// The most read of one dump of the pod's tables.
    table_answer_limit: usize,
}

impl<'a> Watcher<'a> {
    /// Take the watch lock of `id` and subscribe to its proven netns.
    pub(super) fn start(
        id: &'a SandboxId,
        state: &'a StateDir,
        vmm: Option<Box<dyn VmmClient>>,
        table_answer_limit: usize,
    ) -> Result<Self> {
        let cp = finished(state, id)?;
        // A name no sandbox id can have (ids never start with '.').
        let own = Lock::acquire(
            state.path().join(format!(".watch-{id}.lock")),
            &format!("{id} (another watch follows it)"),
            Duration::ZERO,
        )?;
        let ns = match teardown::open_recorded(&cp, &state.file(id), &[])? {
            Ok(ns) => ns,
            Err(why) => {
                tracing::warn!("sandbox {id}: {why}");
                return Err(Error::NetnsMissing {
                    path: PathBuf::from(&cp.netns.path),
                });
            }
        };
        // Subscribe before the first round, so no change falls between them.
        let wake = Wakeups::open(&ns, state, id)?;
        let boot_siblings = boot_siblings(state, id, &cp);
        let alive = Liveness::new(cp.netns_id(), ns.path().to_path_buf());
        Ok(Watcher {
            id,
            state,
            ns,
            hotplug: vmm.map(|vmm| Hotplug::new(vmm, id)),
            wake,
            own,
            refused: BTreeMap::new(),
            boot_siblings,
            backoff: Backoff::default(),
            last: None,
            alive,
            table_answer_limit,
        })
    }

    /// Let another watch follow the sandbox.
    pub(super) fn release(self) {
        self.wake.leave();
        self.own.release();
    }

    /// Follow the sandbox until `stop`, detach, or the pod netns is gone.
    pub(super) fn run(&mut self, stop: &dyn Stop, emit: &mut dyn FnMut(&Event)) -> Result<()> {
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
            revision: revision(cp.description()),
            interfaces: cp.plan.nics.iter().map(|n| n.pod.name.clone()).collect(),
        });
        loop {
            let timeout = self.alive.timeout(self.next_retry());
            let woke = self.wake.wait(stop, self.alive.poll_fd(), timeout)?;
            if let Some(signal) = stop.take() {
                emit(&Event::Stopped {
                    id: self.id.to_string(),
                    signal,
                });
                return Ok(());
            }
            if self.alive.gone(woke.alive) {
                return Err(self.alive.exit(self.id.as_str(), &self.ns.display(), emit));
            }
            if woke.state && !self.state.file(self.id).exists() {
                emit(&self.detached());
                return Ok(());
            }
            // The wait also ends at each liveness signal: a round runs on news
            // or when a retry is due, never for the liveness check alone.
            let retry_due = woke.timeout && self.next_retry().is_some_and(|d| d.is_zero());
            if woke.netns || woke.state || retry_due {
                tracing::debug!(
                    netns = woke.netns,
                    state = woke.state,
                    retry_due,
                    "watch round"
                );
                self.wake.settle(stop)?;
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

    /// How long until the next retry is due; `None` when nothing waits.
    fn next_retry(&self) -> Option<Duration> {
        let vmm = self.hotplug.as_ref().and_then(|h| h.backoff.next_retry());
        match (self.backoff.next_retry(), vmm) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// One round; `false`: the attachment is gone.
    fn round(&mut self, first: bool, emit: &mut dyn FnMut(&Event)) -> Result<bool> {
        let mut unplugged = match &mut self.hotplug {
            Some(h) => h.unplug_departed(self.state, &self.ns, emit),
            None => BTreeSet::new(),
        };
        let scope = (self.state, self.id, &self.ns, self.table_answer_limit);
        let (cp, changes, others) =
            match reconcile(scope, &self.refused, &mut self.boot_siblings, first) {
                Ok(Some(done)) => done,
                Ok(None) => return Ok(false),
                Err(e) if !first => return Ok(self.round_failed(&e, emit)),
                Err(e) => return Err(e),
            };
        self.backoff.succeeded(ROUND);
        let removed: BTreeSet<String> = changes
            .iter()
            .filter_map(|c| match c {
                Change::Removed(nic) => Some(device_id(&nic.tap.name)),
                _ => None,
            })
            .collect();
        let synced = match &mut self.hotplug {
            Some(h) => h.sync(&self.ns, &cp, &others, &removed, emit),
            None => Synced::default(),
        };
        unplugged.extend(synced.unplugged.iter().cloned());
        let outcome = Outcome {
            id: self.id,
            cp: &cp,
            synced: &synced,
            unplugged: &unplugged,
        };
        outcome.report(changes, &mut self.refused, emit);
        self.last = Some(cp);
        Ok(true)
    }

    /// A round after the first failed: report it (once per backoff) and
    /// try again later. Only a checkpoint that is gone ends the watch; a
    /// lock held long or a file unreadable just now is tried again.
    fn round_failed(&mut self, e: &Error, emit: &mut dyn FnMut(&Event)) -> bool {
        if self.backoff.due(ROUND) {
            emit(&Event::Error {
                interface: None,
                error: e.to_string(),
            });
        }
        self.backoff.failed(ROUND);
        self.state.file(self.id).exists()
    }
}
