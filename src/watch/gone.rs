//! Noticing that the pod is gone while `podtap watch` follows it.
//!
//! Deleting a pod removes its netns's bind mount (`ip netns del`, a
//! runtime's unpin) and ends its processes, but the netns itself lives on
//! while anything holds it, and watch does: its netns fd and its netlink
//! subscription are made inside it. So "the netns still exists" proves
//! nothing; "something other than watch holds it" does. Watch checks the
//! path it holds it through (a bind mount or a process, opened `O_PATH`,
//! its `(dev, inode)` compared: a number podtap itself holds cannot have
//! been reused), and when that path no longer names it, looks for any other
//! holder ([`netns_search::held_by_others`]: bind mounts of this mount
//! namespace, root-owned processes inside it or with an fd on it). None:
//! the pod is gone; watch says so (`netns_gone`) and exits 3, releasing the
//! netns, and leaves the checkpoint for teardown (CNI DEL, OCI poststop or
//! `podtap detach`).
//!
//! What wakes that check, without polling, by the kind of holder:
//! - a process (`/proc/PID/ns/net`): its pidfd, readable once it exits. A
//!   holder that moves itself to another netns without exiting is seen at
//!   the next check another holder's event brings, not before. Preferred:
//!   when the holder is a bind mount and a root-owned process is inside the
//!   netns too (a pod's pause process, a VMM), watch follows the process.
//! - a bind mount with no process inside (any other path that is not a
//!   symlink): `/proc/self/mountinfo`, which signals POLLPRI on every change
//!   of this mount namespace's mount table. So any mount or unmount on the
//!   node wakes every watch that follows a bind mount, for one `open(O_PATH)`
//!   and `fstat` each (no round).
//! - anything else (a process's open fd, `/proc/PID/fd/N`, which it may
//!   close at any time; a thread's `ns/net`; a symlink; no pidfd): a check
//!   every [`TICK`], as before.
//!
//! News of the checkpoints (`state::News`) and the netlink subscription wake
//! watch for rounds; neither runs this check.

use std::fs::File;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags};

use crate::error::Error;
use crate::kernel::netns_id::NetnsId;
use crate::kernel::netns_search;

use super::event::Event;

/// How often watch checks a holder that signals nothing when it lets go.
pub const TICK: Duration = Duration::from_millis(500);

/// What tells watch to check its holder again.
enum Signal {
    /// The holder process's pidfd: readable once it exits.
    Exit(OwnedFd),
    /// `/proc/self/mountinfo`: POLLPRI on a change of the mount table.
    Mounts(File),
    /// Nothing: check at this instant, then every [`TICK`].
    Tick(Instant),
}

impl Signal {
    /// The signal for a holder reached through `path`.
    fn of(path: &Path) -> Self {
        let tick = Signal::Tick(Instant::now() + TICK);
        let parts: Vec<&str> = path.to_str().unwrap_or("").split('/').collect();
        match parts.as_slice() {
            ["", "proc", pid, "ns", "net"] => match pid.parse::<libc::pid_t>() {
                Ok(pid) if pid > 0 => pidfd(pid).map_or(tick, Signal::Exit),
                _ => tick,
            },
            ["", "proc", ..] => tick,
            _ if std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_symlink()) => {
                File::open("/proc/self/mountinfo").map_or(tick, Signal::Mounts)
            }
            _ => tick,
        }
    }
}

/// A pidfd of `pid` (Linux 5.3), or `None`.
fn pidfd(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the kernel just gave us this fd; nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The liveness check of one watch.
pub(super) struct Liveness {
    want: NetnsId,
    /// The path something else holds the netns through, as last seen.
    holder: PathBuf,
    signal: Signal,
    /// Check at the next wake, whatever signalled.
    recheck: bool,
}

impl Liveness {
    /// Follow `want`, held (when watch started) through `holder`.
    pub(super) fn new(want: NetnsId, holder: PathBuf) -> Self {
        let mut alive = Liveness {
            want,
            holder: PathBuf::new(),
            signal: Signal::Tick(Instant::now()),
            recheck: true,
        };
        alive.follow(holder);
        alive
    }

    /// Follow `holder`; for a bind mount, a process inside the netns instead
    /// when there is one (its exit is a signal of its own; a mount-table
    /// change is every mount's).
    fn follow(&mut self, holder: PathBuf) {
        let signal = Signal::of(&holder);
        if let Signal::Mounts(_) = signal {
            if let Some(process) = netns_search::process_inside(&self.want) {
                if let exit @ Signal::Exit(_) = Signal::of(&process) {
                    self.signal = exit;
                    self.holder = process;
                    return;
                }
            }
        }
        self.signal = signal;
        self.holder = holder;
    }

    /// What to poll for the holder letting go, if anything.
    pub(super) fn poll_fd(&self) -> Option<PollFd<'_>> {
        match &self.signal {
            Signal::Exit(fd) => Some(PollFd::new(fd.as_fd(), PollFlags::POLLIN)),
            Signal::Mounts(file) => Some(PollFd::new(file.as_fd(), PollFlags::POLLPRI)),
            Signal::Tick(_) => None,
        }
    }

    /// `timeout`, shortened to the next check when the holder signals nothing.
    pub(super) fn timeout(&self, timeout: Option<Duration>) -> Option<Duration> {
        if self.recheck {
            return Some(Duration::ZERO);
        }
        match self.signal {
            Signal::Tick(next) => {
                let tick = next.saturating_duration_since(Instant::now());
                Some(timeout.map_or(tick, |t| t.min(tick)))
            }
            _ => timeout,
        }
    }

    /// Whether nothing but this process holds the netns any more; checked
    /// when `signalled` (the fd of [`Self::poll_fd`] fired), when a tick is
    /// due, and once at the start.
    pub(super) fn gone(&mut self, signalled: bool) -> bool {
        let due = match self.signal {
            Signal::Tick(next) => Instant::now() >= next,
            _ => signalled,
        };
        if !due && !self.recheck {
            return false;
        }
        self.recheck = false;
        if let Signal::Tick(_) = self.signal {
            self.signal = Signal::Tick(Instant::now() + TICK);
        }
        // The signal of a holder is armed before its path is checked, so a
        // holder that lets go in between is still seen.
        for _ in 0..3 {
            if self.names_it() {
                if signalled && matches!(self.signal, Signal::Exit(_)) {
                    // Fired but still named (never expected): a fresh pidfd,
                    // so a readable one is not polled again and again.
                    self.signal = Signal::of(&self.holder);
                }
                return false;
            }
            match netns_search::held_by_others(&self.want) {
                Some(holder) => self.follow(holder),
                None => return true,
            }
        }
        // Holders that come and go: look again at once.
        self.recheck = true;
        false
    }

    /// Whether the last known holder's path still names the netns.
    fn names_it(&self) -> bool {
        // O_PATH: never blocks, never has side effects.
        let Ok(fd) = nix::fcntl::open(
            &self.holder,
            nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        ) else {
            return false;
        };
        let file = File::from(fd);
        file.metadata()
            .is_ok_and(|m| (m.dev(), m.ino()) == self.want.pair())
    }

    /// Say that the pod is gone (`emit`) and the error watch exits with (3).
    pub(super) fn exit(&self, id: &str, path: &str, emit: &mut dyn FnMut(&Event)) -> Error {
        emit(&Event::NetnsGone {
            id: id.to_string(),
            netns: path.to_string(),
        });
        Error::PodDeleted {
            id: id.to_string(),
            netns: PathBuf::from(path),
        }
    }
}
