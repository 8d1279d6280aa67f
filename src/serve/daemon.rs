//! `podtap serve`: follow a state dir and serve every NIC that asked, of
//! every finished attachment, from attach until detach.
//!
//! What it serves comes from the checkpoints (the plan says which NICs,
//! the description with the pod's tables read live says what), so nothing
//! is saved and a restart picks up every lease again. It waits, in one
//! `poll`, on the served packet sockets, on inotify in the state dir (a
//! checkpoint written or removed: that attachment is looked at again), on
//! its control socket (attach handing over sockets: `control.rs`) and on
//! the caller's stop; at rest it runs no code but the periodic router
//! advertisements of each NIC (minutes apart).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixListener;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use serde::Serialize;

use super::control::{self, Handed, CONTROL_SOCKET};
use super::server::{NicKey, Server, Stats};
use super::socket::PacketSocket;
use super::{config_for, NicConfig, Responder};
use crate::error::{Error, Result};
use crate::state::{Phase, SandboxId, StateDir};
use crate::stop::Stop;

/// What the daemon serves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DaemonOptions {
    /// Only this attachment (what `watch` serves); every one when `None`.
    pub only: Option<SandboxId>,
    /// Listen on the state dir's control socket for attach's hand-overs
    /// (the node daemon does; a watch does not).
    pub control: bool,
    /// The most read of one dump of a pod's tables.
    pub table_answer_limit: usize,
}

/// What the daemon did, one event a line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ServeEvent {
    /// Every attachment of the state dir was looked at.
    Ready {
        /// NICs served.
        nics: usize,
    },
    /// A NIC is served from now on.
    Serving {
        /// Its attachment.
        id: String,
        /// Its pod interface.
        interface: String,
        /// Its TAP.
        tap: String,
        /// Whether attach handed the socket over (else the daemon opened it).
        handed_over: bool,
    },
    /// A NIC is no longer served (detached, its TAP gone), with what it did.
    Stopped {
        /// Its attachment.
        id: String,
        /// Its TAP.
        tap: String,
        /// Frames answered.
        answered: u64,
        /// Frames received.
        received: u64,
        /// Frames dropped past the rate limit.
        rate_limited: u64,
    },
    /// An attachment's NICs could not be served, and why.
    Skipped {
        /// The attachment.
        id: String,
        /// Why.
        why: String,
    },
}

/// What is served, by NIC: its interface and configuration (to tell a
/// change of the pod's tables from none).
struct Daemon<'a> {
    state: &'a StateDir,
    opts: &'a DaemonOptions,
    server: Server,
    served: BTreeMap<NicKey, (String, NicConfig)>,
}

/// Serve until `stop` fires. Fails up front when the state dir cannot be
/// followed or (with `control`) another daemon listens on it.
pub fn daemon(
    state: &StateDir,
    opts: &DaemonOptions,
    stop: &dyn Stop,
    emit: &mut dyn FnMut(&ServeEvent),
) -> Result<()> {
    state.ensure()?;
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
        .map_err(|e| Error::io("watch", state.path(), e.into()))?;
    let flags = AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_DELETE;
    inotify
        .add_watch(state.path(), flags)
        .map_err(|e| Error::io("watch", state.path(), e.into()))?;
    let listener = if opts.control {
        Some(listen(state)?)
    } else {
        None
    };
    let mut d = Daemon {
        state,
        opts,
        server: Server::new(),
        served: BTreeMap::new(),
    };
    for id in d.ids()? {
        d.sync(&id, emit);
    }
    emit(&ServeEvent::Ready {
        nics: d.served.len(),
    });
    loop {
        let mut fds: Vec<BorrowedFd<'_>> = vec![stop.fd(), inotify.as_fd()];
        fds.extend(listener.as_ref().map(AsFd::as_fd));
        let ready = d
            .server
            .turn(&fds)
            .map_err(|e| Error::io("poll", state.path(), e))?;
        if ready.contains(&0) && stop.take().is_some() {
            return Ok(());
        }
        if ready.contains(&1) {
            for id in changed(&inotify) {
                d.sync(&id, emit);
            }
        }
        if let (true, Some(l)) = (ready.contains(&2), &listener) {
            d.accept(l, emit);
        }
        d.drop_failed(emit);
    }
}

