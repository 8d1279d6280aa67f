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

mod bounded;
mod ch_api;
mod event;
mod gone;
mod peer;
mod qmp;
mod vmm;

pub use event::Event;

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::apply::late::{self, Change};
use crate::error::{Error, Result};
use crate::kernel::netlink::Netlink;
use crate::kernel::netns::NetNs;
use crate::kernel::runtime::block_on;
use crate::kernel::subscribe::Subscription;
use crate::model::Description;
use crate::state::{Checkpoint, Lock, Phase, SandboxId, StateDir, LOCK_TIMEOUT};
use crate::teardown;
use vmm::{device_id, tap_of, HotNic, Vmm};

/// How long a burst of netlink announcements may go quiet before a round.
pub const SETTLE: Duration = Duration::from_millis(100);
/// The longest a round waits for a burst to go quiet.
const SETTLE_MAX: Duration = Duration::from_secs(1);

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
    let vmm = Vmm::choose(opts)?;
    let signals = Signals::block()?;
    let result = Watcher::start(id, state, vmm).and_then(|mut w| {
        let result = w.run(&signals, emit);
        w.own.release();
        result
    });
    signals.restore();
    result
}

/// SIGTERM/SIGINT, blocked on this thread and read from a signalfd.
struct Signals {
    fd: SignalFd,
    old: SigSet,
}

impl Signals {
    fn block() -> Result<Self> {
        let mut mask = SigSet::empty();
        mask.add(Signal::SIGTERM);
        mask.add(Signal::SIGINT);
        let old = mask
            .thread_swap_mask(nix::sys::signal::SigmaskHow::SIG_BLOCK)
            .map_err(|e| Error::io("block signals for", PathBuf::from("watch"), e.into()))?;
        let fd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .map_err(|e| Error::io("signalfd for", PathBuf::from("watch"), e.into()))?;
        Ok(Signals { fd, old })
    }

    /// The signal that arrived, if one did.
    fn take(&self) -> Option<String> {
        match self.fd.read_signal() {
            Ok(Some(info)) => Some(
                Signal::try_from(i32::try_from(info.ssi_signo).unwrap_or(0))
                    .map_or_else(|_| info.ssi_signo.to_string(), |s| s.as_str().to_string()),
            ),
            _ => None,
        }
    }

    /// Put the caller's mask back. A signal still pending is read first:
    /// unblocked, it would kill a process that was about to exit 0.
    fn restore(self) {
        while self.take().is_some() {}
        let _ = self.old.thread_set_mask();
    }
}

/// One running watch.
struct Watcher<'a> {
    id: &'a SandboxId,
    state: &'a StateDir,
    ns: NetNs,
    vmm: Option<Vmm>,
    subscription: Subscription,
    inotify: Inotify,
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
    /// What failed, and when to try it again (doubling up to [`RETRY_MAX`]).
    backoff: BTreeMap<String, (Instant, Duration)>,
    /// The checkpoint as the last round left it.
    last: Option<Checkpoint>,
    /// Whether anything but this watch still holds the netns.
    alive: gone::Liveness,
}

/// A NIC the VMM should have: a late NIC of this attachment, or a NIC of
/// another attachment in the same netns that arrived after watch started
/// (a later CNI ADD, such as a Multus network).
struct Wanted {
    /// The attachment it belongs to.
    id: SandboxId,
    tap: String,
    /// The TAP's ifindex.
    tap_ifindex: u32,
    /// The pod interface's ifindex.
    ifindex: u32,
    /// That attachment's description.
    desc: Description,
}

/// How long to wait before trying a failed VMM call (or round) again.
const RETRY: Duration = Duration::from_secs(2);
/// The longest wait between two tries of something that keeps failing.
const RETRY_MAX: Duration = Duration::from_secs(60);

