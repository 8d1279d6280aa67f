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
        Err(EntryError::NotRegular(what)) => Err(Error::Invalid(format!(
            "{}: {what}, not a regular file",
            path.display()
        ))),
        Err(EntryError::Untrusted(why)) => Err(entry::untrusted_error(path, why)),
        Err(EntryError::Io(e)) => Err(Error::io("read", path, e)),
    }
}

/// Remove the temp files of `path` that writers killed between create and
/// rename left behind. Call it only under the lock that every writer of
/// `path` holds: then no such writer is alive, whatever PID namespace it ran
/// in (a pid in the name proves nothing across PID namespaces).
pub fn sweep_temp_files_of(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return;
    };
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{name}{TMP_MARK}");
    for e in entries.flatten() {
        if e.file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(&prefix))
        {
            let _ = fs::remove_file(e.path());
        }
    }
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
    // Unique per write: a killed writer's leftover never blocks a later one
    // with the same pid (see `sweep_temp_files_of`).
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(
        ".{name}{TMP_MARK}{}.{nanos}.{seq}",
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.write_all(bytes)?;
        // No fdatasync, and no fsync of the directory: the rename alone makes
        // the write atomic for every reader and survives the writer's kill -9
        // (the page cache is the kernel's, not the process's). Only a reboot
        // could lose it, and nothing a checkpoint describes (TAPs, bridges,
        // filters, the netns itself) outlives a reboot either.
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
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn atomic_write_replaces_and_sets_mode() {
        let dir = std::env::temp_dir().join(format!("podtap-write-{}", std::process::id()));
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
    fn only_the_locked_files_leftovers_are_swept() {
        let dir = std::env::temp_dir().join(format!("podtap-sweep-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let ours = dir.join(".a.json.tmp.2147483632.1.0");
        let other = dir.join(format!(".ab.json.tmp.{}.1.0", std::process::id()));
        fs::write(&ours, b"x").unwrap();
        fs::write(&other, b"x").unwrap();
        sweep_temp_files_of(&dir.join("a.json"));
        assert!(!ours.exists());
        assert!(other.exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