/// Bind the control socket (0600), replacing a stale one no daemon answers on.
fn listen(state: &StateDir) -> Result<UnixListener> {
    let path = state.path().join(CONTROL_SOCKET);
    if std::os::unix::net::UnixStream::connect(&path).is_ok() {
        return Err(Error::Busy {
            id: "serve".into(),
            lock: path,
        });
    }
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("remove stale", &path, e)),
    }
    let l = UnixListener::bind(&path).map_err(|e| Error::io("listen on", &path, e))?;
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(|e| Error::io("restrict", &path, e))?;
    l.set_nonblocking(true)
        .map_err(|e| Error::io("listen on", &path, e))?;
    Ok(l)
}

/// The attachments whose checkpoint files inotify reported.
fn changed(inotify: &Inotify) -> BTreeSet<SandboxId> {
    let mut ids = BTreeSet::new();
    while let Ok(events) = inotify.read_events() {
        if events.is_empty() {
            break;
        }
        for e in events {
            let name = e.name.as_ref().and_then(|n| n.to_str()).unwrap_or_default();
            if let Some(id) = name
                .strip_suffix(".json")
                .and_then(|n| SandboxId::new(n).ok())
            {
                ids.insert(id);
            }
        }
    }
    ids
}

impl Daemon<'_> {
    fn ids(&self) -> Result<Vec<SandboxId>> {
        Ok(match &self.opts.only {
            Some(id) => vec![id.clone()],
            None => self.state.ids()?,
        })
    }

    /// Bring what `id` serves in step with its checkpoint now.
    fn sync(&mut self, id: &SandboxId, emit: &mut dyn FnMut(&ServeEvent)) {
        if self.opts.only.as_ref().is_some_and(|only| only != id) {
            return;
        }
        let wanted = match self.wanted(id) {
            Ok(w) => w,
            Err(why) => {
                emit(&ServeEvent::Skipped {
                    id: id.to_string(),
                    why,
                });
                Vec::new()
            }
        };
        let keep: BTreeSet<&str> = wanted.iter().map(|w| w.tap.as_str()).collect();
        let gone: Vec<NicKey> = self
            .served
            .keys()
            .filter(|k| k.id == id.as_str() && !keep.contains(k.tap.as_str()))
            .cloned()
            .collect();
        for key in gone {
            self.stop_serving(&key, emit);
        }
        let fresh: Vec<Wanted> = wanted
            .into_iter()
            .filter(|w| {
                self.served
                    .get(&w.key())
                    .is_none_or(|(_, cfg)| *cfg != w.config)
            })
            .collect();
        if fresh.is_empty() {
            return;
        }
        match open_sockets(self.state, id, &fresh) {
            Ok(sockets) => {
                for (w, sock) in fresh.into_iter().zip(sockets) {
                    self.start_serving(w, sock, false, emit);
                }
            }
            Err(e) => emit(&ServeEvent::Skipped {
                id: id.to_string(),
                why: e.to_string(),
            }),
        }
    }

    /// The NICs of `id` to serve, with their configurations, or why none.
    fn wanted(&self, id: &SandboxId) -> std::result::Result<Vec<Wanted>, String> {
        let Some(cp) = self.state.load(id).map_err(|e| e.to_string())? else {
            return Ok(Vec::new());
        };
        if cp.phase() != Phase::Complete || cp.plan.nics.iter().all(|n| !n.serve) {
            return Ok(Vec::new());
        }
        let live = || {
            self.state
                .description_live(id, self.opts.table_answer_limit)
                .map_err(|e| e.to_string())
        };
        let mut desc = live()?;
        let unresolved = cp.plan.served_gateways_to_resolve(&desc);
        if !unresolved.is_empty() {
            // The guest's router MAC is the pod gateway's: have the pod
            // netns resolve it, as its first packet would, and look again.
            resolve(self.state, id, &unresolved);
            desc = live()?;
        }
        let mut out = Vec::new();
        for nic in cp.plan.nics.iter().filter(|n| n.serve) {
            let Some(iface) = desc
                .interfaces
                .iter()
                .find(|i| i.ifindex == nic.pod.ifindex)
            else {
                continue;
            };
            let (Some(tap), Some(config)) = (iface.tap.as_ref(), config_for(&desc, iface)) else {
                return Err(format!("{}: no configuration to serve", iface.name));
            };
            out.push(Wanted {
                id: id.to_string(),
                interface: iface.name.clone(),
                tap: tap.name.clone(),
                ifindex: tap.ifindex,
                config,
            });
        }
        Ok(out)
    }

    fn start_serving(
        &mut self,
        w: Wanted,
        sock: PacketSocket,
        handed_over: bool,
        emit: &mut dyn FnMut(&ServeEvent),
    ) {
        let responder = match Responder::new(w.config.clone()) {
            Ok(r) => r,
            Err(e) => {
                let why = format!("{}: {e}", w.interface);
                return emit(&ServeEvent::Skipped { id: w.id, why });
            }
        };
        let key = w.key();
        self.server.add(key.clone(), sock, responder);
        emit(&ServeEvent::Serving {
            id: w.id.clone(),
            interface: w.interface.clone(),
            tap: w.tap.clone(),
            handed_over,
        });
        self.served.insert(key, (w.interface, w.config));
    }

    fn stop_serving(&mut self, key: &NicKey, emit: &mut dyn FnMut(&ServeEvent)) {
        self.served.remove(key);
        let stats = self.server.remove(|k| k == key).pop().unwrap_or_default();
        emit(&stopped(key, &stats));
    }

    /// NICs whose socket failed (their TAP is gone): no longer served.
    fn drop_failed(&mut self, emit: &mut dyn FnMut(&ServeEvent)) {
        let failed: Vec<NicKey> = self
            .server
            .nics()
            .iter()
            .filter(|n| n.failed.is_some())
            .map(|n| n.key.clone())
            .collect();
        for key in failed {
            self.stop_serving(&key, emit);
        }
    }

    /// Take one hand-over from attach; errors are the connection's, never the daemon's.
    fn accept(&mut self, listener: &UnixListener, emit: &mut dyn FnMut(&ServeEvent)) {
        let Ok((stream, _)) = listener.accept() else {
            return;
        };
        let (handed, fds) = match control::receive(&stream) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("serve: a hand-over refused: {e}");
                return;
            }
        };
        // Answered before the work: the sockets are bound and queue what the
        // guest sends, so attach need not wait for the daemon to look the
        // attachment up (and perhaps resolve its gateway).
        control::answer(&stream, fds.len());
        drop(stream);
        self.take_handed(&handed, fds, emit);
    }

    fn take_handed(
        &mut self,
        handed: &Handed,
        fds: Vec<OwnedFd>,
        emit: &mut dyn FnMut(&ServeEvent),
    ) -> usize {
        let Ok(id) = SandboxId::new(&handed.id) else {
            return 0;
        };
        let wanted = match self.wanted(&id) {
            Ok(w) => w,
            Err(why) => {
                emit(&ServeEvent::Skipped {
                    id: id.to_string(),
                    why,
                });
                return 0;
            }
        };
        let mut served = 0;
        for ((tap, ifindex), fd) in handed.taps.iter().zip(fds) {
            let Some(w) = wanted
                .iter()
                .find(|w| w.tap == *tap && w.ifindex == *ifindex)
            else {
                continue;
            };
            self.start_serving(w.clone(), PacketSocket::from_fd(fd, *ifindex), true, emit);
            served += 1;
        }
        served
    }
}

