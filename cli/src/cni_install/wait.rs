//! `cni-install --wait`: keep podtap chained, and the state dir swept,
//! until SIGTERM or SIGINT.
//!
//! The node's CNI rewrites its configuration when its own pod restarts
//! (Flannel's init container, Calico's install-cni, the Cilium agent, Multus
//! regenerating its file), and the rewrite drops podtap's entry. The conf
//! dir is watched with inotify; after each burst of changes podtap chains
//! itself in again, which changes nothing when it is still there (so its
//! own writes settle after one round). Between bursts, every sweep period,
//! the state dir is swept (`podtap::sweep`).

use std::os::fd::AsFd;
use std::path::Path;
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use serde_json::Value;

use crate::error::{Error, Result};

/// How long the conf dir must be quiet before podtap chains in again: an
/// installer writes a temporary file and renames it, or writes several files.
const SETTLE: Duration = Duration::from_millis(200);

/// The watches on the conf and bin dirs, and the signals that end the wait.
/// Made before the first install, so no change after it goes unseen.
pub struct Watch {
    signals: SignalFd,
    changes: Inotify,
}

impl Watch {
    /// Watch `conf_dir` and `bin_dir`, and take SIGTERM and SIGINT.
    ///
    /// The signals are blocked and read from a signalfd: as a container's
    /// PID 1, a signal whose action is the default would be dropped, but a
    /// blocked one is always queued. The CLI has no other thread to take
    /// them instead.
    pub fn start(conf_dir: &Path, bin_dir: &Path) -> Result<Watch> {
        let failed = |what: &'static str, e: nix::errno::Errno| Error::io(what, conf_dir, e.into());
        let mut set = SigSet::empty();
        set.add(Signal::SIGTERM);
        set.add(Signal::SIGINT);
        set.thread_block()
            .map_err(|e| failed("block SIGTERM/SIGINT", e))?;
        let signals =
            SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC).map_err(|e| failed("signalfd", e))?;
        let changes = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK)
            .map_err(|e| failed("inotify_init", e))?;
        let watched = AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE;
        changes
            .add_watch(conf_dir, watched)
            .map_err(|e| failed("watch the CNI conf dir", e))?;
        changes
            .add_watch(
                bin_dir,
                AddWatchFlags::IN_DELETE | AddWatchFlags::IN_MOVED_FROM,
            )
            .map_err(|e| failed("watch the CNI bin dir", e))?;
        Ok(Watch { signals, changes })
    }

    /// Chain `entry` in again after every change, and call `sweep` every
    /// `every` (never when zero), until SIGTERM or SIGINT arrives; the
    /// signal. The binary in `bin_dir` is put back when it goes (an
    /// earlier release's pod removed it when it stopped).
    pub fn keep_chained(
        &self,
        (conf_dir, bin_dir, entry): (&Path, &Path, &Value),
        every: Duration,
        sweep: &mut dyn FnMut(),
    ) -> Result<Signal> {
        let settle = PollTimeout::try_from(SETTLE).unwrap_or(PollTimeout::MAX);
        let period = match every.is_zero() {
            true => PollTimeout::NONE,
            false => PollTimeout::try_from(every).unwrap_or(PollTimeout::MAX),
        };
        loop {
            match self.wake(period)? {
                Wake::Signal(signal) => return Ok(signal),
                Wake::Quiet => {
                    sweep();
                    continue;
                }
                Wake::Changed => {}
            }
            // Let the burst finish: any change within SETTLE restarts the wait.
            loop {
                match self.wake(settle)? {
                    Wake::Signal(signal) => return Ok(signal),
                    Wake::Changed => continue,
                    Wake::Quiet => break,
                }
            }
            repair(conf_dir, bin_dir, entry);
        }
    }

    /// Wait for SIGTERM or SIGINT, whatever changes meanwhile.
    pub fn until_signal(&self) -> Result<Signal> {
        loop {
            if let Wake::Signal(signal) = self.wake(PollTimeout::NONE)? {
                return Ok(signal);
            }
        }
    }

    /// Wait up to `timeout` for a signal or a change in a watched dir.
    fn wake(&self, timeout: PollTimeout) -> Result<Wake> {
        let mut fds = [
            PollFd::new(self.signals.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.changes.as_fd(), PollFlags::POLLIN),
        ];
        let ready = loop {
            match poll(&mut fds, timeout) {
                Err(nix::errno::Errno::EINTR) => continue,
                other => {
                    break other.map_err(|e| Error::io("poll", "signalfd/inotify", e.into()))?
                }
            }
        };
        if ready == 0 {
            return Ok(Wake::Quiet);
        }
        let readable = |fd: &PollFd| fd.revents().is_some_and(|r| r.contains(PollFlags::POLLIN));
        if readable(&fds[0]) {
            let info = self
                .signals
                .read_signal()
                .map_err(|e| Error::io("read", "signalfd", e.into()))?;
            let signal = info
                .and_then(|i| Signal::try_from(i32::try_from(i.ssi_signo).ok()?).ok())
                .unwrap_or(Signal::SIGTERM);
            return Ok(Wake::Signal(signal));
        }
        // Drain: the events themselves do not matter, only that something changed.
        while self
            .changes
            .read_events()
            .is_ok_and(|events| !events.is_empty())
        {}
        Ok(Wake::Changed)
    }
}

/// Put the binary back if it went and chain podtap in again if it was
/// dropped; one line for each thing done, and failures only reported.
fn repair(conf_dir: &Path, bin_dir: &Path, entry: &Value) {
    if !bin_dir.join("podtap").exists() {
        match super::install_binary(bin_dir) {
            Ok(bin) => eprintln!("podtap: binary at {} again", bin.display()),
            Err(e) => eprintln!("podtap: cannot install the binary: {e}; still watching"),
        }
    }
    match super::install(conf_dir, entry) {
        Ok((file, true)) => eprintln!("podtap: chained again in {}", file.display()),
        Ok((_, false)) => {}
        Err(e) => eprintln!("podtap: cannot chain: {e}; still watching"),
    }
}

/// What ended a wait.
enum Wake {
    Signal(Signal),
    /// The conf dir changed (the events are drained).
    Changed,
    /// The time ran out.
    Quiet,
}