impl<'a> Watcher<'a> {
    fn start(id: &'a SandboxId, state: &'a StateDir, vmm: Option<Vmm>) -> Result<Self> {
        let cp = finished(state, id)?;
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
        let subscription = Subscription::open(&ns)?;
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|e| Error::io("inotify for", state.path(), e.into()))?;
        inotify
            .add_watch(
                state.path(),
                AddWatchFlags::IN_DELETE
                    | AddWatchFlags::IN_MOVED_FROM
                    | AddWatchFlags::IN_MOVED_TO
                    | AddWatchFlags::IN_CLOSE_WRITE
                    | AddWatchFlags::IN_DELETE_SELF
                    | AddWatchFlags::IN_MOVE_SELF,
            )
            .map_err(|e| Error::io("inotify watch", state.path(), e.into()))?;
        let boot_siblings = siblings(state, id, &cp.netns_id())
            .iter()
            .flat_map(|(_, other)| sibling_taps(other))
            .filter(|(t, _)| !cp.adopted.contains(t))
            .collect();
        let alive = gone::Liveness::new(cp.netns_id(), ns.path().to_path_buf());
        Ok(Watcher {
            id,
            state,
            ns,
            vmm,
            subscription,
            inotify,
            own,
            refused: BTreeMap::new(),
            boot_siblings,
            plugged_at: BTreeMap::new(),
            backoff: BTreeMap::new(),
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
            revision: revision(cp.description()),
            interfaces: cp.plan.nics.iter().map(|n| n.pod.name.clone()).collect(),
        });
        loop {
            let woke = self.wait(signals, self.alive.timeout(self.next_retry()))?;
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
                self.settle(signals)?;
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

    /// Wait for the netns, the state dir or a signal (up to `timeout`).
    fn wait(&self, signals: &Signals, timeout: Option<Duration>) -> Result<Woke> {
        let mut fds = [
            PollFd::new(self.subscription.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.inotify.as_fd(), PollFlags::POLLIN),
            PollFd::new(signals.fd.as_fd(), PollFlags::POLLIN),
        ];
        let poll_timeout = match timeout {
            Some(t) => PollTimeout::try_from(t).unwrap_or(PollTimeout::MAX),
            None => PollTimeout::NONE,
        };
        let n = match poll(&mut fds, poll_timeout) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => 1,
            Err(e) => return Err(Error::io("poll", PathBuf::from("watch"), e.into())),
        };
        let ready = |f: &PollFd<'_>| f.revents().is_some_and(|r| !r.is_empty());
        let netns = ready(&fds[0])
            && self.subscription.drain().map_err(|e| {
                Error::kernel(&self.ns.display(), "read", "netlink announcements", e)
            })?;
        // Another attachment's checkpoint came or went, or ours went; our
        // own saves are not news.
        let own = format!("{}.json", self.id);
        let state = ready(&fds[1])
            && self.inotify.read_events().is_ok_and(|events| {
                events
                    .iter()
                    .any(|e| match e.name.as_ref().and_then(|n| n.to_str()) {
                        Some(name) if name == own => e
                            .mask
                            .intersects(AddWatchFlags::IN_DELETE | AddWatchFlags::IN_MOVED_FROM),
                        Some(name) => name.ends_with(".json"),
                        None => true,
                    })
            });
        Ok(Woke {
            netns,
            state,
            timeout: n == 0 && timeout.is_some(),
        })
    }

    /// Let a burst of announcements go quiet ([`SETTLE`], at most [`SETTLE_MAX`]).
    fn settle(&self, signals: &Signals) -> Result<()> {
        let until = Instant::now() + SETTLE_MAX;
        while Instant::now() < until {
            let woke = self.wait(signals, Some(SETTLE))?;
            if !woke.netns && !woke.state {
                break;
            }
        }
        Ok(())
    }

