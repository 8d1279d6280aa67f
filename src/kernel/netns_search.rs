//! Find a live netns by identity when the path that named it is dead.
//!
//! A netns lives as long as something holds it: a bind mount (pinned file),
//! a process inside it, or an open fd. `/proc/PID/ns/net` of an exited
//! process is dead even when the netns lives on, so teardown looks for the
//! recorded identity in the caller's hints, then in every nsfs mount of
//! this mount namespace, every process's netns and every open netns fd.
//! Only when none holds it is the netns gone.
//!
//! Only holders podtap can trust count: processes owned by root (`/proc/PID`
//! owned by uid 0; a process of another user could hand over any netns it
//! can reach). Each candidate is opened `O_PATH` relative to its
//! `/proc/PID` directory fd (so a reused PID cannot swap in another
//! process), and the opened fd is what is checked: nsfs (`fstatfs`), a
//! network namespace, and the full identity ([`NetnsId`], cookie included).
//! No path is trusted for what a stat of it said earlier.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{openat, readlinkat, OFlag};
use nix::sys::stat::{fstat, Mode};

use super::netns::{is_host_identity, NetNs};
use super::netns_id::NetnsId;

/// An open handle on the netns `want`, found through `hints` first, then
/// through the system; `None` when nothing holds it. Never the host's.
pub fn find(want: &NetnsId, hints: &[&Path]) -> Option<NetNs> {
    if is_host_identity(want.pair()).unwrap_or(true) {
        return None;
    }
    let from_paths = hints
        .iter()
        .map(|p| p.to_path_buf())
        .chain(nsfs_mounts(want.inode))
        .find_map(|path| NetNs::open(&path, false).ok().filter(|ns| is(ns, want)));
    from_paths.or_else(|| holders(want, false).next())
}

/// A path through which something other than this process holds the
/// netns `want`: a bind mount of this mount namespace, or a root-owned
/// process inside it or with an fd on it (this process's own fds and
/// threads do not count); `None` when nothing else holds it.
pub fn held_by_others(want: &NetnsId) -> Option<PathBuf> {
    nsfs_mounts(want.inode)
        .into_iter()
        .find(|path| NetNs::open(path, true).is_ok_and(|ns| is(&ns, want)))
        .or_else(|| holders(want, true).next().map(|ns| ns.path().to_path_buf()))
}

/// Whether `ns` is `want` (its cookie read only once `(dev, inode)` agree).
fn is(ns: &NetNs, want: &NetnsId) -> bool {
    if ns.identity() != want.pair() {
        return false;
    }
    match want.cookie {
        None => true,
        Some(_) => ns.id().is_ok_and(|now| want.matches(&now)),
    }
}

/// Mount points of nsfs mounts of netns `inode` (pinned netns files, wherever they are).
fn nsfs_mounts(inode: u64) -> Vec<PathBuf> {
    let root = format!("net:[{inode}]");
    netns_mounts()
        .into_iter()
        .filter(|(r, _)| *r == root)
        .map(|(_, path)| path)
        .collect()
}

/// Every nsfs mount of a netns in this mount namespace: (`net:[INODE]`,
/// mount point).
fn netns_mounts() -> Vec<(String, PathBuf)> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            let fstype = fields.get(sep + 1)?;
            let root = fields.get(3)?;
            let mount_point = fields.get(4)?;
            (*fstype == "nsfs" && root.starts_with("net:["))
                .then(|| (root.to_string(), PathBuf::from(unescape(mount_point))))
        })
        .collect()
}

/// Every network namespace of the node this process can see, but the
/// host's, once each: pinned (nsfs mounts of this mount namespace) or held
/// by a root-owned process inside it. (One held only by an open fd is not
/// listed: every pod netns is pinned or has a process.)
pub fn every() -> Vec<NetNs> {
    let mut seen = std::collections::BTreeSet::new();
    let pinned = netns_mounts()
        .into_iter()
        .filter_map(|(_, path)| NetNs::open(&path, false).ok());
    let procs = root_procs(true);
    let inside_procs = procs.iter().filter_map(|(pid, dir)| {
        let path = PathBuf::from(format!("/proc/{pid}/ns/net"));
        let fd = openat(
            dir,
            "ns/net",
            OFlag::O_PATH | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        NetNs::from_opath(&path, fd, false).ok()
    });
    pinned
        .chain(inside_procs)
        .filter(|ns| seen.insert(ns.identity()))
        .collect()
}

/// The netns `want`, opened through each root-owned process in it, then
/// through each root-owned process's open fd on it (lazily: the first that
/// checks out ends the search). With `others_only`, not through this process.
fn holders(want: &NetnsId, others_only: bool) -> impl Iterator<Item = NetNs> + '_ {
    let target = format!("net:[{}]", want.inode);
    let procs = root_procs(others_only);
    let in_ns = inside(&procs, &target);
    let target2 = target.clone();
    let fds = procs.into_iter().flat_map(move |(pid, dir)| {
        let target = target2.clone();
        fd_holders(&pid, &dir, &target)
    });
    in_ns
        .into_iter()
        .chain(fds)
        .filter_map(move |(path, fd)| NetNs::from_opath(&path, fd, false).ok())
        .filter(move |ns| is(ns, want))
}

