//! The link deleter child of [`super::unlist`]: only raw system calls on
//! memory allocated before it started (it shares the parent's memory, and
//! the parent may have other threads, holding the allocator's locks), every
//! wait bounded, and only the fds it needs.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use nix::unistd::Pid;
use rtnetlink::sys::Socket;

use super::errno;
use super::wire::{code, frames, NLMSG_ERROR, NLMSG_HDRLEN};

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

/// `sizeof(struct sockaddr_nl)`.
const SOCKADDR_NL_LEN: libc::socklen_t = 12;

/// The fds a child keeps (besides 0-2, which point at /dev/null): sorted,
/// at most three, unused slots -1. Made before the fork: the child must
/// not allocate.
pub(super) fn keep_list(fds: &[Option<RawFd>]) -> [RawFd; 3] {
    let mut keep = [-1; 3];
    let mut some: Vec<RawFd> = fds.iter().flatten().copied().filter(|fd| *fd > 2).collect();
    some.sort_unstable();
    for (slot, fd) in keep.iter_mut().zip(some) {
        *slot = fd;
    }
    keep
}

/// The ranges of fds from 3 up that are not in `keep` (sorted, -1 unused):
/// what the child closes. Pure, allocation-free.
pub(super) fn close_ranges(keep: &[RawFd; 3]) -> [(u32, u32); 4] {
    let mut out = [(1, 0); 4]; // (first > last): empty
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

/// What the child reads. Made before it starts and never written while it
/// runs: on x86_64 and aarch64 the child shares this process's memory
/// (`CLONE_VM`), so it must stay allocated until the child is reaped.
struct ChildArgs {
    requests: Vec<Vec<u8>>,
    drain_from: usize,
    drain_lock: Option<RawFd>,
    sender: RawFd,
    devnull: RawFd,
    report: RawFd,
    keep: [RawFd; 3],
}

/// The memory a started child uses (its arguments and its stack): drop it
/// only after the child has been reaped, or never. The arguments are held
/// as a raw pointer, never moved or borrowed again while the child may
/// read them.
pub(super) struct ChildMemory {
    args: std::ptr::NonNull<ChildArgs>,
    stack: Stack,
}

// SAFETY: the memory is only handed to the reaper thread, which frees it
// after the child is gone; nothing else touches it.
unsafe impl Send for ChildMemory {}

impl Drop for ChildMemory {
    fn drop(&mut self) {
        // SAFETY: `args` came from Box::leak in `start`, and the child
        // that read it has been reaped (the contract of ChildMemory).
        drop(unsafe { Box::from_raw(self.args.as_ptr()) });
        // `stack` is unmapped next, as the fields drop.
    }
}

/// The child's stack: [`child`] needs its 8 KiB receive buffer and a few
/// frames; only the pages it touches are ever backed.
const CHILD_STACK: usize = 64 * 1024;
/// Below it, a page nothing may touch: an overflow faults in the child
/// instead of writing over this process's memory.
const GUARD: usize = 4096;

/// An anonymous mapping for the child's stack, guard page first.
struct Stack {
    base: *mut libc::c_void,
}

impl Stack {
    fn new() -> std::io::Result<Self> {
        // SAFETY: a fresh anonymous mapping, nothing else refers to it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                GUARD + CHILD_STACK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let stack = Stack { base };
        // SAFETY: the first page of the mapping just made.
        errno::check(unsafe { libc::mprotect(base, GUARD, libc::PROT_NONE) })?;
        Ok(stack)
    }

    /// Its highest address, where the stack starts (page-aligned).
    fn top(&self) -> *mut libc::c_void {
        self.base.wrapping_byte_add(GUARD + CHILD_STACK)
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made, whose user is gone (see ChildMemory).
        unsafe { libc::munmap(self.base, GUARD + CHILD_STACK) };
    }
}

/// Start the child that sends `requests` on `sender` and reports on
/// `report`; its pid, and the memory it uses. From request `drain_from`
/// on, under [`DRAIN_LOCK`] (unlocked when the file cannot be opened:
/// read-only /run). Our copies of the fds close on return: the child has
/// its own.
pub(super) fn start(
    requests: &[Vec<u8>],
    drain_from: usize,
    sender: Socket,
    report: OwnedFd,
) -> std::io::Result<(Pid, ChildMemory)> {
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
    let stack = Stack::new()?;
    let args = std::ptr::NonNull::from(Box::leak(Box::new(ChildArgs {
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
        ]),
    })));
    let memory = ChildMemory { args, stack };
    // On an error no child runs: `memory` frees both.
    let pid = spawn(memory.args.as_ptr(), memory.stack.top())?;
    Ok((pid, memory))
}

