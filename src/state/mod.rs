//! The state directory: one checkpoint per sandbox id, written before every kernel change.
//!
//! Layout: `<state-dir>/<id>.json` (mode 0600) and `<state-dir>/<id>.lock`,
//! in a 0700 directory. Writes are atomic (temp file, rename; no fdatasync, no fsync of
//! the directory) and never follow symlinks. The file holds the whole plan
//! (so a crash at any instant leaves enough to undo by name, group and
//! priority) and, once attach has finished, the kernel's ifindexes and the
//! description it printed. While a `podtap watch` runs, its netns's news
//! directory `.news-<dev>-<inode>/` is there too (`news.rs`), and its lock
//! `.watch-<id>.lock`; nothing but `<id>.json` is read as a checkpoint.

mod checkpoint;
mod entry;
mod json;
mod lock;
mod netns_proof;
mod news;
mod parse;
mod registry;
mod write;

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use serde::de::{DeserializeOwned, IgnoredAny};

pub use crate::id::{SandboxId, MAX_ID_LEN};
pub(crate) use checkpoint::created_ifindex;
pub use checkpoint::{Checkpoint, Phase, VERSION, VERSION_1};
pub(crate) use checkpoint::{Created, CreatedKind, Stage};
pub(crate) use lock::{Lock, LOCK_TIMEOUT};
pub(crate) use news::{News, Told};
pub use registry::{Registry, RegistryEntry};
pub(crate) use write::read_entry;
pub use write::write_atomic;

use parse::{current, parse};

use crate::error::{Error, Result};
use crate::model::Description;

/// Default state directory: tmpfs, like the netns it describes.
pub const DEFAULT_STATE_DIR: &str = "/run/podtap";

/// The state directory and the files in it. Every method that names a
/// checkpoint takes a [`SandboxId`], so no caller can reach outside it.
#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
}

