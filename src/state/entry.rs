//! Reading state-dir entries safely, and the trust rule.
//!
//! An entry is opened with `O_NOFOLLOW | O_NONBLOCK` and must be a regular
//! file: a symlink fails to open (ELOOP) and a FIFO opens without waiting for
//! a writer, so no podtap command can be made to hang or to read elsewhere.
//!
//! The trust rule, as sshd's StrictModes: the state dir and every checkpoint
//! must be owned by the effective uid and not writable by group or others.
//! Anything else may have been planted by someone who should not decide what
//! root deletes.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use nix::fcntl::{openat, OFlag};
use nix::sys::stat::Mode;

use crate::error::Error;

/// Why an entry could not be read as a state file.
#[derive(Debug)]
pub enum EntryError {
    /// There is no such entry.
    Missing,
    /// It is not a regular file (a symlink, FIFO, directory, ...): corrupt.
    NotRegular(&'static str),
    /// It is a regular file that fails the trust rule.
    Untrusted(String),
    /// It is larger than [`MAX_ENTRY`] bytes (its size, or at least that).
    TooLarge(u64),
    /// Reading it failed.
    Io(io::Error),
}

/// The most a state-dir entry may hold: a checkpoint of 64 interfaces is
/// well under a megabyte; a bigger (or sparse) file is no checkpoint, and is
/// refused before any buffer is allocated for it.
pub const MAX_ENTRY: u64 = 64 << 20;

/// Read the regular file at `path`, refusing anything else and anything untrusted.
pub fn read(path: &Path) -> Result<String, EntryError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(FLAGS)
        .open(path)
        .map_err(open_error)?;
    read_open(file)
}

/// [`read`] of the entry `name` in the directory open as `dir`: opened
/// relative to it (no walk of the directory's path, no check of it per
/// entry: for readers of many entries, which check the directory once).
pub fn read_at(dir: impl AsFd, name: &str) -> Result<String, EntryError> {
    let fd = openat(dir, name, OFlag::from_bits_retain(FLAGS), Mode::empty())
        .map_err(|e| open_error(e.into()))?;
    read_open(File::from(fd))
}

/// How an entry is opened: never through a symlink, never waiting (a FIFO).
const FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;

fn open_error(e: io::Error) -> EntryError {
    match e.raw_os_error() {
        Some(libc::ENOENT) => EntryError::Missing,
        Some(libc::ELOOP) => EntryError::NotRegular("a symlink"),
        // O_NONBLOCK on a FIFO without a writer gives ENXIO for write-only
        // opens only; a device node may refuse in its own way.
        Some(libc::ENXIO) => EntryError::NotRegular("a device or FIFO"),
        _ => EntryError::Io(e),
    }
}

/// The text of an opened entry, once it is proven a regular, trusted file.
/// Read in one call of the size fstat gave (and one more to see the end).
fn read_open(mut file: File) -> Result<String, EntryError> {
    let meta = file.metadata().map_err(EntryError::Io)?;
    if !meta.is_file() {
        return Err(EntryError::NotRegular(kind(&meta)));
    }
    if let Some(why) = untrusted(&meta) {
        return Err(EntryError::Untrusted(why));
    }
    if meta.len() > MAX_ENTRY {
        return Err(EntryError::TooLarge(meta.len()));
    }
    let mut bytes = Vec::new();
    // At most MAX_ENTRY + 1 bytes (checked above): no abort on a failed allocation.
    let want = usize::try_from(meta.len()).map_err(|_| EntryError::TooLarge(meta.len()))?;
    bytes
        .try_reserve_exact(want + 1)
        .map_err(|e| EntryError::Io(io::Error::new(io::ErrorKind::OutOfMemory, e)))?;
    // `take` keeps std from asking the size again (an fstat and an lseek
    // per file), and bounds a file that grows while it is read.
    (&mut file)
        .take(MAX_ENTRY + 1)
        .read_to_end(&mut bytes)
        .map_err(EntryError::Io)?;
    if bytes.len() as u64 > MAX_ENTRY {
        return Err(EntryError::TooLarge(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|_| {
        // What `read_to_string` says.
        EntryError::Io(io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })
}

/// Whether `meta` breaks the trust rule, and how.
pub fn untrusted(meta: &Metadata) -> Option<String> {
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != euid {
        return Some(format!("owned by uid {}, not {euid}", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!(
            "mode {:04o} lets group or others write it",
            meta.mode() & 0o7777
        ));
    }
    None
}

/// What a non-regular entry is.
pub fn kind(meta: &Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symlink"
    } else if t.is_char_device() || t.is_block_device() {
        "a device node"
    } else {
        "not a regular file"
    }
}

/// The error for an untrusted entry.
pub fn untrusted_error(path: &Path, why: String) -> Error {
    Error::Untrusted {
        path: path.into(),
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_sparse_file_is_refused_before_any_buffer() {
        let path = crate::state::scratch_path("entry");
        let file = File::create(&path).unwrap();
        file.set_len(1 << 40).unwrap();
        assert!(matches!(read(&path), Err(EntryError::TooLarge(n)) if n == 1 << 40));
        file.set_len(MAX_ENTRY + 1).unwrap();
        assert!(matches!(read(&path), Err(EntryError::TooLarge(_))));
        file.set_len(3).unwrap();
        assert_eq!(read(&path).unwrap(), "\0\0\0");
        std::fs::remove_file(&path).unwrap();
    }
}
