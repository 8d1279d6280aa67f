//! The child's system calls, each giving its result or the errno: libc's
//! own wrappers, all async-signal-safe (thin wrappers of one system call
//! each, touching no lock and no allocator), as a child forked from a
//! threaded process needs. After the fork the errno they set is the
//! child's own.

use std::os::fd::RawFd;

/// The result of a call that answers -1 and sets errno.
fn result(ret: isize) -> Result<usize, i32> {
    usize::try_from(ret).map_err(|_| nix::errno::Errno::last_raw())
}

fn int(ret: libc::c_int) -> Result<usize, i32> {
    result(isize::try_from(ret).unwrap_or(-1))
}

pub(super) fn dup3(from: RawFd, to: RawFd) -> Result<usize, i32> {
    // SAFETY: dup3 only reads its integer arguments.
    int(unsafe { libc::dup3(from, to, 0) })
}

pub(super) fn close_range(first: u32, last: u32) -> Result<usize, i32> {
    // SAFETY: close_range only closes fds of this process, none of which
    // the child uses afterwards (the kept ones are outside the range).
    int(unsafe { libc::close_range(first, last, 0) })
}

pub(super) fn send(sock: RawFd, data: &[u8]) -> Result<usize, i32> {
    // SAFETY: `data` is a live buffer of the given length.
    result(unsafe { libc::send(sock, data.as_ptr().cast(), data.len(), 0) })
}

/// recvfrom into `buf`: the length and the sender's netlink port.
pub(super) fn recv_from(sock: RawFd, buf: &mut [u8]) -> Result<(usize, u32), i32> {
    // SAFETY: all-zero is a valid sockaddr_nl.
    let mut from: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    let mut len = super::SOCKADDR_NL_LEN;
    // SAFETY: `buf` and `from` are live and writable for the given lengths.
    let n = result(unsafe {
        libc::recvfrom(
            sock,
            buf.as_mut_ptr().cast(),
            buf.len(),
            0,
            std::ptr::from_mut(&mut from).cast(),
            &mut len,
        )
    })?;
    Ok((n, from.nl_pid))
}

pub(super) fn write(to: RawFd, data: &[u8]) -> Result<usize, i32> {
    // SAFETY: `data` is a live buffer of the given length.
    result(unsafe { libc::write(to, data.as_ptr().cast(), data.len()) })
}

pub(super) fn flock_nb(lock: RawFd) -> Result<usize, i32> {
    // SAFETY: flock only reads its integer arguments.
    int(unsafe { libc::flock(lock, libc::LOCK_EX | libc::LOCK_NB) })
}

pub(super) fn sleep_10ms() {
    sleep_ms(10);
}

/// Sleep `ms` milliseconds (less when a signal interrupts it).
pub(super) fn sleep_ms(ms: u32) {
    let step = libc::timespec {
        tv_sec: libc::time_t::from(ms / 1000),
        tv_nsec: libc::c_long::from(ms % 1000) * 1_000_000,
    };
    // SAFETY: `step` is a live timespec; no remainder is asked for.
    let _ = unsafe { libc::nanosleep(&step, std::ptr::null_mut()) };
}

/// Milliseconds on the monotonic clock.
pub(super) fn now_ms() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a live, writable timespec.
    let _ = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let ms = u64::try_from(t.tv_nsec).unwrap_or(0) / 1_000_000;
    secs.saturating_mul(1000).saturating_add(ms)
}

/// Wait up to `ms` milliseconds for `sock` to be readable: true when it is.
pub(super) fn readable_within(sock: RawFd, ms: u64) -> bool {
    let mut pfd = libc::pollfd {
        fd: sock,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(ms.min(60_000)).unwrap_or(60_000);
    // SAFETY: one live pollfd.
    unsafe { libc::poll(&mut pfd, 1, ms) == 1 }
}

pub(super) fn exit(code: u8) -> ! {
    // SAFETY: _exit ends the process without running this process's atexit
    // handlers or flushing buffers the parent owns.
    unsafe { libc::_exit(libc::c_int::from(code)) }
}
