//! The on-disk checkpoint: one file per sandbox id, written before every kernel change.
//!
//! Layout: `<state-dir>/<id>.json` (mode 0600) and `<state-dir>/<id>.lock`,
//! in a 0700 directory. Writes are atomic (temp file, fdatasync, rename; no fsync of
//! the directory) and never follow symlinks. The file holds the whole plan
//! (so a crash at any instant leaves enough to undo by name, group and
//! priority) and, once attach has finished, the kernel's ifindexes and the
//! description it printed.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::{Description, NetnsRef};
use crate::plan::Plan;

/// Default state directory: tmpfs, like the netns it describes.
pub const DEFAULT_STATE_DIR: &str = "/run/podtap";
/// Longest sandbox id accepted (CNI ids are 64 hex digits plus an interface name).
pub const MAX_ID_LEN: usize = 128;
/// Checkpoint format version.
pub const VERSION: u32 = 1;

/// Where attach got to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The plan is recorded; kernel objects may exist partly.
    Applying,
    /// Every object exists; `description` is what attach printed.
    Complete,
}

/// The content of one checkpoint file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    pub version: u32,
    pub id: String,
    pub netns: NetnsRef,
    /// `SO_NETNS_COOKIE` of the netns: tells a reused inode number from the same netns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns_cookie: Option<u64>,
    pub phase: Phase,
    pub plan: Plan,
    /// ifindexes the kernel gave the TAPs and bridges, by planned name.
    #[serde(default)]
    pub created: Vec<Created>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<Description>,
}

impl Checkpoint {
    /// Whether an open netns (identity and cookie) is the one this checkpoint recorded.
    /// The kernel may give a freed nsfs inode number to a new netns; the cookie never repeats.
    pub fn is_netns(&self, identity: (u64, u64), cookie: Option<u64>) -> bool {
        let same_inode = (self.netns.dev, self.netns.inode) == identity;
        let same_cookie = match (self.netns_cookie, cookie) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        same_inode && same_cookie
    }
}

/// One object podtap created, keyed by its ifindex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created {
    pub name: String,
    pub ifindex: u32,
    pub kind: String,
}

/// The ifindex recorded for the link podtap created under `name` (0 when none).
pub fn created_ifindex(created: &[Created], name: &str) -> u32 {
    created
        .iter()
        .find(|c| c.name == name)
        .map_or(0, |c| c.ifindex)
}

/// Reject ids that could escape the state dir or break file names.
pub fn validate_id(id: &str) -> Result<()> {
    let bad = |why| {
        Err(Error::BadId {
            id: id.to_string(),
            why,
        })
    };
    if id.is_empty() {
        return bad("empty");
    }
    if id.len() > MAX_ID_LEN {
        return bad("longer than 128 bytes");
    }
    if id.contains('/') {
        return bad("contains '/'");
    }
    if id.contains("..") {
        return bad("contains '..'");
    }
    if id.starts_with('.') {
        return bad("starts with '.'");
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.:@+=".contains(&b))
    {
        return bad("only letters, digits and -_.:@+= are allowed");
    }
    Ok(())
}

/// The state directory and the files in it.
#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
}