/// One NIC to serve.
#[derive(Debug, Clone)]
struct Wanted {
    id: String,
    interface: String,
    tap: String,
    ifindex: u32,
    config: NicConfig,
}

impl Wanted {
    fn key(&self) -> NicKey {
        NicKey {
            id: self.id.clone(),
            tap: self.tap.clone(),
        }
    }
}

fn stopped(key: &NicKey, stats: &Stats) -> ServeEvent {
    ServeEvent::Stopped {
        id: key.id.clone(),
        tap: key.tap.clone(),
        answered: stats.answered,
        received: stats.received,
        rate_limited: stats.rate_limited,
    }
}

/// Ask the kernel in `id`'s netns to resolve each `(gateway, pod
/// interface)`, and wait until it has (a neighbour on the pod's link
/// answers within milliseconds) or RESOLVE_WAIT has passed; one that does
/// not answer is left to the next look. Attach resolves the gateways of the
/// NICs it serves before it wires them: this is for those it could not.
fn resolve(state: &StateDir, id: &SandboxId, gateways: &[(IpAddr, u32)]) {
    let asked = state.proven_netns(id).and_then(|ns| {
        let nl = crate::kernel::netlink::Netlink::connect(&ns)?;
        crate::kernel::resolve::resolve_neighbours(&nl.batch, gateways, RESOLVE_WAIT);
        Ok(())
    });
    if let Err(e) = asked {
        tracing::debug!("serve: sandbox {id}: resolving its gateways: {e}");
    }
}

