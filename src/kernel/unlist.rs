//! Delete links, and return as soon as the kernel has unlisted them.
//!
//! An rtnetlink request runs inside the sender's `sendmsg(2)`. A link
//! deletion unlists the link and announces it (`RTM_DELLINK`) under RTNL,
//! then drops RTNL and, still inside that `sendmsg`, waits in
//! `netdev_run_todo` for an `rcu_barrier()` and for the last references
//! (10-15 ms, whatever the number of links). By then the name, the ifindex
//! and the link's tc objects are gone from the netns, and RTNL is free.
//!
//! So a forked child process sends the requests, one at a time, and waits out their
//! acks, while the caller returns once it has seen an `RTM_DELLINK` for every
//! link it expects (or the child has finished). [`Delete::Drained`] links
//! (bridges) are not expected at all: the child deletes them after the
//! others, one at a time on the node ([`unlist_child::DRAIN_LOCK`]). The child does nothing but
//! async-signal-safe system calls (no allocation, no locks: the parent may
//! have other threads), points its stdin/stdout/stderr at /dev/null so a runtime reading
//! our output sees EOF when we exit, closes every other fd it inherited
//! (`close_range`), and is reaped by a detached thread (or, once this
//! process has exited, by whoever inherits it).
//!
//! A CNI DEL puts the whole deletion off ([`When::AfterPodLinks`]): the
//! next plugin of the chain deletes the pod's veth right after podtap's DEL
//! returns, and its own `rcu_barrier()` would wait behind ours. The child
//! then waits for that veth's `RTM_DELLINK` first, and the caller returns
//! as soon as the child has started.
//!
//! Every wait is bounded (docs/attach.md, "Bounded waits"): the
//! announcements ([`ANNOUNCE_TIMEOUT`]), then the child ([`CHILD_TIMEOUT`]:
//! requests it has not answered by then fail with ETIMEDOUT), each ack in
//! the child ([`ACK_TIMEOUT`]) and the drain lock
//! ([`unlist_child::DRAIN_LOCK_WAIT`]). Only the kernel's
//! announcements and acks count (sender port 0).

use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::wait::waitpid;
use rtnetlink::packet_core::{NLM_F_ACK, NLM_F_REQUEST};
use rtnetlink::packet_route::link::{LinkAttribute, LinkMessage};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use super::errno;
use super::netns_worker::{NetnsWorker, Pending};
use super::nlrecv;
use super::unlist_child::{self, seq_of, Defer};
use super::wire;

/// One link deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delete {
    /// Every link in this group (one request: one grace period for all).
    Group(u32),
    /// One link.
    Link(u32),
    /// One link whose deletion the caller does not wait for (a bridge: see
    /// [`unlist_child::DRAIN_LOCK`]). These come after every other request.
    Drained(u32),
}

/// When the child sends the deletions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    /// At once; the caller returns once the links are unlisted.
    Now,
    /// Once the kernel announces the deletion of one of these pod
    /// interfaces (or after `after.at_most`), and `after.settle` later:
    /// the caller returns at once, every request counted as done.
    /// `netns_lock` is the fd of the netns the caller holds the attach lock
    /// on: the child keeps the lock until it is done (see
    /// [`crate::kernel::netns_lock::NetnsLock::hand_over`]).
    AfterPodLinks {
        pod_links: Vec<u32>,
        netns_lock: std::os::fd::RawFd,
        after: AfterPodLinks,
    },
}

/// How long a deferred deletion waits: the caller's timing (a CNI chain's
/// next plugin deletes the pod's veth a few milliseconds after DEL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfterPodLinks {
    /// The longest wait for a pod interface's deletion before going ahead.
    pub at_most: Duration,
    /// The wait after that deletion was announced (the deleting plugin's
    /// own `rcu_barrier()` in the kernel, which a deletion of ours in
    /// between would double).
    pub settle: Duration,
}