impl StateDir {
    /// The state directory at `dir` (not created until a command needs it).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        StateDir { dir: dir.into() }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Create the directory (0700) if needed; refuse a symlink in its place
    /// or a directory that fails the trust rule.
    pub(crate) fn ensure(&self) -> Result<()> {
        if self.check()? {
            return Ok(());
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| Error::io("create state dir", &self.dir, e))?;
        fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| Error::io("chmod state dir", &self.dir, e))
    }

    /// Whether the directory exists, after checking it is a real directory
    /// that passes the trust rule.
    pub fn check(&self) -> Result<bool> {
        match fs::symlink_metadata(&self.dir) {
            Ok(m) if m.file_type().is_symlink() => Err(Error::StateFile {
                what: "state dir",
                path: self.dir.clone(),
                why: "is a symlink; refusing".into(),
            }),
            Ok(m) if !m.is_dir() => Err(Error::StateFile {
                what: "state dir",
                path: self.dir.clone(),
                why: "not a directory".into(),
            }),
            Ok(m) => match entry::untrusted(&m) {
                Some(why) => Err(entry::untrusted_error(&self.dir, why)),
                None => Ok(true),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io("state dir", &self.dir, e)),
        }
    }

    /// The checkpoint file of `id`.
    pub fn file(&self, id: &SandboxId) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Take the per-id lock, waiting up to `timeout` for another podtap to release it.
    pub(crate) fn lock(&self, id: &SandboxId, timeout: Duration) -> Result<Lock> {
        self.ensure()?;
        Lock::acquire(self.dir.join(format!("{id}.lock")), id.as_str(), timeout)
    }

    /// Run `work` under the lock for `id`. If no checkpoint is left afterwards
    /// (detached, failed, unknown), its temp file (left by a killed writer)
    /// and the lock file go too.
    pub(crate) fn locked<T>(&self, id: &SandboxId, work: impl FnOnce() -> Result<T>) -> Result<T> {
        let lock = self.lock(id, LOCK_TIMEOUT)?;
        let result = work();
        if !self.file(id).exists() {
            write::remove_temp_of(&self.file(id));
            lock.release();
        }
        result
    }

    /// Write the file of `id` (under its lock: see [`Self::locked`]).
    pub(crate) fn write(&self, id: &SandboxId, bytes: &[u8]) -> Result<()> {
        write::write_locked(&self.file(id), bytes, 0o600)
    }

    /// Read the checkpoint for `id`: `Ok(None)` if there is none.
    ///
    /// Its description has no routes or rules (it keeps its neighbours), whatever
    /// the file's version: a version-1 file's are dropped here, and the
    /// checkpoint is written back, if at all, as the current version.
    pub fn load(&self, id: &SandboxId) -> Result<Option<Checkpoint>> {
        Ok(self.load_as::<Description>(id)?.map(current))
    }

    /// [`StateDir::load`] for teardown: the description is read past, not
    /// built (a file whose description is unreadable JSON is still corrupt).
    pub fn load_for_teardown(&self, id: &SandboxId) -> Result<Option<Checkpoint<IgnoredAny>>> {
        self.load_as(id)
    }

    fn load_as<D: DeserializeOwned>(&self, id: &SandboxId) -> Result<Option<Checkpoint<D>>> {
        if !self.check()? {
            return Ok(None);
        }
        let path = self.file(id);
        parse(id, &path, entry::read(&path))
    }

    /// [`StateDir::load`] of each of `ids`, in order, one at a time as the
    /// iterator is advanced: the directory checked and opened once, each
    /// file opened relative to it and read once (for `list`, which reads them all).
    pub fn load_each<'a>(
        &'a self,
        ids: &'a [SandboxId],
    ) -> Result<impl Iterator<Item = Result<Option<Checkpoint>>> + 'a> {
        let dir = match self.check()? {
            false => None,
            // Gone since it was checked (or since `ids`): every row is None.
            true => match nix::fcntl::open(
                &self.dir,
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => Some(fd),
                Err(nix::errno::Errno::ENOENT) => None,
                Err(e) => return Err(Error::io("open state dir", &self.dir, e.into())),
            },
        };
        Ok(ids.iter().map(move |id| {
            let Some(dir) = &dir else { return Ok(None) };
            let name = format!("{id}.json");
            Ok(parse(id, &self.dir.join(&name), entry::read_at(dir, &name))?.map(current))
        }))
    }

    /// The description a finished attach recorded for `id`, as the
    /// checkpoint holds it: without its routes and rules, with the
    /// neighbours as recorded (no kernel access; works when the netns is
    /// gone). [`StateDir::description_live`] gives it with the pod's tables
    /// read live from the netns.
    pub fn description(&self, id: &SandboxId) -> Result<Description> {
        let cp = self.load(id)?.ok_or_else(|| Error::NotFound {
            id: id.to_string(),
            dir: self.dir.clone(),
        })?;
        netns_proof::finished(id, cp)
    }

    /// Write the checkpoint atomically.
    pub(crate) fn save(&self, cp: &Checkpoint) -> Result<()> {
        // Compact: a 32-interface pod's checkpoint is read and written on every call.
        let text = serde_json::to_vec(cp).map_err(|e| Error::serialize("checkpoint", e))?;
        self.write(&cp.id, &text)?;
        news::saved(&self.dir, (cp.netns.dev, cp.netns.inode), &cp.id);
        Ok(())
    }

    /// Remove the checkpoint (and its lock file's name; the lock itself stays held until drop).
    pub(crate) fn remove(&self, id: &SandboxId) -> Result<()> {
        let path = self.file(id);
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove checkpoint", &path, e)),
        }
        Ok(())
    }

    /// Remove the checkpoint `cp` (see [`Self::remove`]) and tell the watches
    /// of its netns (`news.rs`): for a detach, which a watch must notice.
    pub(crate) fn remove_recorded<D>(&self, cp: &Checkpoint<D>) -> Result<()> {
        self.remove(&cp.id)?;
        news::removed(&self.dir, (cp.netns.dev, cp.netns.inode), &cp.id);
        Ok(())
    }

    /// Remove `id`'s checkpoint that could not be read, and tell every watch
    /// (its netns is unknown).
    pub(crate) fn remove_unread(&self, id: &SandboxId) -> Result<()> {
        self.remove(id)?;
        news::removed_anywhere(&self.dir, id);
        Ok(())
    }

    /// Move `id`'s checkpoint aside (`<id>.json.corrupt-<unix time>`) and return
    /// where it went. For doors that may not fail on a file they cannot read.
    pub(crate) fn quarantine(&self, id: &SandboxId) -> Result<PathBuf> {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let to = self.dir.join(format!("{id}.json.corrupt-{secs}"));
        fs::rename(self.file(id), &to).map_err(|e| Error::io("move aside", self.file(id), e))?;
        news::removed_anywhere(&self.dir, id);
        Ok(to)
    }

    /// Ids with a checkpoint file, sorted.
    pub fn ids(&self) -> Result<Vec<SandboxId>> {
        if !self.check()? {
            return Ok(Vec::new());
        }
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("read state dir", &self.dir, e)),
        };
        let mut ids: Vec<SandboxId> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".json"))
                    .and_then(|n| SandboxId::new(n).ok())
            })
            .collect();
        ids.sort();
        Ok(ids)
    }
}

/// A path under the temp dir that no other test uses: the process id and a
/// counter, so unit tests running in parallel never share (or remove) one.
#[cfg(test)]
pub(crate) fn scratch_path(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("podtap-{tag}-{}-{n}", std::process::id()))
}