/// How long the daemon waits for a pod's gateway to answer.
const RESOLVE_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// A packet socket on each TAP of `wanted`, opened in `id`'s proven netns
/// after checking each ifindex still names its TAP.
fn open_sockets(state: &StateDir, id: &SandboxId, wanted: &[Wanted]) -> Result<Vec<PacketSocket>> {
    let ns = state.proven_netns(id)?;
    let taps: Vec<(String, u32)> = wanted.iter().map(|w| (w.tap.clone(), w.ifindex)).collect();
    ns.run(move || open_in_netns(&taps))
}

/// On a thread inside the pod netns: one packet socket per `(name, ifindex)`.
pub(super) fn open_in_netns(taps: &[(String, u32)]) -> std::io::Result<Vec<PacketSocket>> {
    taps.iter()
        .map(|(name, ifindex)| {
            let now = nix::net::if_::if_nametoindex(name.as_str()).map_err(std::io::Error::from)?;
            if now != *ifindex {
                return Err(std::io::Error::other(format!(
                    "TAP {name} has ifindex {now}, not the recorded {ifindex}"
                )));
            }
            PacketSocket::open(*ifindex)
        })
        .collect()
}

/// One attachment's served NICs, served on a thread of their own until
/// dropped (what `watch --serve` and `podtap demo` run): what it does goes
/// to the log.
#[derive(Debug)]
pub struct Serving {
    stopper: std::sync::Arc<crate::stop::Stopper>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Serving {
    /// Serve `id`'s served NICs from now on: returns once their sockets
    /// are bound (or the thread gave up, which the log says).
    pub fn start(state: &StateDir, id: &SandboxId, table_answer_limit: usize) -> Result<Self> {
        let stopper = std::sync::Arc::new(crate::stop::Stopper::new()?);
        let opts = DaemonOptions {
            only: Some(id.clone()),
            control: false,
            table_answer_limit,
        };
        let (theirs, state) = (stopper.clone(), state.clone());
        let (ready, is_ready) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("podtap-serve".into())
            .spawn(move || {
                let log = &mut |e: &ServeEvent| {
                    tracing::info!(event = ?e, "serve");
                    if matches!(e, ServeEvent::Ready { .. }) {
                        let _ = ready.send(());
                    }
                };
                if let Err(e) = daemon(&state, &opts, theirs.as_ref(), log) {
                    tracing::warn!("serving stopped: {e}");
                }
            })
            .map_err(|e| Error::io("start", "the serving thread", e))?;
        // A thread that failed dropped its sender: no wait then.
        let _ = is_ready.recv_timeout(std::time::Duration::from_secs(10));
        Ok(Serving {
            stopper,
            thread: Some(thread),
        })
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stopper.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