/// How long to wait for the announcements before waiting for the child itself.
const ANNOUNCE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the child waits for each ack (`SO_RCVTIMEO` on its socket);
/// a request left unanswered is reported as ETIMEDOUT.
const ACK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the caller waits for the child after [`ANNOUNCE_TIMEOUT`];
/// requests it has not answered by then count as failed (ETIMEDOUT), so
/// teardown keeps its checkpoint for a retry.
const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

/// The two sockets a deletion uses, made inside the netns: one that
/// watches for `RTM_DELLINK` (subscribed only when the deletion starts) and
/// one the child sends the requests on.
pub struct Sockets {
    watch: Socket,
    sender: Socket,
}

impl Sockets {
    /// Open both in the calling thread's netns.
    fn open() -> std::io::Result<Self> {
        let mut watch = Socket::new(NETLINK_ROUTE)?;
        watch.bind(&SocketAddr::new(0, 0))?;
        nlrecv::from_kernel_only(&watch)?;
        watch.set_non_blocking(true)?;
        let mut sender = Socket::new(NETLINK_ROUTE)?;
        sender.bind_auto()?;
        nlrecv::from_kernel_only(&sender)?;
        unlist_child::set_receive_timeout(&sender, ACK_TIMEOUT)?;
        Ok(Sockets { watch, sender })
    }
}

/// [`Sockets`] the netns thread opens while the caller does other work
/// (teardown reads what to undo meanwhile), so that [`delete`] runs on the
/// caller's own thread: handing the deletion to the netns thread and its
/// answer back cost a detach two thread wake-ups on its path (about 0.1 ms
/// here, most of it waking an idle CPU).
pub struct Prepared(Pending<std::io::Result<Sockets>>);

impl Prepared {
    /// Queue the opening on `worker`; `None` if its thread has ended.
    pub fn start(worker: &NetnsWorker) -> Option<Self> {
        worker.start(Sockets::open).ok().map(Prepared)
    }
}

/// Carry out `deletes` in order in the netns of `worker` and return when every
/// link in `expect` has been unlisted (or every request has been answered),
/// or, deferred (`when`), once the child has started.
/// One result per request: `Ok` when it succeeded or is still running after
/// its links were unlisted, else its errno. With `prepared` sockets that
/// opened, the caller's thread does the work; else the netns thread opens
/// them and does it.
pub fn delete(
    worker: &NetnsWorker,
    prepared: Option<Prepared>,
    deletes: &[Delete],
    expect: &BTreeSet<u32>,
    when: When,
) -> std::io::Result<Vec<Result<(), Errno>>> {
    if deletes.is_empty() {
        return Ok(Vec::new());
    }
    let requests: Vec<Vec<u8>> = deletes
        .iter()
        .enumerate()
        .map(|(i, d)| request(*d, seq_of(i)))
        .collect();
    let drain_from = deletes
        .iter()
        .position(|d| matches!(d, Delete::Drained(_)))
        .unwrap_or(deletes.len());
    let opened = prepared.and_then(|p| p.0.opened("the deletion's sockets"));
    let job = Job {
        requests,
        drain_from,
        expect: expect.clone(),
        when,
    };
    if let Some(sockets) = opened {
        return job.run(sockets);
    }
    // Without prepared sockets: on the netns thread, which opens them
    // inside the netns (they keep it).
    worker
        .start(move || Sockets::open().and_then(|s| job.run(s)))
        .and_then(Pending::wait)
        .map_err(|e| std::io::Error::other(e.to_string()))?
}

/// One [`delete`]: the serialized requests and what to wait for.
struct Job {
    requests: Vec<Vec<u8>>,
    /// The first [`Delete::Drained`] request.
    drain_from: usize,
    expect: BTreeSet<u32>,
    when: When,
}

/// The request for `d`, as dump `seq`, in the encoding every request has
/// ([`wire::push`]), made before the fork.
fn request(d: Delete, seq: u32) -> Vec<u8> {
    let mut link = LinkMessage::default();
    match d {
        Delete::Group(g) => link.attributes.push(LinkAttribute::Group(g)),
        Delete::Link(i) | Delete::Drained(i) => link.header.index = i,
    }
    let mut buf = Vec::new();
    wire::push(
        &mut buf,
        RouteNetlinkMessage::DelLink(link),
        NLM_F_REQUEST | NLM_F_ACK,
        seq,
    );
    buf
}

