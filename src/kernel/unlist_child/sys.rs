//! The child's system calls, each giving its result or the errno. All are
//! async-signal-safe, as a child forked from a threaded process needs.

use std::os::fd::RawFd;

/// One system call through libc's `syscall(2)` (async-signal-safe); its
/// result, or -errno. After the fork the errno it sets is the child's own.
fn call(nr: libc::c_long, a: [usize; 6]) -> isize {
    // SAFETY: each caller below passes arguments valid for its call: fds,
    // and pointers into live buffers of the given sizes.
    let r = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if r < 0 {
        -isize::try_from(nix::errno::Errno::last_raw()).unwrap_or(isize::MAX)
    } else {
        isize::try_from(r).unwrap_or(isize::MAX)
    }
}

fn result(ret: isize) -> Result<usize, i32> {
    usize::try_from(ret).map_err(|_| i32::try_from(-ret).unwrap_or(libc::EINVAL))
}

fn fd(fd: RawFd) -> usize {
    usize::try_from(fd).unwrap_or(usize::MAX)
}

pub(super) fn dup3(from: RawFd, to: RawFd) -> Result<usize, i32> {
    result(call(libc::SYS_dup3, [fd(from), fd(to), 0, 0, 0, 0]))
}

pub(super) fn close_range(first: u32, last: u32) -> Result<usize, i32> {
    result(call(
        libc::SYS_close_range,
        [first as usize, last as usize, 0, 0, 0, 0],
    ))
}

pub(super) fn send(sock: RawFd, data: &[u8]) -> Result<usize, i32> {
    let p = data.as_ptr() as usize;
    result(call(libc::SYS_sendto, [fd(sock), p, data.len(), 0, 0, 0]))
}

/// recvfrom into `buf`: the length and the sender's netlink port.
pub(super) fn recv_from(sock: RawFd, buf: &mut [u8]) -> Result<(usize, u32), i32> {
    // SAFETY: all-zero is a valid sockaddr_nl.
    let mut from: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    let mut len = super::SOCKADDR_NL_LEN;
    let args = [
        fd(sock),
        buf.as_mut_ptr() as usize,
        buf.len(),
        0,
        std::ptr::from_mut(&mut from) as usize,
        std::ptr::from_mut(&mut len) as usize,
    ];
    let n = result(call(libc::SYS_recvfrom, args))?;
    Ok((n, from.nl_pid))
}

pub(super) fn write(to: RawFd, data: &[u8]) -> Result<usize, i32> {
    let p = data.as_ptr() as usize;
    result(call(libc::SYS_write, [fd(to), p, data.len(), 0, 0, 0]))
}

pub(super) fn flock_nb(lock: RawFd) -> Result<usize, i32> {
    let how = (libc::LOCK_EX | libc::LOCK_NB) as usize;
    result(call(libc::SYS_flock, [fd(lock), how, 0, 0, 0, 0]))
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
    let p = std::ptr::from_ref(&step) as usize;
    let _ = call(libc::SYS_nanosleep, [p, 0, 0, 0, 0, 0]);
}

/// Milliseconds on the monotonic clock.
pub(super) fn now_ms() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let p = std::ptr::from_mut(&mut t) as usize;
    let clock = usize::try_from(libc::CLOCK_MONOTONIC).unwrap_or(1);
    let _ = call(libc::SYS_clock_gettime, [clock, p, 0, 0, 0, 0]);
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
    let ms = ms.min(60_000);
    let timeout = libc::timespec {
        tv_sec: libc::time_t::try_from(ms / 1000).unwrap_or(0),
        tv_nsec: libc::c_long::try_from(ms % 1000).unwrap_or(0) * 1_000_000,
    };
    let p = std::ptr::from_mut(&mut pfd) as usize;
    let t = std::ptr::from_ref(&timeout) as usize;
    // ppoll, not poll: aarch64 has no poll system call.
    matches!(result(call(libc::SYS_ppoll, [p, 1, t, 0, 0, 0])), Ok(1))
}

pub(super) fn exit(code: u8) -> ! {
    loop {
        let _ = call(libc::SYS_exit, [usize::from(code), 0, 0, 0, 0, 0]);
    }
}
