//! The link deleter child of [`super::unlist`], a forked process: only
//! async-signal-safe system calls on memory allocated before the fork (the
//! parent may have other threads, one of which may have held the
//! allocator's lock at the fork), every wait bounded, and only the fds it
//! needs.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use nix::unistd::Pid;
use rtnetlink::sys::Socket;

use super::errno;
use super::wire::{self, code, frames, NLMSG_ERROR, NLMSG_HDRLEN, RTM_DELLINK};

mod sys;

/// Taken (flock) by the child before its first `Delete::Drained` request
/// and held until it exits: every bridge deletion holds RTNL for one
/// `rcu_barrier()`, and drains of several detaches at once (a pod's CNI DELs
/// one after another, each returning early) would queue their bridges on
/// RTNL together, so that another netlink user on the node waits for all of
/// them. One drain at a time on the node keeps it to one. Without the file
/// (read-only /run) the drain runs unlocked.
pub const DRAIN_LOCK: &str = "/run/podtap-bridge-drain.lock";

/// The sequence number of request `i` (from 1: the kernel's own messages
/// carry 0).
pub(super) fn seq_of(i: usize) -> u32 {
    u32::try_from(i).map_or(u32::MAX, |i| i.saturating_add(1))
}

/// How long the child waits for the node's drain lock before it drains
/// unlocked (the lock only spreads bridge deletions out).
pub(super) const DRAIN_LOCK_WAIT: Duration = Duration::from_secs(30);

/// A deletion put off until one of the pod's own interfaces is deleted
/// (or `after.at_most` has passed), then `after.settle`.
pub(super) struct Defer {
    /// A socket subscribed to link announcements before the caller returned.
    pub watch: Socket,
    /// The pod interfaces whose deletion starts ours.
    pub pod_links: Vec<u32>,
    /// The netns fd the caller holds the attach lock on: the child keeps it
    /// (and so the lock) until it is done, so an attach into the netns waits.
    pub netns_lock: RawFd,
    /// How long to wait.
    pub after: super::unlist::AfterPodLinks,
}

/// The ifindexes the `RTM_DELLINK` announcements in `buf` unlist (a port
/// leaving a bridge, `AF_BRIDGE`, does not count). Allocation-free.
pub(super) fn unlisted_in(buf: &[u8]) -> impl Iterator<Item = u32> + '_ {
    frames(buf)
        .filter(|(kind, _, _)| *kind == RTM_DELLINK)
        .filter_map(|(_, _, frame)| wire::link::deleted_ifindex(wire::payload(frame)))
}

/// `sizeof(struct sockaddr_nl)`.
const SOCKADDR_NL_LEN: libc::socklen_t = 12;

/// The most fds a child keeps besides 0-2.
const KEPT: usize = 5;

/// The fds a child keeps (besides 0-2, which point at /dev/null): sorted,
/// at most [`KEPT`], unused slots -1. Made before the fork: the child must
/// not allocate.
pub(super) fn keep_list(fds: &[Option<RawFd>]) -> [RawFd; KEPT] {
    let mut keep = [-1; KEPT];
    let mut some: Vec<RawFd> = fds.iter().flatten().copied().filter(|fd| *fd > 2).collect();
    some.sort_unstable();
    for (slot, fd) in keep.iter_mut().zip(some) {
        *slot = fd;
    }
    keep
}

/// The ranges of fds from 3 up that are not in `keep` (sorted, -1 unused):
/// what the child closes. Pure, allocation-free.
pub(super) fn close_ranges(keep: &[RawFd; KEPT]) -> [(u32, u32); KEPT + 1] {
    let mut out = [(1, 0); KEPT + 1]; // (first > last): empty
    let mut from: u32 = 3;
    let mut n = 0;
    for fd in keep.iter().filter(|fd| **fd >= 3) {
        let fd = u32::try_from(*fd).unwrap_or(u32::MAX);
        if fd > from {
            out[n] = (from, fd - 1);
            n += 1;
        }
        from = fd.saturating_add(1);
    }
    out[n] = (from, u32::MAX);
    out
}

