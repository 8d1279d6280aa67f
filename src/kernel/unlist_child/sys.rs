//! The child's system calls, made without libc's wrappers (which would
//! write errno into the TLS of the thread that started the child: with
//! `CLONE_VM` that is the parent's). Each gives the result or the errno.

use std::os::fd::RawFd;

/// One system call; its raw result (negative: -errno).
#[cfg(target_arch = "x86_64")]
fn call(nr: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the `syscall` instruction with the x86_64 Linux ABI
    // (number in rax, arguments in rdi, rsi, rdx, r10, r8, r9; rcx and
    // r11 clobbered). Each caller below passes arguments valid for
    // its call: fds, and pointers into live buffers of the given sizes.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") isize::try_from(nr).unwrap_or(-1) => ret,
            in("rdi") a[0], in("rsi") a[1], in("rdx") a[2],
            in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// One system call; its raw result (negative: -errno).
#[cfg(target_arch = "aarch64")]
fn call(nr: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: `svc 0` with the aarch64 Linux ABI (number in x8,
    // arguments in x0-x5, result in x0); arguments as for x86_64.
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") nr,
            inlateout("x0") a[0] as isize => ret,
            in("x1") a[1], in("x2") a[2], in("x3") a[3], in("x4") a[4], in("x5") a[5],
            options(nostack),
        );
    }
    ret
}

/// One system call through libc (after a fork the memory is the child's own).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn call(nr: libc::c_long, a: [usize; 6]) -> isize {
    // SAFETY: as for the architectures above.
    let r = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if r < 0 {
        -(nix::errno::Errno::last_raw() as isize)
    } else {
        r as isize
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
    let step = libc::timespec {
        tv_sec: 0,
        tv_nsec: 10_000_000,
    };
    let p = std::ptr::from_ref(&step) as usize;
    let _ = call(libc::SYS_nanosleep, [p, 0, 0, 0, 0, 0]);
}

pub(super) fn exit(code: u8) -> ! {
    loop {
        let _ = call(libc::SYS_exit, [usize::from(code), 0, 0, 0, 0, 0]);
    }
}
