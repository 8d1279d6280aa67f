//! Atomic file writes that never follow symlinks.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use std::sync::atomic::{AtomicU64, Ordering};

use super::entry::{self, EntryError};
use crate::error::{Error, Result};

/// What sits between a file's name and the writer's pid in a temp file's name.
const TMP_MARK: &str = ".tmp.";
static SEQ: AtomicU64 = AtomicU64::new(0);

/// Read a regular, trusted file in the state dir (`Ok(None)` when absent):
/// for entries that are hints, never fatal when unreadable.
pub fn read_entry(path: &Path) -> Result<Option<String>> {
    match entry::read(path) {
        Ok(t) => Ok(Some(t)),
        Err(EntryError::Missing) => Ok(None),
        Err(EntryError::NotRegular(what)) => Err(Error::StateFile {
            what: "state file",
            path: path.into(),
            why: format!("{what}, not a regular file"),
        }),
        Err(EntryError::Untrusted(why)) => Err(entry::untrusted_error(path, why)),
        Err(EntryError::TooLarge(n)) => Err(Error::StateFile {
            what: "state file",
            path: path.into(),
            why: super::parse::too_large(n),
        }),
        Err(EntryError::Io(e)) => Err(Error::io("read", path, e)),
    }
}

/// The one temp file of a state-dir file `path` (see [`write_locked`]).
fn temp_of(path: &Path) -> Option<std::path::PathBuf> {
    let name = path.file_name()?.to_str()?;
    Some(path.with_file_name(format!(".{name}.tmp")))
}

/// Remove the temp file of `path` that a writer killed between create and
/// rename left behind. Only under the lock that every writer of `path` holds.
pub fn remove_temp_of(path: &Path) {
    if let Some(tmp) = temp_of(path) {
        let _ = fs::remove_file(tmp);
    }
}

/// Write `bytes` to `path` via its one temp file, then rename: for state-dir
/// files, whose every writer holds the same lock, so no two writes share the
/// temp file, and one a killed writer left is replaced (or removed with the
/// id: [`remove_temp_of`]). No directory listing per call.
pub fn write_locked(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let tmp = temp_of(path).ok_or_else(|| Error::StateFile {
        what: "state file",
        path: path.into(),
        why: "no file name".into(),
    })?;
    let written = match create_write_replace(&tmp, path, bytes, mode) {
        // A leftover goes first, then one more try: the new file gets our
        // mode, and nothing written over is anyone else's (a hard link, say).
        // Only on EEXIST: an unlink of a temp file that is not there cost
        // every write a system call.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match fs::remove_file(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => create_write_replace(&tmp, path, bytes, mode),
        },
        done => done,
    };
    written.map_err(|e| failed(&tmp, path, e))
}

/// Write `bytes` to `path` via a temp file of its own in the same directory,
/// then rename: for files outside the state dir, whose writers hold no common lock.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Unique per write: writers hold no common lock.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(
        ".{name}{TMP_MARK}{}.{nanos}.{seq}",
        std::process::id()
    ));
    write_via(&tmp, path, bytes, mode)
}

/// [`create_write_replace`]; on failure `tmp` is removed.
fn write_via(tmp: &Path, path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    create_write_replace(tmp, path, bytes, mode).map_err(|e| failed(tmp, path, e))
}

/// Create `tmp` (never an existing file, never through a symlink), write
/// `bytes`, rename it to `path`.
fn create_write_replace(tmp: &Path, path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(tmp)?;
    f.write_all(bytes)?;
    // No fdatasync, and no fsync of the directory: the rename alone makes
    // the write atomic for every reader and survives the writer's kill -9
    // (the page cache is the kernel's, not the process's). Only a reboot
    // could lose it, and nothing a checkpoint describes (TAPs, bridges,
    // filters, the netns itself) outlives a reboot either.
    replace(tmp, path)
}

/// The error of a failed write of `path`, once its temp file `tmp` is removed.
fn failed(tmp: &Path, path: &Path, e: std::io::Error) -> Error {
    let _ = fs::remove_file(tmp);
    Error::io("write", path, e)
}

/// Rename `tmp` to `path`. When `path` exists, the two are exchanged and
/// `tmp` (now the old file) removed: ext4 flushes the data of a file renamed
/// over another (`auto_da_alloc`), which made the final checkpoint write of an
/// attach 0.1 ms slower than the same write on tmpfs; an exchange does not.
/// Either way `path` always names a whole file, old or new. Anything but a
/// regular file at `path` (nothing, a directory), or a filesystem without
/// exchanges, gets the plain rename and its answer.
fn replace(tmp: &Path, path: &Path) -> std::io::Result<()> {
    use nix::fcntl::{renameat2, RenameFlags, AT_FDCWD};
    let regular = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file());
    if regular && renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RenameFlags::RENAME_EXCHANGE).is_ok() {
        // A leftover (if this fails) is removed by the next write or with the id.
        let _ = fs::remove_file(tmp);
        return Ok(());
    }
    fs::rename(tmp, path)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn atomic_write_replaces_and_sets_mode() {
        let dir = crate::state::scratch_path("write");
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.json");
        write_atomic(&p, b"one", 0o600).unwrap();
        write_atomic(&p, b"two", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_locked_write_replaces_a_killed_writers_temp_file() {
        let dir = crate::state::scratch_path("locked");
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.json");
        let left = dir.join(".a.json.tmp");
        let other = dir.join(".ab.json.tmp");
        fs::write(&left, b"a longer half-written leftover").unwrap();
        fs::set_permissions(&left, fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(&other, b"x").unwrap();
        write_locked(&p, b"one", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "one");
        assert!(!left.exists(), "renamed into place");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // A leftover symlink is removed, never written through.
        let victim = dir.join("victim");
        fs::write(&victim, b"untouched").unwrap();
        std::os::unix::fs::symlink(&victim, &left).unwrap();
        write_locked(&p, b"two", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(fs::read_to_string(&victim).unwrap(), "untouched");
        assert!(fs::symlink_metadata(&left).is_err(), "the symlink went");
        fs::write(&left, b"x").unwrap();
        remove_temp_of(&p);
        assert!(!left.exists());
        assert!(other.exists(), "another file's temp file is not ours");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_replacing_write_leaves_no_temp_file_and_never_moves_a_directory() {
        let dir = crate::state::scratch_path("replace");
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("b.json");
        let tmp = dir.join(".b.json.tmp");
        write_locked(&p, b"intent", 0o600).unwrap();
        write_locked(&p, b"final", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "final");
        assert!(!tmp.exists(), "the old file went with the exchange");
        // A directory where the file should be is not swapped away.
        let d = dir.join("c.json");
        fs::create_dir(&d).unwrap();
        assert!(write_locked(&d, b"x", 0o600).is_err());
        assert!(d.is_dir());
        assert!(!dir.join(".c.json.tmp").exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
