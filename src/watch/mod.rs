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
//! addresses, routes), on inotify for the checkpoint's removal (detach), and
//! on a signalfd for SIGTERM/SIGINT; never on a timer. A burst of
//! announcements (a veth moved in, renamed, addressed, brought up) is let
//! settle for [`SETTLE`] and then handled as one round. Each round compares
//! the netns with the checkpoint under the same locks attach takes, so
//! rounds are idempotent and a restarted watch picks up where the last one
//! stopped.

mod ch_api;
mod event;
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
}

/// Follow sandbox `id` until SIGTERM/SIGINT or until it is detached,
/// calling `emit` for every [`Event`]. Blocks the calling thread (and blocks
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
    let vmm = match (&opts.qmp, &opts.cloud_hypervisor_api) {
        (Some(_), Some(_)) => {
            return Err(Error::Invalid(
                "watch: give --qmp or --cloud-hypervisor-api, not both".into(),
            ))
        }
        (Some(q), None) => Some(Vmm::Qemu(qmp::QmpVmm::new(q))),
        (None, Some(c)) => Some(Vmm::CloudHypervisor(ch_api::CloudHypervisorApi::new(c))),
        (None, None) => None,
    };
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

    fn restore(self) {
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
}

impl<'a> Watcher<'a> {
    fn start(id: &'a SandboxId, state: &'a StateDir, vmm: Option<Vmm>) -> Result<Self> {
        let cp = finished(state, id)?;
        let own = Lock::acquire(
            state.path().join(format!("{id}.watch.lock")),
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
                    | AddWatchFlags::IN_DELETE_SELF
                    | AddWatchFlags::IN_MOVE_SELF,
            )
            .map_err(|e| Error::io("inotify watch", state.path(), e.into()))?;
        Ok(Watcher {
            id,
            state,
            ns,
            vmm,
            subscription,
            inotify,
            own,
            refused: BTreeMap::new(),
        })
    }