    /// One round: unplug what left, bring the checkpoint up to date under
    /// the locks, then put the VMM in step. `None`: the attachment is gone.
    fn round(&mut self, first: bool, emit: &mut dyn FnMut(&Event)) -> Result<bool> {
        let mut unplugged = self.unplug_departed(emit);
        let (cp, changes, others) = match self.reconcile(first) {
            Ok(Some(done)) => done,
            Ok(None) => return Ok(false),
            Err(e) if !first => {
                if self.due(ROUND) {
                    emit(&Event::Error {
                        interface: None,
                        error: e.to_string(),
                    });
                }
                self.failed(ROUND);
                // Only a checkpoint that is gone ends the watch; a lock held
                // long or a file unreadable just now is tried again.
                return Ok(self.state.file(self.id).exists());
            }
            Err(e) => return Err(e),
        };
        self.backoff.remove(ROUND);
        let removed: BTreeSet<String> = changes
            .iter()
            .filter_map(|c| match c {
                Change::Removed(nic) => Some(device_id(&nic.tap.name)),
                _ => None,
            })
            .collect();
        let synced = self.sync(&cp, &others, &removed, emit);
        unplugged.extend(synced.unplugged);
        let rev = revision(cp.description());
        let mut reported: BTreeSet<&str> = BTreeSet::new();
        for change in &changes {
            if let Change::Added(nic) = change {
                reported.insert(nic.tap.name.as_str());
            }
        }
        // Late NICs plugged now that no `added` announces (a restart after a
        // watch died between building one and plugging it).
        let replugged: Vec<(String, String, String)> = synced
            .plugged
            .iter()
            .filter(|(tap, _)| !reported.contains(tap.as_str()))
            .filter_map(|(tap, device)| {
                let nic = cp.plan.nics.iter().find(|n| n.tap.name == *tap)?;
                Some((self.id.to_string(), nic.pod.name.clone(), device.clone()))
            })
            .collect();
        for change in changes {
            match change {
                Change::Added(nic) => {
                    let Some(iface) = cp
                        .description()
                        .and_then(|d| d.interfaces.iter().find(|i| i.ifindex == nic.pod.ifindex))
                    else {
                        continue;
                    };
                    emit(&Event::Added {
                        interface: iface.name.clone(),
                        ifindex: nic.pod.ifindex,
                        tap: nic.tap.name.clone(),
                        wiring: nic.wiring,
                        device: synced.plugged.get(&nic.tap.name).cloned(),
                        revision: rev,
                        nic: Box::new(iface.clone()),
                    });
                }
                Change::Removed(nic) => {
                    let device = device_id(&nic.tap.name);
                    let device = unplugged.contains(&device).then_some(device);
                    emit(&Event::Removed {
                        interface: nic.pod.name.clone(),
                        ifindex: nic.pod.ifindex,
                        tap: nic.tap.name.clone(),
                        device,
                        revision: rev,
                    });
                }
                Change::Refused {
                    interface,
                    ifindex,
                    why,
                } => {
                    self.refused.insert(ifindex, interface.clone());
                    emit(&Event::Refused {
                        interface,
                        ifindex,
                        error: why,
                    });
                }
                Change::Revised(interfaces) => emit(&Event::Changed {
                    interfaces,
                    revision: rev,
                }),
            }
        }
        for (id, interface, device) in replugged.into_iter().chain(synced.adopted) {
            emit(&Event::Plugged {
                id,
                interface,
                device,
            });
        }
        self.last = Some(cp);
        Ok(true)
    }

    /// The checkpoint brought up to date, and what changed; `None` when it is
    /// gone or now records another netns (detached, re-attached).
    /// The other attachments of the netns are read once, here, for the round.
    fn reconcile(&mut self, first: bool) -> Result<Option<Reconciled>> {
        let (state, id, ns, refused) = (self.state, self.id, &self.ns, &self.refused);
        let boot_siblings = &mut self.boot_siblings;
        state.locked(id, || {
            let Some(mut cp) = state.load(id)? else {
                return Ok(None);
            };
            if (cp.netns.dev, cp.netns.inode) != ns.identity() || cp.phase() != Phase::Complete {
                return Ok(None);
            }
            let netns_lock = ns.lock(id.as_str(), LOCK_TIMEOUT)?;
            let others = siblings(state, id, &cp.netns_id());
            let result = block_on(async {
                let nl = Netlink::connect(ns)?;
                if !cp.is_netns(ns.identity(), nl.cookie) {
                    return Ok(None);
                }
                if first {
                    late::recover(&nl, state, &mut cp).await?;
                }
                let foreign: BTreeSet<u32> = others
                    .iter()
                    .flat_map(|(_, other)| other.created.iter().map(|c| c.ifindex))
                    .collect();
                let changes = late::reconcile(ns, &nl, state, &mut cp, refused, &foreign).await?;
                Ok(Some(changes))
            });
            let adopted = result.as_ref().is_ok_and(Option::is_some)
                && adopt(&others, boot_siblings, &mut cp);
            drop(netns_lock);
            let result = result?;
            if adopted {
                state.save(&cp)?;
            }
            Ok(result.map(|changes| (cp, changes, others)))
        })
    }

