//! News of one netns's checkpoints, for the watches that follow it.
//!
//! A running `podtap watch` keeps a directory `.news-<dev>-<inode>` in the
//! state dir, named by the (dev, inode) its checkpoint records for the netns,
//! and inotify-watches that directory only. Every save of a checkpoint that
//! records the netns opens (creating) `<id>` in it, and a detach unlinks
//! `<id>`, each only if the directory exists: with no watch of the netns that
//! costs one failed call, and a checkpoint of another netns wakes no watch.
//! The entries are empty files whose names are the ids, so a watch tells its
//! own saves from its siblings' as it did with the whole state dir.
//!
//! (dev, inode), not the netns cookie: every checkpoint records it, old ones
//! too; a live netns's inode is unique, and a reused one only lets a new
//! netns find a directory a killed watch left (any wake is only a round).
//!
//! Each watch holds a shared flock on the directory; the last one to leave
//! (and a detach that finds no watch holding it) removes it with its entries,
//! so the state dir holds nothing once no watch runs. State readers only read
//! `<id>.json`, so they never see it.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::id::SandboxId;

/// The news directory of the netns recorded as `(dev, inode)`.
pub fn dir(state: &Path, (dev, inode): (u64, u64)) -> PathBuf {
    state.join(format!(".news-{dev}-{inode}"))
}

/// Tell the watches of netns `netns` that `id`'s checkpoint was written.
pub(super) fn saved(state: &Path, netns: (u64, u64), id: &SandboxId) {
    // One open: ENOENT when no watch keeps the directory. The close that
    // follows is the IN_CLOSE_WRITE the watches wait for.
    let _ = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(dir(state, netns).join(id.as_str()));
}

/// Tell the watches of netns `netns` that `id`'s checkpoint went; remove the
/// directory if no watch holds it (one a killed watch left).
pub(super) fn removed(state: &Path, netns: (u64, u64), id: &SandboxId) {
    let path = dir(state, netns);
    let _ = fs::remove_file(path.join(id.as_str()));
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
            // Made and unlinked: the unlink is the news, for an own id too.
            let file = entry.path().join(id.as_str());
            let made = OpenOptions::new()
                .write(true)
                .create(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
                .open(&file);
            if made.is_ok() {
                let _ = fs::remove_file(&file);
            }
        }
    }
}

/// Whether a state-dir entry's name is a news directory's.
pub fn is_news(name: &str) -> bool {
    name.starts_with(".news-")
}

/// The news directory one watch holds (a shared flock, for its life).
#[derive(Debug)]
pub struct News {
    file: File,
    path: PathBuf,
}

impl News {
    /// Make (if needed) and hold the news directory of the netns `netns`.
    pub fn hold(state: &Path, netns: (u64, u64)) -> Result<Self> {
        let path = dir(state, netns);
        let err = |e: io::Error| Error::io("hold the news directory", &path, e);
        // A remover may empty and remove it between our mkdir and flock: then
        // the directory we locked is not the one at the path; start again.
        for _ in 0..100 {
            match fs::DirBuilder::new().mode(0o700).create(&path) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(err(e)),
                _ => {}
            }
            let file = match open_dir(&path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                other => other.map_err(err)?,
            };
            if !lock(&file, libc::LOCK_SH) {
                return Err(err(io::Error::last_os_error()));
            }
            if same(&file, &path) {
                return Ok(News { file, path });
            }
        }
        Err(err(io::Error::other("removed under us again and again")))
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Let go; the last watch of the netns removes the directory.
    pub fn leave(self) {
        // Converting to exclusive fails while another watch holds it shared.
        if lock(&self.file, libc::LOCK_EX | libc::LOCK_NB) && same(&self.file, &self.path) {
            purge(&self.path);
        }
    }
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

/// Remove the directory and its entries (under its exclusive lock).
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

    fn id(s: &str) -> SandboxId {
        SandboxId::new(s).unwrap()
    }

    #[test]
    fn news_goes_only_where_a_watch_holds_the_directory() {
        let state = std::env::temp_dir().join(format!("podtap-news-{}", std::process::id()));
        fs::create_dir_all(&state).unwrap();
        saved(&state, (1, 2), &id("a"));
        assert!(!dir(&state, (1, 2)).exists(), "no watch: nothing made");
        let one = News::hold(&state, (1, 2)).unwrap();
        let two = News::hold(&state, (1, 2)).unwrap();
        saved(&state, (1, 2), &id("a"));
        saved(&state, (3, 4), &id("b"));
        assert!(one.path().join("a").exists());
        assert!(!dir(&state, (3, 4)).exists());
        removed(&state, (1, 2), &id("a"));
        assert!(!one.path().join("a").exists());
        assert!(one.path().exists(), "held: a detach leaves it");
        saved(&state, (1, 2), &id("c"));
        one.leave();
        assert!(two.path().exists(), "another watch still holds it");
        two.leave();
        assert!(!dir(&state, (1, 2)).exists(), "the last watch removes it");
        // One a killed watch left goes with a detach in its netns.
        let left = News::hold(&state, (5, 6)).unwrap();
        drop(left);
        removed(&state, (5, 6), &id("d"));
        assert!(!dir(&state, (5, 6)).exists());
        fs::remove_dir_all(&state).unwrap();
    }
}