/// Start [`child`] as a process that shares this one's memory
/// (`clone(CLONE_VM)`, as `posix_spawn` does, without waiting for it): no
/// page tables are copied and no page is copied on write afterwards, where
/// a `fork` of podtap cost about 0.2 ms and the faults after it. It has
/// its own fd table, its own stack (an mmap with a guard page below), and
/// every signal blocked from its first instruction (a handler would run on
/// this process's memory). It makes only raw
/// system calls ([`sys`]): a libc wrapper would set errno in the calling
/// thread's TLS, which the child shares.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn spawn(args: *mut ChildArgs, top: *mut libc::c_void) -> std::io::Result<Pid> {
    extern "C" fn entry(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the ChildArgs `spawn` was given, which its
        // caller keeps allocated and unchanged until the child is reaped.
        child(unsafe { &*arg.cast::<ChildArgs>() })
    }
    // Every signal blocked, glibc's own two (which its sigfillset leaves
    // out) included: with the raw system call, as the child inherits it.
    let all: u64 = !0;
    let mut old: u64 = 0;
    let mask = |set: *const u64, old: *mut u64| {
        // SAFETY: 8-byte kernel sigsets, valid for the call; this thread's mask.
        unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, set, old, 8) }
    };
    mask(&all, &mut old);
    // SAFETY: clone's child runs `entry` on the stack that ends at `top`
    // (page-aligned, CHILD_STACK bytes above a guard page), with `args`;
    // the caller keeps both until the child is reaped.
    let pid = unsafe { libc::clone(entry, top, libc::CLONE_VM | libc::SIGCHLD, args.cast()) };
    let err = std::io::Error::last_os_error();
    mask(&old, std::ptr::null_mut());
    if pid < 0 {
        return Err(err);
    }
    Ok(Pid::from_raw(pid))
}

/// Elsewhere, a plain fork.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn spawn(args: *mut ChildArgs, _top: *mut libc::c_void) -> std::io::Result<Pid> {
    // SAFETY: the child runs only async-signal-safe system calls on memory
    // made before the fork (see `child`), then exits.
    match unsafe { nix::unistd::fork() }? {
        // SAFETY: `args` is live in the child's own copy of the memory.
        nix::unistd::ForkResult::Child => child(unsafe { &*args }),
        nix::unistd::ForkResult::Parent { child } => Ok(child),
    }
}

/// The child: close every fd it does not need, send each request, wait
/// for its ack, report each outcome (0 or the errno), exit. From request
/// `drain_from` on, under the node's drain lock.
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
        assert_eq!(keep, [5, 9, -1]);
        let ranges: Vec<(u32, u32)> = close_ranges(&keep)
            .into_iter()
            .filter(|(a, b)| a <= b)
            .collect();
        assert_eq!(ranges, vec![(3, 4), (6, 8), (10, u32::MAX)]);
        // Adjacent kept fds leave no range between them.
        let keep = keep_list(&[Some(3), Some(4), Some(5)]);
        let ranges: Vec<(u32, u32)> = close_ranges(&keep)
            .into_iter()
            .filter(|(a, b)| a <= b)
            .collect();
        assert_eq!(ranges, vec![(6, u32::MAX)]);
    }
}