    /// Unplug the hotplugged NICs whose pod interface has left, before their
    /// TAPs are undone. Returns the devices unplugged.
    fn unplug_departed(&mut self, emit: &mut dyn FnMut(&Event)) -> BTreeSet<String> {
        let mut done = BTreeSet::new();
        let Some(vmm) = &self.vmm else {
            return done;
        };
        let Ok(Some(cp)) = self.state.load(self.id) else {
            return done;
        };
        let Ok(present) = self.ns.run(|| {
            Ok(nix::net::if_::if_nameindex()
                .map(|list| list.iter().map(|i| i.index()).collect::<BTreeSet<u32>>())
                .unwrap_or_default())
        }) else {
            return done;
        };
        let departed: Vec<_> = cp
            .plan
            .nics
            .iter()
            .filter(|n| !present.contains(&n.pod.ifindex) && cp.late.contains(&n.tap.name))
            .collect();
        if departed.is_empty() {
            return done;
        }
        let devices = vmm.devices().ok();
        for nic in departed {
            let device = device_id(&nic.tap.name);
            if devices.as_ref().is_some_and(|d| !d.contains(&device)) {
                continue;
            }
            match vmm.unplug(&device) {
                Ok(()) => {
                    self.plugged_at.remove(&device);
                    done.insert(device);
                }
                Err(e) => emit(&Event::Error {
                    interface: Some(nic.pod.name.clone()),
                    error: format!("unplug {device}: {e}"),
                }),
            }
        }
        done
    }

    /// Put the VMM in step: plug every wanted NIC it lacks (or whose TAP was
    /// replaced), unplug the podtap devices nothing wants any more. The
    /// VMM's devices are read afresh each time. Level-triggered: what fails
    /// is tried again after a backoff (from [`RETRY`], doubling up to
    /// [`RETRY_MAX`]), whatever wakes the rounds in between. `removed`: the
    /// devices of NICs this round removed (announced by their `removed`).
    fn sync(
        &mut self,
        cp: &Checkpoint,
        others: &[(SandboxId, Checkpoint)],
        removed: &BTreeSet<String>,
        emit: &mut dyn FnMut(&Event),
    ) -> Synced {
        let mut synced = Synced::default();
        let Some(vmm) = self.vmm.take() else {
            return synced;
        };
        self.sync_with(&vmm, cp, others, removed, emit, &mut synced);
        self.vmm = Some(vmm);
        synced
    }

    fn sync_with(
        &mut self,
        vmm: &Vmm,
        cp: &Checkpoint,
        others: &[(SandboxId, Checkpoint)],
        removed: &BTreeSet<String>,
        emit: &mut dyn FnMut(&Event),
        synced: &mut Synced,
    ) {
        if !self.due(VMM) {
            return;
        }
        let present: BTreeSet<String> = match vmm.devices() {
            Ok(d) => d.into_iter().filter(|d| tap_of(d).is_some()).collect(),
            Err(e) => {
                emit(&Event::Error {
                    interface: None,
                    error: format!("list the VMM's devices: {e}"),
                });
                self.failed(VMM);
                return;
            }
        };
        self.backoff.remove(VMM);
        let wanted = wanted(self.id, cp, others);
        for w in &wanted {
            let device = device_id(&w.tap);
            let replaced = self
                .plugged_at
                .get(&device)
                .is_some_and(|at| *at != w.tap_ifindex);
            if present.contains(&device) && !replaced {
                self.plugged_at.entry(device).or_insert(w.tap_ifindex);
                continue;
            }
            if !self.due(&device) {
                continue;
            }
            let result = if present.contains(&device) {
                vmm.unplug(&device)
                    .map_err(|e| Error::io("unplug", PathBuf::from(&device), e))
                    .and_then(|()| plug(vmm, &self.ns, w, &device))
            } else {
                plug(vmm, &self.ns, w, &device)
            };
            match result {
                Ok(()) => {
                    self.backoff.remove(&device);
                    self.plugged_at.insert(device.clone(), w.tap_ifindex);
                    if w.id == *self.id {
                        synced.plugged.insert(w.tap.clone(), device);
                    } else {
                        let interface = w
                            .desc
                            .interfaces
                            .iter()
                            .find(|i| i.ifindex == w.ifindex)
                            .map(|i| i.name.clone())
                            .unwrap_or_default();
                        synced.adopted.push((w.id.to_string(), interface, device));
                    }
                }
                Err(e) => {
                    emit(&Event::Error {
                        interface: None,
                        error: e.to_string(),
                    });
                    self.failed(&device);
                }
            }
        }
        // Unplug only what no attachment in this netns has any more: a
        // device of a TAP that still exists may be another watch's.
        let mut keep: BTreeSet<String> = wanted.iter().map(|w| device_id(&w.tap)).collect();
        let all = others
            .iter()
            .filter_map(|(_, other)| other.description())
            .chain(cp.description());
        for desc in all {
            keep.extend(desc.attached().map(|(_, tap)| device_id(&tap.name)));
        }
        for device in present.difference(&keep) {
            if !self.due(device) {
                continue;
            }
            match vmm.unplug(device) {
                Ok(()) => {
                    self.backoff.remove(device);
                    self.plugged_at.remove(device);
                    synced.unplugged.insert(device.clone());
                    if !removed.contains(device) {
                        emit(&Event::Unplugged {
                            device: device.clone(),
                        });
                    }
                }
                Err(e) => {
                    emit(&Event::Error {
                        interface: None,
                        error: format!("unplug {device}: {e}"),
                    });
                    self.failed(device);
                }
            }
        }
    }