/// What the child reads: made before the fork, so the child (which may not
/// allocate: another thread of this process may have held the allocator's
/// lock at the fork) finds it ready in its copy of the memory.
struct ChildArgs {
    requests: Vec<Vec<u8>>,
    drain_from: usize,
    drain_lock: Option<RawFd>,
    sender: RawFd,
    devnull: RawFd,
    report: RawFd,
    defer: Option<Defer>,
    keep: [RawFd; KEPT],
}

/// Start the child that sends `requests` on `sender` and reports on
/// `report`; its pid. From request `drain_from` on, under [`DRAIN_LOCK`]
/// (unlocked when the file cannot be opened: read-only /run). With
/// `defer`, only once the pod's interfaces go ([`Defer`]). Our copies of
/// the sockets and the pipe close on return: the child has its own.
pub(super) fn start(
    requests: &[Vec<u8>],
    drain_from: usize,
    sender: Socket,
    report: OwnedFd,
    defer: Option<Defer>,
) -> std::io::Result<Pid> {
    let devnull = File::options().read(true).write(true).open("/dev/null")?;
    let drain_lock = (drain_from < requests.len())
        .then(|| {
            use std::os::unix::fs::OpenOptionsExt;
            File::options()
                .read(true)
                .write(true)
                .create(true)
                .mode(0o600)
                .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
                .open(DRAIN_LOCK)
                .ok()
        })
        .flatten();
    let args = ChildArgs {
        requests: requests.to_vec(),
        drain_from,
        drain_lock: drain_lock.as_ref().map(AsRawFd::as_raw_fd),
        sender: sender.as_raw_fd(),
        devnull: devnull.as_raw_fd(),
        report: report.as_raw_fd(),
        keep: keep_list(&[
            Some(sender.as_raw_fd()),
            Some(report.as_raw_fd()),
            drain_lock.as_ref().map(|f| f.as_raw_fd()),
            defer.as_ref().map(|d| d.watch.as_raw_fd()),
            defer.as_ref().map(|d| d.netns_lock),
        ]),
        defer,
    };
    spawn(&args)
}

/// Start [`child`] as a forked process, with every signal blocked (the
/// mask it inherits): a handler of this process has no business in it.
fn spawn(args: &ChildArgs) -> std::io::Result<Pid> {
    use nix::sys::signal::{SigSet, SigmaskHow};
    let old = SigSet::all().thread_swap_mask(SigmaskHow::SIG_SETMASK)?;
    // SAFETY: the child runs only async-signal-safe system calls on memory
    // made before the fork (see `child`), then exits; it never returns here.
    let forked = unsafe { nix::unistd::fork() };
    // Only the parent unblocks: the child keeps every signal blocked (a
    // write to a report pipe nobody reads then fails with EPIPE instead of
    // killing it with SIGPIPE).
    if !matches!(forked, Ok(nix::unistd::ForkResult::Child)) {
        let _ = old.thread_set_mask();
    }
    match forked? {
        nix::unistd::ForkResult::Child => child(args),
        nix::unistd::ForkResult::Parent { child } => Ok(child),
    }
}

/// The child: close every fd it does not need, wait for the pod's
/// interfaces to go when deferred, send each request, wait for its ack,
/// report each outcome (0 or the errno), exit. From request `drain_from`
/// on, under the node's drain lock.
fn child(a: &ChildArgs) -> ! {
    let mut buf = [0u8; 8192];
    for target in 0..3 {
        let _ = sys::dup3(a.devnull, target);
    }
    // Every other fd the parent had (the pod netns, other sockets, a
    // VMM's TAP queues in `exec`...) is none of the child's business.
    for (first, last) in close_ranges(&a.keep) {
        if first <= last {
            let _ = sys::close_range(first, last);
        }
    }
    // With no pod interface left to wait for, nothing is to be waited out.
    if let Some(d) = a.defer.as_ref().filter(|d| !d.pod_links.is_empty()) {
        wait_for_pod_links(d, &mut buf);
        sys::sleep_ms(millis(d.after.settle));
    }
    for (i, req) in a.requests.iter().enumerate() {
        if let (true, Some(lock)) = (i == a.drain_from, a.drain_lock) {
            lock_a_while(lock);
        }
        let errno = match sys::send(a.sender, req) {
            Err(e) => e,
            Ok(_) => ack(a.sender, seq_of(i), &mut buf),
        };
        let mut record = [0u8; 8];
        record[..4].copy_from_slice(&u32::try_from(i).unwrap_or(u32::MAX).to_ne_bytes());
        record[4..].copy_from_slice(&errno.to_ne_bytes());
        let _ = sys::write(a.report, &record);
    }
    sys::exit(0)
}