/// `/proc/PID/ns/net` of a root-owned process other than this one inside
/// the netns `want` (no open fds searched), if any: a holder whose exit a
/// pidfd tells (`podtap watch` prefers it to a bind mount).
pub fn process_inside(want: &NetnsId) -> Option<PathBuf> {
    let target = format!("net:[{}]", want.inode);
    inside(&root_procs(true), &target)
        .into_iter()
        .filter_map(|(path, fd)| NetNs::from_opath(&path, fd, false).ok())
        .find(|ns| is(ns, want))
        .map(|ns| ns.path().to_path_buf())
}

/// Every root-owned process (pid, `O_PATH` fd on `/proc/PID`); with
/// `others_only`, not this one.
fn root_procs(others_only: bool) -> Vec<(String, OwnedFd)> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.to_string();
            let digits = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
            (digits && !(others_only && pid == me)).then_some(pid)
        })
        .filter_map(|pid| Some((pid.clone(), root_owned_proc(&pid)?)))
        .collect()
}

/// Of `procs`, the ones whose netns link reads `target`: (path, `O_PATH` fd).
fn inside(procs: &[(String, OwnedFd)], target: &str) -> Vec<(PathBuf, OwnedFd)> {
    procs
        .iter()
        .filter_map(|(pid, dir)| {
            let fd = open_if_link_is(dir, OsStr::new("ns/net"), target)?;
            Some((PathBuf::from(format!("/proc/{pid}/ns/net")), fd))
        })
        .collect()
}

/// An `O_PATH` fd on `/proc/PID` when root owns it.
fn root_owned_proc(pid: &str) -> Option<OwnedFd> {
    let dir = nix::fcntl::open(
        format!("/proc/{pid}").as_str(),
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = fstat(&dir).ok()?;
    (st.st_uid == 0).then_some(dir)
}

/// `O_PATH` fds on the netns fds of the process whose `/proc/PID` is `dir`.
fn fd_holders(pid: &str, dir: &OwnedFd, target: &str) -> Vec<(PathBuf, OwnedFd)> {
    let Ok(fd_dir) = openat(
        dir,
        "fd",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) else {
        return Vec::new();
    };
    let Ok(mut listing) = nix::dir::Dir::from_fd(fd_dir) else {
        return Vec::new();
    };
    let names: Vec<Vec<u8>> = listing
        .iter()
        .flatten()
        .map(|e| e.file_name().to_bytes().to_vec())
        .filter(|n| n.first().is_some_and(u8::is_ascii_digit))
        .collect();
    names
        .into_iter()
        .filter_map(|name| {
            let rel = Path::new(OsStr::from_bytes(&name));
            let fd = open_if_link_is(dir, &Path::new("fd").join(rel).into_os_string(), target)?;
            let path = PathBuf::from(format!("/proc/{pid}/fd/")).join(rel);
            Some((path, fd))
        })
        .collect()
}

/// `O_PATH` fd on what the magic link `rel` under `dir` points at, when its
/// text is `target` (`net:[INODE]`). The fd is checked again by its opener.
fn open_if_link_is(dir: &OwnedFd, rel: &OsStr, target: &str) -> Option<OwnedFd> {
    let text = readlinkat(dir.as_fd(), rel).ok()?;
    if text.as_bytes() != target.as_bytes() {
        return None;
    }
    openat(dir, rel, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty()).ok()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape("/run/netns/a\\040b"), "/run/netns/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/x\\"), "/x\\");
    }

    #[test]
    fn the_host_is_never_found() {
        let me = std::fs::metadata("/proc/self/ns/net").unwrap();
        use std::os::unix::fs::MetadataExt;
        // Our own netns is the host's when tests run on the host; a search for
        // it must then come back empty, whatever holds it.
        if is_host_identity((me.dev(), me.ino())).unwrap() {
            let want = NetnsId::new((me.dev(), me.ino()), None);
            assert!(find(&want, &[Path::new("/proc/self/ns/net")]).is_none());
        }
    }
}