    /// Whether `key` may be tried now (it has not failed, or its backoff ran out).
    fn due(&self, key: &str) -> bool {
        self.backoff
            .get(key)
            .is_none_or(|(at, _)| Instant::now() >= *at)
    }

    /// `key` failed: try it again after twice the last wait (from [`RETRY`]).
    fn failed(&mut self, key: &str) {
        let wait = self
            .backoff
            .get(key)
            .map_or(RETRY, |(_, last)| (*last * 2).min(RETRY_MAX));
        self.backoff
            .insert(key.to_string(), (Instant::now() + wait, wait));
    }

    /// How long until the next retry is due; `None` when nothing waits.
    fn next_retry(&self) -> Option<Duration> {
        let at = self.backoff.values().map(|(at, _)| *at).min()?;
        Some(at.saturating_duration_since(Instant::now()))
    }
}

/// Backoff keys of a whole round and of listing the VMM's devices (device
/// ids start with `podtap-`, so these never clash with one).
const ROUND: &str = "round";
const VMM: &str = "vmm";

/// A round's checkpoint, what changed, and the other attachments of the netns.
type Reconciled = (Checkpoint, Vec<Change>, Vec<(SandboxId, Checkpoint)>);

/// What [`Watcher::sync`] did.
#[derive(Default)]
struct Synced {
    /// This attachment's TAPs plugged now, with their device ids.
    plugged: BTreeMap<String, String>,
    /// Other attachments' NICs plugged now: (id, interface, device).
    adopted: Vec<(String, String, String)>,
    /// Devices unplugged now.
    unplugged: BTreeSet<String>,
}

/// The NICs the VMM should have: `cp`'s late NICs and its adopted ones.
fn wanted(id: &SandboxId, cp: &Checkpoint, others: &[(SandboxId, Checkpoint)]) -> Vec<Wanted> {
    let mut out = Vec::new();
    let mut add = |owner: &SandboxId, desc: &Description, taps: &[String]| {
        for (iface, tap) in desc.attached() {
            if taps.contains(&tap.name) {
                out.push(Wanted {
                    id: owner.clone(),
                    tap: tap.name.clone(),
                    tap_ifindex: tap.ifindex,
                    ifindex: iface.ifindex,
                    desc: desc.clone(),
                });
            }
        }
    };
    if let Some(desc) = cp.description() {
        add(id, desc, &cp.late);
    }
    if !cp.adopted.is_empty() {
        for (owner, other) in others {
            if let Some(desc) = other.description() {
                add(owner, desc, &cp.adopted);
            }
        }
    }
    out
}

/// Record in `cp` the NICs of other attachments in its netns that arrived
/// after watch started, and forget those that left; whether `cp` changed.
/// `boot` (TAPs there at the start) loses the TAPs that are gone, so a TAP
/// made again under the same name is adopted.
fn adopt(
    others: &[(SandboxId, Checkpoint)],
    boot: &mut BTreeSet<(String, u32)>,
    cp: &mut Checkpoint,
) -> bool {
    let now: BTreeSet<(String, u32)> = others
        .iter()
        .flat_map(|(_, other)| sibling_taps(other))
        .collect();
    boot.retain(|t| now.contains(t));
    let names: BTreeSet<&String> = now.iter().map(|(t, _)| t).collect();
    let before = cp.adopted.clone();
    cp.adopted.retain(|t| names.contains(t));
    for (tap, _) in now.iter().filter(|t| !boot.contains(*t)) {
        if !cp.adopted.contains(tap) {
            cp.adopted.push(tap.clone());
        }
    }
    cp.adopted != before
}

