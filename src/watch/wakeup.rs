//! What wakes a watch: its caller's [`Stop`], netlink announcements
//! from the pod netns, and news of the checkpoints that record this netns
//! (a FIFO in its news directory, `state::News`: a checkpoint of another
//! netns wakes no watch); and letting a burst of announcements settle.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::error::{Error, Result};
use crate::kernel::netns::NetNs;
use crate::kernel::subscribe::Subscription;
use crate::state::{News, SandboxId, StateDir, Told};

use super::Stop;

/// How long a burst of netlink announcements may go quiet before a round.
pub const SETTLE: Duration = Duration::from_millis(100);
/// The longest a round waits for a burst to go quiet.
const SETTLE_MAX: Duration = Duration::from_secs(1);

/// What a wait saw.
pub(super) struct Woke {
    /// Netlink announcements arrived from the netns.
    pub(super) netns: bool,
    /// The liveness fd (`gone.rs`) fired.
    pub(super) alive: bool,
    /// A checkpoint in the state dir came, changed or went.
    pub(super) state: bool,
    /// The timeout passed.
    pub(super) timeout: bool,
}

/// The netns subscription and the news of one watch.
pub(super) struct Wakeups {
    subscription: Subscription,
    news: News,
    /// Our own id: the name in our own checkpoint's news.
    own: String,
    /// The netns, for errors.
    netns: String,
}

impl Wakeups {
    /// Subscribe to `ns` and hold its news directory for `id`'s watch.
    pub(super) fn open(ns: &NetNs, state: &StateDir, id: &SandboxId) -> Result<Self> {
        let subscription = Subscription::open(ns)?;
        let news = News::hold(state.path(), ns.identity(), id)?;
        Ok(Wakeups {
            subscription,
            news,
            own: id.to_string(),
            netns: ns.display(),
        })
    }

    /// Let another watch of the netns have the news directory, or remove it.
    pub(super) fn leave(self) {
        self.news.leave();
    }

    /// Wait for the netns, the news, `alive` (see `gone.rs`) or `stop`
    /// (up to `timeout`).
    pub(super) fn wait(
        &mut self,
        stop: &dyn Stop,
        alive: Option<PollFd<'_>>,
        timeout: Option<Duration>,
    ) -> Result<Woke> {
        let mut fds = vec![
            PollFd::new(self.subscription.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.news.fd(), PollFlags::POLLIN),
            PollFd::new(stop.fd(), PollFlags::POLLIN),
        ];
        fds.extend(alive);
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
        let (netns_ready, news_ready) = (ready(&fds[0]), ready(&fds[1]));
        let alive = fds.get(3).is_some_and(ready);
        drop(fds);
        let netns = netns_ready
            && self
                .subscription
                .drain()
                .map_err(|e| Error::kernel(&self.netns, "read", "netlink announcements", e))?;
        let state = news_ready && self.state_news();
        Ok(Woke {
            netns,
            alive,
            state,
            timeout: n == 0 && timeout.is_some(),
        })
    }

    /// Another attachment's checkpoint of this netns was saved or went, or
    /// ours went; our own saves are not news.
    fn state_news(&mut self) -> bool {
        self.news
            .read()
            .iter()
            .any(|(told, id)| *id != self.own || *told == Told::Removed)
    }

    /// Let a burst of announcements go quiet ([`SETTLE`], at most [`SETTLE_MAX`]).
    pub(super) fn settle(&mut self, stop: &dyn Stop) -> Result<()> {
        let until = Instant::now() + SETTLE_MAX;
        while Instant::now() < until {
            let woke = self.wait(stop, None, Some(SETTLE))?;
            if !woke.netns && !woke.state {
                break;
            }
        }
        Ok(())
    }
}