/// Return once the kernel announces the deletion of one of `d.pod_links`
/// on `d.watch` (non-blocking, subscribed), or after `d.after.at_most`, or
/// when announcements were lost (ENOBUFS: nothing more can be known).
fn wait_for_pod_links(d: &Defer, buf: &mut [u8]) {
    let (watch, pod_links) = (d.watch.as_raw_fd(), &d.pod_links);
    let deadline = sys::now_ms().saturating_add(u64::from(millis(d.after.at_most)));
    loop {
        let now = sys::now_ms();
        if now >= deadline || !sys::readable_within(watch, deadline - now) {
            return;
        }
        loop {
            match sys::recv_from(watch, buf) {
                // Only the kernel's announcements (port 0) count.
                Ok((n, 0)) => {
                    if unlisted_in(&buf[..n.min(buf.len())]).any(|i| pod_links.contains(&i)) {
                        return;
                    }
                }
                Ok(_) | Err(libc::EINTR) => {}
                Err(libc::EAGAIN) => break,
                Err(_) => return,
            }
        }
    }
}

fn millis(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// Take the flock on `fd`, trying for up to [`DRAIN_LOCK_WAIT`].
fn lock_a_while(fd: RawFd) {
    let tries = DRAIN_LOCK_WAIT.as_millis() / 10;
    for _ in 0..tries {
        if sys::flock_nb(fd).is_ok() {
            return;
        }
        sys::sleep_10ms();
    }
}

/// Wait for the kernel's ack of `seq` on `fd` (whose `SO_RCVTIMEO` bounds
/// each receive): 0, or the errno it carries; ETIMEDOUT when none came.
fn ack(fd: RawFd, seq: u32, buf: &mut [u8]) -> i32 {
    loop {
        let (n, port) = match sys::recv_from(fd, buf) {
            Ok(got) => got,
            Err(libc::EINTR) => continue,
            Err(libc::EAGAIN) => return libc::ETIMEDOUT,
            Err(e) => return e,
        };
        // Only the kernel (port 0) acks; anything else is a stranger's.
        if port != 0 {
            continue;
        }
        // `frames` walks the datagram in place: no allocation.
        for (kind, got, frame) in frames(&buf[..n.min(buf.len())]) {
            if kind == NLMSG_ERROR && got == seq && frame.len() >= NLMSG_HDRLEN + 4 {
                return -code(frame);
            }
        }
    }
}

/// Bound every receive on `socket` by `timeout` (`SO_RCVTIMEO`).
pub(super) fn set_receive_timeout(socket: &Socket, timeout: Duration) -> std::io::Result<()> {
    let tv = libc::timeval {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_usec: 0,
    };
    // SAFETY: setsockopt reads a timeval of the given size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            libc::socklen_t::try_from(std::mem::size_of::<libc::timeval>()).unwrap_or(16),
        )
    };
    errno::check(rc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockaddr_nl_has_the_size_the_child_passes() {
        assert_eq!(
            std::mem::size_of::<libc::sockaddr_nl>(),
            SOCKADDR_NL_LEN as usize
        );
    }

    #[test]
    fn the_child_closes_everything_but_what_it_keeps() {
        let keep = keep_list(&[Some(9), Some(5), None, Some(1)]);
        assert_eq!(keep, [5, 9, -1, -1, -1]);
        let ranges: Vec<(u32, u32)> = close_ranges(&keep)
            .into_iter()
            .filter(|(a, b)| a <= b)
            .collect();
        assert_eq!(ranges, vec![(3, 4), (6, 8), (10, u32::MAX)]);
        // Adjacent kept fds leave no range between them.
        let keep = keep_list(&[Some(3), Some(4), Some(5), None, None]);
        let ranges: Vec<(u32, u32)> = close_ranges(&keep)
            .into_iter()
            .filter(|(a, b)| a <= b)
            .collect();
        assert_eq!(ranges, vec![(6, u32::MAX)]);
    }
}