/// The TAPs (name, ifindex) of another attachment that this one may adopt:
/// not the NICs that attachment's own watch added (its `late`, which that
/// watch hotplugs).
fn sibling_taps(other: &Checkpoint) -> Vec<(String, u32)> {
    other
        .description()
        .into_iter()
        .flat_map(|d| d.attached())
        .filter(|(_, tap)| !other.late.contains(&tap.name))
        .map(|(_, tap)| (tap.name.clone(), tap.ifindex))
        .collect()
}

/// The finished attachments other than `id` in the netns `identity`.
fn siblings(
    state: &StateDir,
    id: &SandboxId,
    identity: &crate::kernel::netns_id::NetnsId,
) -> Vec<(SandboxId, Checkpoint)> {
    state
        .ids()
        .unwrap_or_default()
        .into_iter()
        .filter(|other| other != id)
        .filter_map(|other| {
            let cp = state.load(&other).ok().flatten()?;
            let same = cp.netns_id().matches(identity)
                && cp.phase() == Phase::Complete
                && cp.description().is_some();
            same.then_some((other, cp))
        })
        .collect()
}

/// Hand the TAP of `w` to the VMM as `device`.
fn plug(vmm: &Vmm, ns: &NetNs, w: &Wanted, device: &str) -> Result<()> {
    let (nic, one) = hot_nic(&w.desc, w.ifindex, device)?;
    // What a failed or killed earlier plug left in the VMM would hold the
    // TAP's queue (a single-queue TAP takes one opener): clear it first.
    vmm.prepare(&nic)
        .map_err(|e| Error::io("hotplug", PathBuf::from(device), e))?;
    let fds: Vec<OwnedFd> = crate::doors::exec::open_tap_fds(w.id.as_str(), ns, &one)?
        .into_iter()
        .flatten()
        .collect();
    vmm.plug(&nic, &fds)
        .map_err(|e| Error::io("hotplug", PathBuf::from(device), e))
}

/// What a wait saw.
struct Woke {
    /// Netlink announcements arrived from the netns.
    netns: bool,
    /// A checkpoint in the state dir came, changed or went.
    state: bool,
    /// The timeout passed.
    timeout: bool,
}

/// The finished checkpoint of `id`.
fn finished(state: &StateDir, id: &SandboxId) -> Result<Checkpoint> {
    let cp = state.load(id)?.ok_or_else(|| Error::NotFound {
        id: id.to_string(),
        dir: state.path().into(),
    })?;
    if cp.phase() != Phase::Complete || cp.description().is_none() {
        return Err(Error::CheckFailed {
            id: id.to_string(),
            problems: "attach did not finish (run detach, then attach again)".into(),
        });
    }
    Ok(cp)
}

fn revision(desc: Option<&Description>) -> u64 {
    desc.and_then(|d| d.attachment.as_ref())
        .map_or(0, |a| a.revision)
}

/// What the VMM needs for the NIC of pod interface `ifindex`, and a
/// description holding only that interface (to open its queues).
fn hot_nic(desc: &Description, ifindex: u32, device: &str) -> Result<(HotNic, Description)> {
    let mut one = desc.clone();
    one.interfaces.retain(|i| i.ifindex == ifindex);
    let iface = one
        .interfaces
        .first()
        .ok_or_else(|| Error::Invalid(format!("interface {ifindex} is not in the description")))?;
    let tap = iface
        .tap
        .as_ref()
        .ok_or_else(|| Error::Invalid(format!("interface {} has no TAP", iface.name)))?;
    let mac = iface
        .guest_mac
        .clone()
        .ok_or_else(|| Error::Invalid(format!("interface {} has no guest MAC", iface.name)))?;
    let nic = HotNic {
        device: device.into(),
        mac,
        mtu: iface.mtu,
        queues: tap.queues,
    };
    Ok((nic, one))
}