impl Job {
    fn run(self, sockets: Sockets) -> std::io::Result<Vec<Result<(), Errno>>> {
        let Sockets { watch, sender } = sockets;
        // From here on, every link announcement is queued for us (or,
        // deferred, for the child).
        watch.add_membership(libc::RTNLGRP_LINK)?;
        let (report_r, report_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        nix::fcntl::fcntl(
            &report_r,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )?;
        let (watch, defer) = match self.when {
            When::Now => (Some(watch), None),
            When::AfterPodLinks {
                pod_links,
                netns_lock,
                after,
            } => (
                None,
                Some(Defer {
                    watch,
                    pod_links,
                    netns_lock,
                    after,
                }),
            ),
        };
        // Our copies of the child's sockets and pipe end close as it starts.
        let child = unlist_child::start(&self.requests, self.drain_from, sender, report_w, defer)?;
        let reaped = reap_in_background(child);
        match watch {
            Some(watch) => Ok(wait_unlisted(
                watch,
                report_r,
                self.requests.len(),
                self.expect,
                child,
                reaped,
            )),
            // Its answers are nobody's business now: the report pipe closes.
            None => Ok(vec![Ok(()); self.requests.len()]),
        }
    }
}

/// Wait until every link in `expect` has been announced unlisted on
/// `watch`, or the child is done; one result per request.
fn wait_unlisted(
    watch: Socket,
    report_r: OwnedFd,
    requests: usize,
    mut expect: BTreeSet<u32>,
    child: nix::unistd::Pid,
    reaped: bool,
) -> Vec<Result<(), Errno>> {
    let reap = |answers: Answers| {
        if !reaped {
            // Reap it if it is done; else whoever inherits it will.
            let _ = waitpid(child, Some(nix::sys::wait::WaitPidFlag::WNOHANG));
        }
        answers.results
    };
    let mut results = Answers {
        results: vec![Ok(()); requests],
        answered: 0,
    };
    let deadline = Instant::now() + ANNOUNCE_TIMEOUT;
    // Read into the spare capacity: nothing zeroed, only written pages touched.
    let mut buf = Vec::with_capacity(super::nlrecv::DATAGRAM);
    loop {
        if expect.is_empty() {
            // Every link is unlisted: the rest is the kernel's own cleanup.
            return results.results;
        }
        if child_done(&report_r, &mut results) {
            return reap(results);
        }
        if Instant::now() > deadline {
            return reap(after_child(&report_r, results));
        }
        wait_readable(
            &[watch.as_raw_fd(), report_r.as_raw_fd()],
            Duration::from_millis(5),
        );
        // A flood (link churn, or a sender as fast as this reader) must not
        // hold the reading past the deadline: the outer loop then ends it.
        while Instant::now() <= deadline {
            buf.clear();
            match watch.recv_from(&mut buf, 0) {
                // Only the kernel's announcements: a process may send to this port too.
                Ok((n, from)) if from.port_number() == 0 => {
                    for idx in unlist_child::unlisted_in(&buf[..n.min(buf.len())]) {
                        expect.remove(&idx);
                    }
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                // ENOBUFS: announcements were dropped; only the child can tell now.
                Err(_) => return reap(after_child(&report_r, results)),
            }
        }
    }
}

/// Reap `child` on a thread of its own, started now, while the kernel
/// works, so nothing is left to start once the links are unlisted. False
/// when that thread could not start: a child still at work when the caller
/// returns is then reaped by whoever inherits it once this process exits.
fn reap_in_background(child: nix::unistd::Pid) -> bool {
    std::thread::Builder::new()
        .name("podtap-reaper".into())
        .spawn(move || loop {
            if waitpid(child, None) != Err(Errno::EINTR) {
                break;
            }
        })
        .is_ok()
}

/// Wait for the child to finish (its end of `report` closes) and return
/// its answers.
/// Bounded by [`CHILD_TIMEOUT`]: requests the child has not answered by
/// then fail with ETIMEDOUT.
fn after_child(report: &OwnedFd, mut results: Answers) -> Answers {
    let deadline = Instant::now() + CHILD_TIMEOUT;
    while !child_done(report, &mut results) {
        if Instant::now() > deadline {
            tracing::warn!(
                "the link deleter answered {} of {} requests within {} s; counting the rest as failed",
                results.answered,
                results.results.len(),
                (ANNOUNCE_TIMEOUT + CHILD_TIMEOUT).as_secs()
            );
            let answered = results.answered;
            for r in results.results.iter_mut().skip(answered) {
                *r = Err(Errno::ETIMEDOUT);
            }
            return results;
        }
        wait_readable(&[report.as_raw_fd()], Duration::from_millis(100));
    }
    results
}

fn wait_readable(fds: &[std::os::fd::RawFd], timeout: Duration) {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: *fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(5);
    let n = libc::nfds_t::try_from(pfds.len()).unwrap_or(0);
    // SAFETY: `n` valid pollfds for the duration of the call.
    unsafe { libc::poll(pfds.as_mut_ptr(), n, ms) };
}

/// The child's answers so far: one per request, in order.
struct Answers {
    results: Vec<Result<(), Errno>>,
    /// How many requests the child has answered.
    answered: usize,
}

/// Take the answers the child has reported so far (request index and
/// errno, 0 for success) from the non-blocking `pipe`; true once the child
/// has closed it (it is done, every record read).
fn child_done(pipe: &OwnedFd, answers: &mut Answers) -> bool {
    let mut record = [0u8; 8];
    loop {
        // SAFETY: reads into a local buffer of the given size.
        let n = unsafe { libc::read(pipe.as_raw_fd(), record.as_mut_ptr().cast(), record.len()) };
        match n {
            8 => {
                let i = u32::from_ne_bytes([record[0], record[1], record[2], record[3]]) as usize;
                let raw = i32::from_ne_bytes([record[4], record[5], record[6], record[7]]);
                if let Some(slot) = answers.results.get_mut(i) {
                    *slot = errno::raw(raw);
                    answers.answered = answers.answered.max(i + 1);
                }
            }
            0 => return true,
            _ if Errno::last() == Errno::EINTR => {}
            // EAGAIN: the child is still at work. (A record is written whole:
            // 8 bytes are below PIPE_BUF.)
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::wire::{frames, payload, NLMSG_HDRLEN, RTM_DELLINK};

    /// `(type, seq, payload)` of each netlink message in `buf`.
    fn messages(buf: &[u8]) -> impl Iterator<Item = (u16, u32, &[u8])> {
        frames(buf).map(|(kind, seq, frame)| (kind, seq, payload(frame)))
    }

    #[test]
    fn a_delete_request_carries_ack_and_its_sequence_number() {
        let bytes = request(Delete::Group(7), 3);
        let (kind, seq, body) = messages(&bytes).next().unwrap();
        assert_eq!(kind, RTM_DELLINK);
        assert_eq!(seq, 3);
        assert!(body.len() >= 16);
        let flags = u16::from_ne_bytes([bytes[6], bytes[7]]);
        assert_eq!(flags, NLM_F_REQUEST | NLM_F_ACK);
    }

    #[test]
    fn dellink_announcements_remove_their_ifindex() {
        let mut announce = request(Delete::Link(42), 0);
        let mut other = request(Delete::Link(43), 0);
        announce.append(&mut other);
        let mut port_left = request(Delete::Link(44), 0);
        port_left[NLMSG_HDRLEN] = 7; // AF_BRIDGE
        announce.append(&mut port_left);
        let gone: Vec<u32> = unlist_child::unlisted_in(&announce).collect();
        assert_eq!(gone, [42, 43]);
    }
}