    fn run(&mut self, signals: &Signals, emit: &mut dyn FnMut(&Event)) -> Result<()> {
        // The first round also undoes what a watch that died mid-add left.
        let Some(cp) = self.round(true, emit)? else {
            emit(&self.detached());
            return Ok(());
        };
        self.resume(&cp, emit);
        emit(&Event::Ready {
            id: self.id.to_string(),
            revision: revision(cp.description.as_ref()),
            interfaces: cp.plan.nics.iter().map(|n| n.pod.name.clone()).collect(),
        });
        loop {
            let woke = self.wait(signals, None)?;
            if let Some(signal) = signals.take() {
                emit(&Event::Stopped {
                    id: self.id.to_string(),
                    signal,
                });
                return Ok(());
            }
            if woke.state && !self.state.file(self.id).exists() {
                emit(&self.detached());
                return Ok(());
            }
            if woke.netns {
                self.settle(signals)?;
                if self.round(false, emit)?.is_none() {
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
        let timeout = match timeout {
            Some(t) => PollTimeout::try_from(t).unwrap_or(PollTimeout::MAX),
            None => PollTimeout::NONE,
        };
        match poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(Error::io("poll", PathBuf::from("watch"), e.into())),
        }
        let ready = |f: &PollFd<'_>| f.revents().is_some_and(|r| !r.is_empty());
        let netns = ready(&fds[0])
            && self.subscription.drain().map_err(|e| {
                Error::kernel(&self.ns.display(), "read", "netlink announcements", e)
            })?;
        let state = ready(&fds[1]) && self.inotify.read_events().is_ok();
        Ok(Woke { netns, state })
    }

    /// Let a burst of announcements go quiet ([`SETTLE`], at most [`SETTLE_MAX`]).
    fn settle(&self, signals: &Signals) -> Result<()> {
        let until = Instant::now() + SETTLE_MAX;
        while Instant::now() < until {
            let woke = self.wait(signals, Some(SETTLE))?;
            if !woke.netns {
                break;
            }
        }
        Ok(())
    }

    /// One round: unplug what left, then bring the checkpoint up to date under
    /// the locks, then hotplug what arrived. `None`: the attachment is gone.
    fn round(&mut self, first: bool, emit: &mut dyn FnMut(&Event)) -> Result<Option<Checkpoint>> {
        let unplugged = self.unplug_departed(emit);
        let (cp, changes) = match self.reconcile(first) {
            Ok(Some(done)) => done,
            Ok(None) => return Ok(None),
            Err(e) if !first => {
                emit(&Event::Error {
                    interface: None,
                    error: e.to_string(),
                });
                return finished(self.state, self.id).map(Some).or(Ok(None));
            }
            Err(e) => return Err(e),
        };
        let rev = revision(cp.description.as_ref());
        for change in changes {
            match change {
                Change::Added(nic) => {
                    let device = self.plug(&cp, &nic.tap.name, nic.pod.ifindex, emit);
                    let Some(iface) = cp
                        .description
                        .as_ref()
                        .and_then(|d| d.interfaces.iter().find(|i| i.ifindex == nic.pod.ifindex))
                    else {
                        continue;
                    };
                    emit(&Event::Added {
                        interface: iface.name.clone(),
                        ifindex: nic.pod.ifindex,
                        tap: nic.tap.name.clone(),
                        wiring: nic.wiring,
                        device,
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
        Ok(Some(cp))
    }

    /// The checkpoint brought up to date, and what changed; `None` when it is
    /// gone or now records another netns (detached, re-attached).
    fn reconcile(&mut self, first: bool) -> Result<Option<(Checkpoint, Vec<Change>)>> {
        let (state, id, ns, refused) = (self.state, self.id, &self.ns, &self.refused);
        state.locked(id, || {
            let Some(mut cp) = state.load(id)? else {
                return Ok(None);
            };
            if (cp.netns.dev, cp.netns.inode) != ns.identity() || cp.phase != Phase::Complete {
                return Ok(None);
            }
            let netns_lock = state.lock_netns(ns.identity(), LOCK_TIMEOUT)?;
            let result = block_on(async {
                let nl = Netlink::connect(ns)?;
                if !cp.is_netns(ns.identity(), nl.cookie) {
                    return Ok(None);
                }
                if first {
                    late::recover(&nl, state, &mut cp).await?;
                }
                let changes = late::reconcile(ns, &nl, state, &mut cp, refused).await?;
                Ok(Some(changes))
            });
            netns_lock.release();
            Ok(result?.map(|changes| (cp, changes)))
        })
    }

    /// Unplug the hotplugged NICs whose pod interface has left, before their
    /// TAPs are undone. Returns the devices unplugged.
    fn unplug_departed(&self, emit: &mut dyn FnMut(&Event)) -> BTreeSet<String> {
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
        for nic in cp
            .plan
            .nics
            .iter()
            .filter(|n| !present.contains(&n.pod.ifindex) && cp.late.contains(&n.tap.name))
        {
            let device = device_id(&nic.tap.name);
            match vmm.unplug(&device) {
                Ok(()) => {
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

    /// Hand the TAP of pod interface `ifindex` to the VMM; its device id, or
    /// `None` without a VMM or on failure (reported).
    fn plug(
        &self,
        cp: &Checkpoint,
        tap: &str,
        ifindex: u32,
        emit: &mut dyn FnMut(&Event),
    ) -> Option<String> {
        let vmm = self.vmm.as_ref()?;
        let desc = cp.description.as_ref()?;
        let iface = desc.interfaces.iter().find(|i| i.ifindex == ifindex)?;
        let device = device_id(tap);
        let plugged = hot_nic(desc, ifindex, &device).and_then(|(nic, one)| {
            let fds: Vec<OwnedFd> =
                crate::doors::exec::open_tap_fds(self.id.as_str(), &self.ns, &one)?
                    .into_iter()
                    .flatten()
                    .collect();
            vmm.plug(&nic, &fds)
                .map_err(|e| Error::io("hotplug", PathBuf::from(&device), e))
        });
        match plugged {
            Ok(()) => Some(device),
            Err(e) => {
                emit(&Event::Error {
                    interface: Some(iface.name.clone()),
                    error: e.to_string(),
                });
                None
            }
        }
    }

    /// Make the VMM match the checkpoint after a restart: plug the late NICs
    /// it lacks, unplug podtap devices without a NIC behind them.
    fn resume(&self, cp: &Checkpoint, emit: &mut dyn FnMut(&Event)) {
        let Some(vmm) = &self.vmm else {
            return;
        };
        let present = match vmm.devices() {
            Ok(p) => p,
            Err(e) => {
                emit(&Event::Error {
                    interface: None,
                    error: format!("list the VMM's devices: {e}"),
                });
                return;
            }
        };
        for nic in cp
            .plan
            .nics
            .iter()
            .filter(|n| cp.late.contains(&n.tap.name))
        {
            if present.contains(&device_id(&nic.tap.name)) {
                continue;
            }
            if let Some(device) = self.plug(cp, &nic.tap.name, nic.pod.ifindex, emit) {
                emit(&Event::Replugged {
                    interface: nic.pod.name.clone(),
                    device,
                });
            }
        }
        for device in &present {
            let Some(tap) = tap_of(device) else { continue };
            if cp.late.iter().any(|t| t == tap) {
                continue;
            }
            match vmm.unplug(device) {
                Ok(()) => emit(&Event::Unplugged {
                    device: device.clone(),
                }),
                Err(e) => emit(&Event::Error {
                    interface: None,
                    error: format!("unplug {device}: {e}"),
                }),
            }
        }
    }
}

/// What a wait saw.
struct Woke {
    /// Netlink announcements arrived from the netns.
    netns: bool,
    /// Something was removed or renamed in the state dir.
    state: bool,
}

/// The finished checkpoint of `id`.
fn finished(state: &StateDir, id: &SandboxId) -> Result<Checkpoint> {
    let cp = state.load(id)?.ok_or_else(|| Error::NotFound {
        id: id.to_string(),
        dir: state.path().into(),
    })?;
    if cp.phase != Phase::Complete || cp.description.is_none() {
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
