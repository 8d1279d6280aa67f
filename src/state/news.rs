//! News of one netns's checkpoints, for the watches that follow it.
//!
//! A running `podtap watch` keeps a directory `.news-<dev>-<inode>` in the
//! state dir, named by the (dev, inode) its checkpoint records for the netns,
//! and in it a FIFO named by its own id, which it reads. Every save of a
//! checkpoint that records the netns writes `s <id>\n` to each FIFO there,
//! and a detach `r <id>\n`; with no watch of the netns there is no directory,
//! and that costs one failed open. So a checkpoint of another netns wakes no
//! watch, and a watch tells its own saves from its siblings' by the id.
//!
//! FIFOs, not inotify: inotify instances are limited per user
//! (`fs.inotify.max_user_instances`, 128 by default), and a node runs a
//! watch per pod. A line is one `write` of at most `PIPE_BUF` bytes, so
//! lines never mix; a full FIFO (its watch is behind) drops the line, and the
//! watch still wakes for the ones queued.
//!
//! (dev, inode), not the netns cookie: every checkpoint records it, old ones
//! too; a live netns's inode is unique, and a reused one only lets a new
//! netns find a directory a killed watch left (any wake is only a round).
//!
//! Each watch holds a shared flock on the directory; the last one to leave
//! (and a detach that finds no watch holding it) removes it with its FIFOs,
//! so the state dir holds nothing once no watch runs. State readers only read
//! `<id>.json`, so they never see it. A directory removed by hand while a
//! watch runs takes its news with it: that watch then learns of its
//! netns's checkpoints only through netlink and its next round.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::id::SandboxId;

/// The news directory of the netns recorded as `(dev, inode)`.
pub fn dir(state: &Path, (dev, inode): (u64, u64)) -> PathBuf {
    state.join(format!(".news-{dev}-{inode}"))
}

/// What a line of news says happened to a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Told {
    /// It was written.
    Saved,
    /// It went (detached, or moved aside).
    Removed,
}

/// Tell the watches of netns `netns` that `id`'s checkpoint was written.
pub(super) fn saved(state: &Path, netns: (u64, u64), id: &SandboxId) {
    tell(&dir(state, netns), &format!("s {id}\n"));
}

/// Tell the watches of netns `netns` that `id`'s checkpoint went; remove the
/// directory if no watch holds it (one a killed watch left).
pub(super) fn removed(state: &Path, netns: (u64, u64), id: &SandboxId) {
    let path = dir(state, netns);
    tell(&path, &format!("r {id}\n"));
    if let Ok(held) = open_dir(&path) {
        if lock(&held, libc::LOCK_EX | libc::LOCK_NB) && same(&held, &path) {
            purge(&path);
        }
    }
}

/// Tell every news directory that `id`'s checkpoint went, when its netns is
/// unknown (a corrupt checkpoint removed or moved aside): a rare path, so a
/// listing of the state dir is fine.
pub(super) fn removed_anywhere(state: &Path, id: &SandboxId) {
    let Ok(entries) = fs::read_dir(state) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_str().is_some_and(is_news) {
            tell(&entry.path(), &format!("r {id}\n"));
        }
    }
}

/// Whether a state-dir entry's name is a news directory's.
pub fn is_news(name: &str) -> bool {
    name.starts_with(".news-")
}

/// Write `line` to every FIFO in the news directory `path` that a watch
/// reads (none: the directory is not there, one failed open).
fn tell(path: &Path, line: &str) {
    let Ok(entries) = fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        // No reader (a killed watch's FIFO): ENXIO. Full: EAGAIN, dropped.
        let Ok(mut fifo) = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(entry.path())
        else {
            continue;
        };
        if fifo.metadata().is_ok_and(|m| m.file_type().is_fifo()) {
            let _ = fifo.write(line.as_bytes());
        }
    }
}

/// The news one watch reads: its FIFO in the netns's news directory, and a
/// shared flock on that directory, for its life.
#[derive(Debug)]
pub struct News {
    dir: File,
    path: PathBuf,
    fifo: File,
    fifo_path: PathBuf,
    /// A line split by a read, kept for the next.
    partial: Vec<u8>,
}

