//! What wakes a watch: SIGTERM/SIGINT (a signalfd), netlink announcements
//! from the pod netns, and checkpoints that come and go in the state dir
//! (inotify); and letting a burst of announcements settle.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::error::{Error, Result};
use crate::kernel::netns::NetNs;
use crate::kernel::subscribe::Subscription;
use crate::state::{SandboxId, StateDir};

/// How long a burst of netlink announcements may go quiet before a round.
pub const SETTLE: Duration = Duration::from_millis(100);
/// The longest a round waits for a burst to go quiet.
const SETTLE_MAX: Duration = Duration::from_secs(1);

/// SIGTERM/SIGINT, blocked on this thread and read from a signalfd.
pub(super) struct Signals {
    fd: SignalFd,
    old: SigSet,
}

impl Signals {
    pub(super) fn block() -> Result<Self> {
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
    pub(super) fn take(&self) -> Option<String> {
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
    pub(super) fn restore(self) {
        while self.take().is_some() {}
        let _ = self.old.thread_set_mask();
    }
}

/// What a wait saw.
pub(super) struct Woke {
    /// Netlink announcements arrived from the netns.
    pub(super) netns: bool,
    /// A checkpoint in the state dir came, changed or went.
    pub(super) state: bool,
    /// The timeout passed.
    pub(super) timeout: bool,
}

/// The netns subscription and the state dir's inotify of one watch.
pub(super) struct Wakeups {
    subscription: Subscription,
    inotify: Inotify,
    /// `<id>.json`: our own checkpoint's file name.
    own: String,
    /// The netns, for errors.
    netns: String,
}

impl Wakeups {
    /// Subscribe to `ns` and watch the state dir for `id`'s watch.
    pub(super) fn open(ns: &NetNs, state: &StateDir, id: &SandboxId) -> Result<Self> {
        let subscription = Subscription::open(ns)?;
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
        Ok(Wakeups {
            subscription,
            inotify,
            own: format!("{id}.json"),
            netns: ns.display(),
        })
    }

    /// Wait for the netns, the state dir or a signal (up to `timeout`).
    pub(super) fn wait(&self, signals: &Signals, timeout: Option<Duration>) -> Result<Woke> {
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
            && self
                .subscription
                .drain()
                .map_err(|e| Error::kernel(&self.netns, "read", "netlink announcements", e))?;
        let state = ready(&fds[1]) && self.state_news();
        Ok(Woke {
            netns,
            state,
            timeout: n == 0 && timeout.is_some(),
        })
    }

    /// Another attachment's checkpoint came or went, or ours went; our
    /// own saves are not news.
    fn state_news(&self) -> bool {
        self.inotify.read_events().is_ok_and(|events| {
            events
                .iter()
                .any(|e| match e.name.as_ref().and_then(|n| n.to_str()) {
                    Some(name) if name == self.own => e
                        .mask
                        .intersects(AddWatchFlags::IN_DELETE | AddWatchFlags::IN_MOVED_FROM),
                    Some(name) => name.ends_with(".json"),
                    None => true,
                })
        })
    }

    /// Let a burst of announcements go quiet ([`SETTLE`], at most [`SETTLE_MAX`]).
    pub(super) fn settle(&self, signals: &Signals) -> Result<()> {
        let until = Instant::now() + SETTLE_MAX;
        while Instant::now() < until {
            let woke = self.wait(signals, Some(SETTLE))?;
            if !woke.netns && !woke.state {
                break;
            }
        }
        Ok(())
    }
}