impl StateDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        StateDir { dir: dir.into() }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Create the directory (0700) if needed and refuse a symlink in its place.
    pub fn ensure(&self) -> Result<()> {
        match fs::symlink_metadata(&self.dir) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Error::Invalid(format!(
                    "state dir {}: is a symlink; refusing",
                    self.dir.display()
                )))
            }
            Ok(m) if !m.is_dir() => {
                return Err(Error::Invalid(format!(
                    "state dir {}: not a directory",
                    self.dir.display()
                )))
            }
            Ok(_) => return Ok(()),
            Err(_) => {}
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| Error::io("create state dir", &self.dir, e))?;
        fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| Error::io("chmod state dir", &self.dir, e))
    }

    pub fn file(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Take the per-id lock, waiting up to `timeout` for another podtap to release it.
    pub fn lock(&self, id: &str, timeout: Duration) -> Result<IdLock> {
        self.lock_file(self.dir.join(format!("{id}.lock")), id, timeout)
    }

    /// Serialise the attaches into one netns (whatever their ids): planning
    /// reads the netns, so two plans made side by side could claim the same
    /// interface. Release it with [`IdLock::release`].
    pub fn lock_netns(&self, (dev, inode): (u64, u64), timeout: Duration) -> Result<IdLock> {
        let name = format!("netns-{dev}-{inode}");
        self.lock_file(self.dir.join(format!("{name}.lock")), &name, timeout)
    }

    fn lock_file(&self, path: PathBuf, id: &str, timeout: Duration) -> Result<IdLock> {
        self.ensure()?;
        let deadline = Instant::now() + timeout;
        loop {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
                .map_err(|e| Error::io("open lock", &path, e))?;
            // SAFETY: flock on an fd we own; no memory is passed.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                // The holder before us may have unlinked the lock file (see
                // `IdLock::release`); a lock on an unlinked inode guards nothing.
                if same_file(&file, &path) {
                    return Ok(IdLock { file, path });
                }
                continue;
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(Error::io("lock", &path, err));
            }
            if Instant::now() >= deadline {
                return Err(Error::Busy {
                    id: id.to_string(),
                    path,
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Run `work` under the lock for `id`. If no checkpoint is left afterwards
    /// (detached, failed, unknown), the lock file goes too.
    pub fn locked<T>(
        &self,
        id: &str,
        timeout: Duration,
        work: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let lock = self.lock(id, timeout)?;
        let result = work();
        if !self.file(id).exists() {
            lock.release();
        }
        result
    }

    /// Read the checkpoint for `id`: `Ok(None)` if there is none.
    pub fn load(&self, id: &str) -> Result<Option<Checkpoint>> {
        let path = self.file(id);
        let text = match read_nofollow(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("read checkpoint", &path, e)),
        };
        let corrupt = |why: String| Error::CorruptState {
            path: path.clone(),
            id: id.to_string(),
            why,
        };
        let cp: Checkpoint = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        if cp.version != VERSION {
            return Err(corrupt(format!("unknown version {}", cp.version)));
        }
        if cp.id != id {
            return Err(corrupt(format!("it records id {:?}", cp.id)));
        }
        Ok(Some(cp))
    }

    /// The description a finished attach recorded for `id`.
    pub fn description(&self, id: &str) -> Result<Description> {
        validate_id(id)?;
        let cp = self.load(id)?.ok_or_else(|| Error::NotFound {
            id: id.into(),
            dir: self.dir.clone(),
        })?;
        cp.description.ok_or_else(|| Error::CheckFailed {
            id: id.into(),
            problems: "attach did not finish (run detach, then attach again)".into(),
        })
    }

    /// Write the checkpoint atomically.
    pub fn save(&self, cp: &Checkpoint) -> Result<()> {
        let text = serde_json::to_vec_pretty(cp)
            .map_err(|e| Error::Invalid(format!("serialize checkpoint: {e}")))?;
        write_atomic(&self.file(&cp.id), &text, 0o600)
    }

    /// Remove the checkpoint (and its lock file's name; the lock itself stays held until drop).
    pub fn remove(&self, id: &str) -> Result<()> {
        let path = self.file(id);
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove checkpoint", &path, e)),
        }
        Ok(())
    }

    /// Move `id`'s checkpoint aside (`<id>.json.corrupt-<unix time>`) and return
    /// where it went. For doors that may not fail on a file they cannot read.
    pub fn quarantine(&self, id: &str) -> Result<PathBuf> {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let to = self.dir.join(format!("{id}.json.corrupt-{secs}"));
        fs::rename(self.file(id), &to).map_err(|e| Error::io("move aside", self.file(id), e))?;
        Ok(to)
    }

    /// Ids with a checkpoint file, sorted.
    pub fn ids(&self) -> Result<Vec<String>> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("read state dir", &self.dir, e)),
        };
        let mut ids: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".json"))
                    .map(str::to_string)
            })
            .filter(|id| validate_id(id).is_ok())
            .collect();
        ids.sort();
        Ok(ids)
    }
}

/// Held for the life of one command; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct IdLock {
    file: File,
    path: PathBuf,
}