impl News {
    /// Make (if needed) and hold the news directory of the netns `netns`,
    /// and make `id`'s FIFO in it (one watch per id: any FIFO of that name
    /// is a killed watch's).
    pub fn hold(state: &Path, netns: (u64, u64), id: &SandboxId) -> Result<Self> {
        let path = dir(state, netns);
        let dir = hold_dir(&path).map_err(|e| Error::io("hold the news directory", &path, e))?;
        let fifo_path = path.join(id.as_str());
        let err = |e: io::Error| Error::io("make the news FIFO", &fifo_path, e);
        let _ = fs::remove_file(&fifo_path);
        nix::unistd::mkfifo(&fifo_path, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .map_err(|e| err(e.into()))?;
        // Read-write: it never reads end-of-file, and opens without a writer.
        let fifo = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&fifo_path)
            .map_err(err)?;
        Ok(News {
            dir,
            path,
            fifo,
            fifo_path,
            partial: Vec::new(),
        })
    }

    /// What to poll (POLLIN) for news.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fifo.as_fd()
    }

    /// The news that came since the last call: (what, whose checkpoint).
    pub fn read(&mut self) -> Vec<(Told, String)> {
        let mut buf = [0u8; 8192];
        loop {
            match self.fifo.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => self.partial.extend_from_slice(&buf[..n]),
            }
        }
        let end = self
            .partial
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let lines: Vec<u8> = self.partial.drain(..end).collect();
        String::from_utf8_lossy(&lines)
            .lines()
            .filter_map(|l| match l.split_once(' ') {
                Some(("s", id)) => Some((Told::Saved, id.to_string())),
                Some(("r", id)) => Some((Told::Removed, id.to_string())),
                _ => None,
            })
            .collect()
    }

    /// Let go; the last watch of the netns removes the directory.
    pub fn leave(self) {
        let _ = fs::remove_file(&self.fifo_path);
        // Converting to exclusive fails while another watch holds it shared.
        if lock(&self.dir, libc::LOCK_EX | libc::LOCK_NB) && same(&self.dir, &self.path) {
            purge(&self.path);
        }
    }
}

/// Make (if needed), open and lock (shared) the news directory at `path`.
fn hold_dir(path: &Path) -> io::Result<File> {
    // A remover may empty and remove it between our mkdir and flock: then
    // the directory we locked is not the one at the path; start again.
    for _ in 0..100 {
        match fs::DirBuilder::new().mode(0o700).create(path) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let file = match open_dir(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            other => other?,
        };
        if !lock(&file, libc::LOCK_SH) {
            return Err(io::Error::last_os_error());
        }
        if same(&file, path) {
            return Ok(file);
        }
    }
    Err(io::Error::other("removed under us again and again"))
}

fn open_dir(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

fn lock(file: &File, how: libc::c_int) -> bool {
    // SAFETY: flock on an fd that `file` keeps open.
    unsafe { libc::flock(file.as_raw_fd(), how) == 0 }
}

fn same(file: &File, path: &Path) -> bool {
    match (file.metadata(), fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => b.is_dir() && (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// Remove the directory and its FIFOs (under its exclusive lock).
fn purge(path: &Path) {
    if let Ok(entries) = fs::read_dir(path) {
        for entry in entries.flatten() {
            let _ = fs::remove_file(entry.path());
        }
    }
    let _ = fs::remove_dir(path);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::test_id as id;

    #[test]
    fn news_goes_only_to_the_watches_of_its_netns() {
        let state = crate::state::scratch_path("news");
        fs::create_dir_all(&state).unwrap();
        saved(&state, (1, 2), &id("a"));
        assert!(!dir(&state, (1, 2)).exists(), "no watch: nothing made");
        let mut one = News::hold(&state, (1, 2), &id("a")).unwrap();
        let mut two = News::hold(&state, (1, 2), &id("b")).unwrap();
        let mut other = News::hold(&state, (3, 4), &id("c")).unwrap();
        saved(&state, (1, 2), &id("a"));
        removed(&state, (1, 2), &id("d"));
        let told = vec![(Told::Saved, "a".into()), (Told::Removed, "d".into())];
        assert_eq!(one.read(), told);
        assert_eq!(two.read(), told, "every watch of the netns is told");
        assert!(other.read().is_empty(), "another netns's watch is not");
        assert!(one.read().is_empty(), "read once");
        assert!(dir(&state, (1, 2)).exists(), "held: a detach leaves it");
        one.leave();
        assert!(dir(&state, (1, 2)).exists(), "another watch still holds it");
        two.leave();
        assert!(!dir(&state, (1, 2)).exists(), "the last watch removes it");
        removed_anywhere(&state, &id("e"));
        assert_eq!(other.read(), vec![(Told::Removed, "e".into())]);
        // One a killed watch left goes with a detach in its netns.
        drop(other);
        removed(&state, (3, 4), &id("c"));
        assert!(!dir(&state, (3, 4)).exists());
        fs::remove_dir_all(&state).unwrap();
    }
}
