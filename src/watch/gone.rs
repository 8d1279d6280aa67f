//! Noticing that the pod is gone while `podtap watch` follows it.
//!
//! Deleting a pod removes its netns's bind mount (`ip netns del`, a
//! runtime's unpin) and ends its processes, but the netns itself lives on
//! while anything holds it, and watch does: its netns fd and its netlink
//! subscription are made inside it. So "the netns still exists" proves
//! nothing; "something other than watch holds it" does. Every [`TICK`]
//! watch checks the path it holds it through (a bind mount or a process,
//! opened `O_PATH`, its `(dev, inode)` compared: a number podtap itself
//! holds cannot have been reused), and when that path no longer names it,
//! looks for any other holder ([`netns_search::held_by_others`]: bind
//! mounts of this mount namespace, root-owned processes inside it or with
//! an fd on it). None: the pod is gone; watch says so (`netns_gone`) and
//! exits 3, releasing the netns, and leaves the checkpoint for teardown
//! (CNI DEL, OCI poststop or `podtap detach`).

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::kernel::netns_id::NetnsId;
use crate::kernel::netns_search;

use super::event::Event;

/// How often watch checks that its pod netns has a holder besides itself.
pub const TICK: Duration = Duration::from_millis(500);

/// The liveness check of one watch.
pub(super) struct Liveness {
    want: NetnsId,
    /// The path something else holds the netns through, as last seen.
    holder: PathBuf,
    next: Instant,
}

impl Liveness {
    /// Follow `want`, held (when watch started) through `holder`.
    pub(super) fn new(want: NetnsId, holder: PathBuf) -> Self {
        Liveness {
            want,
            holder,
            next: Instant::now() + TICK,
        }
    }

    /// `timeout`, shortened to the next check.
    pub(super) fn timeout(&self, timeout: Option<Duration>) -> Option<Duration> {
        let tick = self.next.saturating_duration_since(Instant::now());
        Some(timeout.map_or(tick, |t| t.min(tick)))
    }

    /// Whether nothing but this process holds the netns any more (checked
    /// at most once per [`TICK`]).
    pub(super) fn gone(&mut self) -> bool {
        let now = Instant::now();
        if now < self.next {
            return false;
        }
        self.next = now + TICK;
        if self.names_it() {
            return false;
        }
        match netns_search::held_by_others(&self.want) {
            Some(holder) => {
                self.holder = holder;
                false
            }
            None => true,
        }
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
        let file = std::fs::File::from(fd);
        file.metadata()
            .is_ok_and(|m| (m.dev(), m.ino()) == self.want.pair())
    }

    /// Say that the pod is gone (`emit`) and the error watch exits with (3).
    pub(super) fn exit(&self, id: &str, path: &str, emit: &mut dyn FnMut(&Event)) -> Error {
        emit(&Event::NetnsGone {
            id: id.to_string(),
            netns: path.to_string(),
        });
        Error::NetnsMissing {
            path: PathBuf::from(path),
            hint: " (the pod was deleted; the checkpoint is left for detach)",
        }
    }
}
