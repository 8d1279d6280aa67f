//! What the command `podtap exec` starts inherits: only the fds it is
//! handed, and (with `--user`) no root and no capability.
//!
//! Whatever podtap itself inherited (a runtime's pipes, a leaked socket) is
//! closed across the exec: `close_range(3, ~0, CLOSE_RANGE_CLOEXEC)` marks
//! every fd above stdio close-on-exec, and the TAP queue (and vhost-net) fds
//! alone are then cleared of it. With `--user UID[:GID]` the TAPs are opened
//! first, as root, and then the process becomes UID/GID for good: the
//! bounding and ambient capability sets are emptied, supplementary groups
//! dropped, real/effective/saved gid and uid set, the remaining capability
//! sets cleared, and `PR_SET_NO_NEW_PRIVS` set, so neither the VMM nor
//! anything it runs (setuid binaries, file capabilities) can get them back.
//! As Kata's rootless VMM option does; the fds keep the access they were
//! opened with.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::PathBuf;
use std::str::FromStr;

use nix::fcntl::{fcntl, FcntlArg, FdFlag};
use nix::unistd::{setgroups, setresgid, setresuid, Gid, Uid};

use crate::error::{Error, Result};

/// `--user UID[:GID]`: who the command runs as (GID defaults to UID, never
/// to root's group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunAs {
    /// The uid.
    pub uid: u32,
    /// The gid.
    pub gid: u32,
}

impl FromStr for RunAs {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::Invalid(format!("--user {s:?}: expected UID or UID:GID (numbers)"));
        // u32::MAX is (uid_t)-1, which setresuid(2) reads as "unchanged".
        let id = |t: &str| {
            t.parse::<u32>()
                .ok()
                .filter(|n| *n != u32::MAX)
                .ok_or_else(bad)
        };
        let (uid, gid) = match s.split_once(':') {
            Some((u, g)) => (id(u)?, id(g)?),
            None => (id(s)?, id(s)?),
        };
        Ok(RunAs { uid, gid })
    }
}

/// Leave only stdio and `keep` open across the coming exec, then become
/// `user` (when given) without capabilities. Call right before the exec,
/// after every fd to hand over is open.
pub fn confine(keep: &[BorrowedFd<'_>], user: Option<RunAs>) -> Result<()> {
    // SAFETY: close_range only changes fd flags; no memory is touched.
    let rc = unsafe { libc::close_range(3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC.cast_signed()) };
    if rc != 0 {
        return Err(step(
            "close_range(3, ~0, CLOSE_RANGE_CLOEXEC)",
            io::Error::last_os_error(),
        ));
    }
    for fd in keep {
        fcntl(fd, FcntlArg::F_SETFD(FdFlag::empty())).map_err(|e| {
            let what = format!("clear FD_CLOEXEC on fd {}", fd.as_raw_fd());
            step(&what, e.into())
        })?;
    }
    match user {
        Some(user) => become_user(user),
        None => Ok(()),
    }
}

/// Become `user` for good, with every capability set empty.
fn become_user(user: RunAs) -> Result<()> {
    for cap in 0..=last_cap() {
        // SAFETY: prctl(PR_CAPBSET_DROP, cap) takes integers only.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0) };
        if rc != 0 {
            return Err(step("prctl(PR_CAPBSET_DROP)", io::Error::last_os_error()));
        }
    }
    // SAFETY: prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL) takes integers only.
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if rc != 0 {
        return Err(step(
            "prctl(PR_CAP_AMBIENT_CLEAR_ALL)",
            io::Error::last_os_error(),
        ));
    }
    let (uid, gid) = (Uid::from_raw(user.uid), Gid::from_raw(user.gid));
    setgroups(&[]).map_err(|e| step("setgroups([])", e.into()))?;
    setresgid(gid, gid, gid).map_err(|e| step(&format!("setresgid({gid})"), e.into()))?;
    setresuid(uid, uid, uid).map_err(|e| step(&format!("setresuid({uid})"), e.into()))?;
    // Leaving uid 0 clears the permitted and effective sets, but not the
    // inheritable one, and `--user 0` leaves them all: clear them here.
    clear_capabilities()?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| step("prctl(PR_SET_NO_NEW_PRIVS)", e.into()))
}

/// The highest capability number this kernel knows.
fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(40)
}

/// capset(2) with empty effective, permitted and inheritable sets.
fn clear_capabilities() -> Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // _LINUX_CAPABILITY_VERSION_3: two 32-bit words per set.
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and data are the kernel's layouts for version 3, live for the call.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
    if rc != 0 {
        return Err(step("capset (clear)", io::Error::last_os_error()));
    }
    Ok(())
}

fn step(what: &str, e: io::Error) -> Error {
    Error::io("exec: confine the command:", PathBuf::from(what), e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_numbers_and_the_group_defaults_to_the_user() {
        assert_eq!(
            "65534".parse::<RunAs>().unwrap(),
            RunAs {
                uid: 65534,
                gid: 65534
            }
        );
        assert_eq!(
            "107:108".parse::<RunAs>().unwrap(),
            RunAs { uid: 107, gid: 108 }
        );
        for bad in ["", "nobody", "1:", ":1", "4294967295", "1:2:3"] {
            assert!(bad.parse::<RunAs>().is_err(), "{bad}");
        }
    }
}