impl IdLock {
    /// Remove the lock file while still holding it: the id is finished with, so
    /// nothing is left behind in the state dir. Waiters notice and re-open.
    pub fn release(self) {
        let _ = fs::remove_file(&self.path);
        drop(self.file);
    }
}

fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

fn read_nofollow(path: &Path) -> std::io::Result<String> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut file, &mut text)?;
    Ok(text)
}

/// Write `bytes` to `path` via a temp file in the same directory, fsync, rename.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.write_all(bytes)?;
        // Data on disk before the rename, so the name never points at an empty
        // file. No directory fsync: the objects a checkpoint describes do not
        // outlive a reboot, so neither needs the rename to.
        f.sync_data()?;
        fs::rename(&tmp, path)
    };
    if let Err(e) = write() {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io("write", path, e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_validated() {
        assert!(validate_id("abc-123_x.eth0").is_ok());
        assert!(validate_id(&"a".repeat(128)).is_ok());
        for bad in ["", "a/b", "..", "a..b", ".hidden", "sp ace", "x\n"] {
            assert!(validate_id(bad).is_err(), "{bad:?} should be rejected");
        }
        assert!(validate_id(&"a".repeat(129)).is_err());
    }

    #[test]
    fn atomic_write_replaces_and_sets_mode() {
        let dir = std::env::temp_dir().join(format!("podtap-cp-{}", std::process::id()));
        let sd = StateDir::new(&dir);
        sd.ensure().unwrap();
        let p = dir.join("x.json");
        write_atomic(&p, b"one", 0o600).unwrap();
        write_atomic(&p, b"two", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn netns_identity_needs_inode_and_cookie() {
        let plan = crate::plan::Plan {
            id: "s".into(),
            mode: crate::model::Wiring::Tc,
            group: 1,
            nics: vec![],
        };
        let cp = Checkpoint {
            version: VERSION,
            id: "s".into(),
            netns: NetnsRef {
                path: "/run/netns/p".into(),
                inode: 10,
                dev: 4,
            },
            netns_cookie: Some(77),
            phase: Phase::Complete,
            plan,
            created: vec![],
            description: None,
        };
        assert!(cp.is_netns((4, 10), Some(77)));
        assert!(
            !cp.is_netns((4, 10), Some(78)),
            "a reused inode is another netns"
        );
        assert!(!cp.is_netns((4, 11), Some(77)));
        assert!(
            cp.is_netns((4, 10), None),
            "kernels without cookies fall back to the inode"
        );
    }

    #[test]
    fn lock_file_goes_with_the_checkpoint() {
        let dir = std::env::temp_dir().join(format!("podtap-cp3-{}", std::process::id()));
        let sd = StateDir::new(&dir);
        let lock_path = dir.join("s1.lock");
        sd.locked("s1", Duration::from_secs(1), || Ok(())).unwrap();
        assert!(!lock_path.exists(), "no checkpoint, no lock file");
        sd.locked("s1", Duration::from_secs(1), || {
            write_atomic(&sd.file("s1"), b"{}", 0o600)
        })
        .unwrap();
        assert!(lock_path.exists(), "a live checkpoint keeps its lock file");
        let held = sd.lock("s1", Duration::from_secs(1)).unwrap();
        let busy = sd.lock("s1", Duration::from_millis(20)).unwrap_err();
        assert_eq!(busy.exit_code(), crate::error::exit::BUSY);
        held.release();
        assert!(
            sd.lock("s1", Duration::from_secs(1)).is_ok(),
            "re-created after release"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn corrupt_file_is_reported_and_kept() {
        let dir = std::env::temp_dir().join(format!("podtap-cp2-{}", std::process::id()));
        let sd = StateDir::new(&dir);
        sd.ensure().unwrap();
        fs::write(sd.file("s1"), b"{\"version\": 1, \"id\": ").unwrap();
        let err = sd.load("s1").unwrap_err();
        assert_eq!(err.exit_code(), crate::error::exit::CORRUPT_STATE);
        assert!(err.to_string().contains("s1.json"));
        assert!(sd.file("s1").exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
