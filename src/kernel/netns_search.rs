//! Find a live netns by identity when the path that named it is dead.
//!
//! A netns lives as long as something holds it: a bind mount (pinned file),
//! a process inside it, or an open fd. `/proc/PID/ns/net` of an exited
//! process is dead even when the netns lives on, so teardown looks for the
//! recorded `(dev, inode)` in the caller's hints, then in every nsfs mount
//! of this mount namespace, every process's netns and every open netns fd.
//! Only when none holds it is the netns gone.

use std::path::{Path, PathBuf};

use super::netns::{is_host_identity, NetNs};

/// An open handle on the netns `(dev, inode)`, found through `hints` first,
/// then through the system; `None` when nothing holds it. Never the host's.
pub fn find(identity: (u64, u64), hints: &[&Path]) -> Option<NetNs> {
    if is_host_identity(identity).unwrap_or(true) {
        return None;
    }
    let inode = identity.1;
    hints
        .iter()
        .map(|p| p.to_path_buf())
        .chain(nsfs_mounts(inode))
        .chain(proc_holders(inode))
        .find_map(|path| {
            NetNs::open(&path, false)
                .ok()
                .filter(|ns| ns.identity() == identity)
        })
}

/// Mount points of nsfs mounts of netns `inode` (pinned netns files, wherever they are).
fn nsfs_mounts(inode: u64) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let root = format!("net:[{inode}]");
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            let fstype = fields.get(sep + 1)?;
            let mount_point = fields.get(4)?;
            (*fstype == "nsfs" && fields.get(3) == Some(&root.as_str()))
                .then(|| PathBuf::from(unescape(mount_point)))
        })
        .collect()
}

/// `/proc/PID/ns/net` of processes in netns `inode`, then `/proc/PID/fd/N` of open fds on it.
fn proc_holders(inode: u64) -> impl Iterator<Item = PathBuf> {
    let target = format!("net:[{inode}]");
    let pids: Vec<PathBuf> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .map(|e| e.path())
        .collect();
    let in_ns: Vec<PathBuf> = pids
        .iter()
        .map(|p| p.join("ns/net"))
        .filter(|p| link_is(p, &target))
        .collect();
    let fds = pids.into_iter().flat_map(move |p| {
        let target = target.clone();
        std::fs::read_dir(p.join("fd"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(move |fd| link_is(fd, &target))
    });
    in_ns.into_iter().chain(fds)
}

fn link_is(path: &Path, target: &str) -> bool {
    std::fs::read_link(path).is_ok_and(|t| t.as_os_str() == target)
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
            assert!(find((me.dev(), me.ino()), &[Path::new("/proc/self/ns/net")]).is_none());
        }
    }
}