/// A state dir at a fresh [`scratch_path`], made as attach makes it.
#[cfg(test)]
pub(crate) fn scratch_state(tag: &str) -> (PathBuf, StateDir) {
    let dir = scratch_path(tag);
    let sd = StateDir::new(&dir);
    sd.ensure().unwrap();
    (dir, sd)
}

/// A sandbox id a test knows to be valid.
#[cfg(test)]
pub(crate) fn test_id(s: &str) -> SandboxId {
    SandboxId::new(s).unwrap()
}

#[cfg(test)]
mod versions_tests;

#[cfg(test)]
mod tests {
    use super::test_id as id;
    use super::*;

    #[test]
    fn state_dir_is_0700() {
        let dir = scratch_path("cp");
        let sd = StateDir::new(&dir);
        sd.ensure().unwrap();
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lock_file_goes_with_the_checkpoint() {
        let dir = scratch_path("cp3");
        let sd = StateDir::new(&dir);
        let s1 = id("s1");
        let lock_path = dir.join("s1.lock");
        sd.locked(&s1, || Ok(())).unwrap();
        assert!(!lock_path.exists(), "no checkpoint, no lock file");
        sd.locked(&s1, || write_atomic(&sd.file(&s1), b"{}", 0o600))
            .unwrap();
        assert!(lock_path.exists(), "a live checkpoint keeps its lock file");
        let held = sd.lock(&s1, Duration::from_secs(1)).unwrap();
        let busy = sd.lock(&s1, Duration::from_millis(20)).unwrap_err();
        assert!(matches!(busy.primary(), crate::error::Error::Busy { .. }));
        held.release();
        assert!(
            sd.lock(&s1, Duration::from_secs(1)).is_ok(),
            "re-created after release"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn teardown_reads_past_the_description() {
        let (dir, sd) = scratch_state("cp4");
        let s1 = id("s1");
        let mut v = serde_json::to_value(checkpoint::tests::sample("s1")).unwrap();
        v["description"] = serde_json::json!({"not": ["a", "description"]});
        fs::write(sd.file(&s1), v.to_string()).unwrap();
        let err = sd.load(&s1).unwrap_err();
        assert!(matches!(
            err.primary(),
            crate::error::Error::CorruptState { .. }
        ));
        let cp = sd.load_for_teardown(&s1).unwrap().unwrap();
        assert_eq!(cp.netns.inode, 10, "what teardown needs is read");
        // Still JSON it must be: a cut-off description is a corrupt file.
        let text = v.to_string();
        let cut = text.find("\"description\"").unwrap() + 20;
        fs::write(sd.file(&s1), &text[..cut]).unwrap();
        let err = sd.load_for_teardown(&s1).unwrap_err();
        assert!(matches!(
            err.primary(),
            crate::error::Error::CorruptState { .. }
        ));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn each_reads_as_load_reads() {
        let dir = scratch_path("cp6");
        let sd = StateDir::new(&dir);
        let ids = [id("a"), id("b"), id("c"), id("d")];
        let none = sd.load_each(&ids).unwrap().collect::<Vec<_>>();
        assert!(none.iter().all(|r| matches!(r, Ok(None))), "no dir yet");
        sd.ensure().unwrap();
        let cp = serde_json::to_vec(&checkpoint::tests::sample("a")).unwrap();
        fs::write(sd.file(&ids[0]), &cp).unwrap();
        fs::write(sd.file(&ids[1]), b"{\"version\": 1, \"id\": ").unwrap();
        std::os::unix::fs::symlink(sd.file(&ids[0]), sd.file(&ids[2])).unwrap();
        let each: Vec<String> = sd
            .load_each(&ids)
            .unwrap()
            .map(|r| format!("{:?}", r.map(|c| c.map(|c| c.netns.inode))))
            .collect();
        let one: Vec<String> = ids
            .iter()
            .map(|i| format!("{:?}", sd.load(i).map(|c| c.map(|c| c.netns.inode))))
            .collect();
        assert_eq!(each, one);
        assert!(
            each[0].contains("Some(10)") && each[3] == "Ok(None)",
            "{each:?}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn corrupt_file_is_reported_and_kept() {
        let (dir, sd) = scratch_state("cp2");
        let s1 = id("s1");
        fs::write(sd.file(&s1), b"{\"version\": 1, \"id\": ").unwrap();
        let err = sd.load(&s1).unwrap_err();
        assert!(matches!(
            err.primary(),
            crate::error::Error::CorruptState { .. }
        ));
        assert!(err.to_string().contains("s1.json"));
        assert!(sd.file(&s1).exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
