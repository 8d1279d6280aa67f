//! One thread that stays in a netns and runs podtap's work there.
//!
//! `setns(2)` changes only the calling thread. A command acts inside the
//! pod netns several times (open its netlink sockets, the `/dev/net/tun`
//! fds its TAPs are made on and the link deleter's sockets, read sysctls):
//! one thread enters once and takes each of those as a job, instead of a
//! thread spawned, moved and joined per visit. What such an fd or socket
//! does afterwards happens in its netns whichever thread uses it, so the
//! caller makes the TAPs and starts the deleter itself. The thread
//! ends when its [`NetnsWorker`] is dropped (its job queue closes); it is
//! never joined, so dropping one costs nothing.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::mpsc;

use nix::sched::{setns, CloneFlags};

use super::errno;
use crate::error::{Error, Result};

type Job = Box<dyn FnOnce() + Send>;

/// The handle on a thread inside one netns.
#[derive(Debug)]
pub struct NetnsWorker {
    jobs: mpsc::Sender<Job>,
    netns: String,
}

impl NetnsWorker {
    /// Start a thread in the netns `fd` (named `netns` in errors) that runs
    /// `first` there while the caller goes on; [`Starting::wait`] returns its
    /// result with the worker, and fails as `first` does or when the netns
    /// cannot be entered. Dropped unwaited, the thread ends after `first`.
    pub fn spawn<T: Send + 'static>(
        fd: OwnedFd,
        netns: String,
        first: impl FnOnce() -> io::Result<T> + Send + 'static,
    ) -> io::Result<Starting<T>> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, started) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("podtap-netns".into())
            .spawn(move || {
                let entered = setns(&fd, CloneFlags::CLONE_NEWNET).map_err(io::Error::from);
                drop(fd);
                let outcome = entered.and_then(|()| first());
                let ok = outcome.is_ok();
                let _ = ready.send(outcome);
                if ok {
                    for job in queue {
                        job();
                    }
                }
            })?;
        Ok(Starting {
            worker: NetnsWorker { jobs, netns },
            started,
        })
    }

    /// Run `work` in the netns and wait for its result.
    pub fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> io::Result<T> + Send + 'static,
    ) -> Result<T> {
        self.start(work)?
            .wait()?
            .map_err(|e| errno::in_netns(&self.netns, "work inside the netns", "", e))
    }

    /// Queue `work` to run in the netns, after the jobs before it, and
    /// return at once; [`Pending::wait`] gives its result.
    pub fn start<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Pending<T>> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(move || {
            let _ = tx.send(work());
        })?;
        Ok(Pending {
            result: rx,
            gone: self.gone(),
        })
    }

    /// Queue `job` to run in the netns, after the jobs before it, and return
    /// at once.
    pub fn submit(&self, job: impl FnOnce() + Send + 'static) -> Result<()> {
        self.jobs.send(Box::new(job)).map_err(|_| self.gone())
    }

    fn gone(&self) -> Error {
        Error::io(
            "run work in netns",
            self.netns.clone(),
            io::Error::other("the netns thread ended"),
        )
    }
}

/// Work queued on a [`NetnsWorker`].
#[derive(Debug)]
pub struct Pending<T> {
    result: mpsc::Receiver<T>,
    /// The error if the thread ends before the work is done.
    gone: Error,
}

impl<T> Pending<T> {
    /// Wait for the work's result.
    pub fn wait(self) -> Result<T> {
        self.result.recv().map_err(|_| self.gone)
    }
}

impl<T> Pending<io::Result<T>> {
    /// What work that opens something ahead opened; `None` when it failed
    /// (said at debug level, naming `what`) or the thread ended, and the
    /// caller then has the netns thread do the whole of it.
    pub fn opened(self, what: &str) -> Option<T> {
        match self.result.recv() {
            Ok(Ok(value)) => Some(value),
            Ok(Err(e)) => {
                tracing::debug!("opening {what} ahead failed ({e}); the netns thread does it all");
                None
            }
            Err(_) => None,
        }
    }
}

/// A [`NetnsWorker`] whose first job may still be running.
#[derive(Debug)]
pub struct Starting<T> {
    worker: NetnsWorker,
    started: mpsc::Receiver<io::Result<T>>,
}

impl<T> Starting<T> {
    /// Wait for the first job and return the worker with its result.
    pub fn wait(self) -> io::Result<(NetnsWorker, T)> {
        let value = self
            .started
            .recv()
            .map_err(|_| io::Error::other("netns thread ended before it started"))??;
        Ok((self.worker, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_in_order_on_one_thread() {
        // Our own netns: entering it changes nothing.
        let fd = std::fs::File::open("/proc/thread-self/ns/net").map(OwnedFd::from);
        let Ok(fd) = fd else {
            eprintln!("skipped: no /proc/thread-self/ns/net");
            return;
        };
        let started = NetnsWorker::spawn(fd, "self".into(), || Ok(std::thread::current().id()))
            .and_then(Starting::wait);
        let (worker, first) = match started {
            Ok(w) => w,
            // setns needs CAP_SYS_ADMIN even into one's own netns.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                eprintln!("skipped: setns needs root");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let second = worker.run(|| Ok(std::thread::current().id())).unwrap();
        assert_eq!(first, second);
        assert_ne!(first, std::thread::current().id());
        let failed = worker.run(|| -> io::Result<()> { Err(io::Error::other("no")) });
        assert!(failed.is_err());
        // The worker outlives a failed job.
        assert!(worker.run(|| Ok(1)).is_ok());
    }
}
