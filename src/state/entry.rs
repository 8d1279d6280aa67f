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
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

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
    /// Reading it failed.
    Io(io::Error),
}

/// Read the regular file at `path`, refusing anything else and anything untrusted.
pub fn read(path: &Path) -> Result<String, EntryError> {
    let mut file = open(path)?;
    let meta = file.metadata().map_err(EntryError::Io)?;
    if !meta.is_file() {
        return Err(EntryError::NotRegular(kind(&meta)));
    }
    if let Some(why) = untrusted(&meta) {
        return Err(EntryError::Untrusted(why));
    }
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(EntryError::Io)?;
    Ok(text)
}

fn open(path: &Path) -> Result<File, EntryError> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => EntryError::Missing,
            Some(libc::ELOOP) => EntryError::NotRegular("a symlink"),
            // O_NONBLOCK on a FIFO without a writer gives ENXIO for write-only
            // opens only; a device node may refuse in its own way.
            Some(libc::ENXIO) => EntryError::NotRegular("a device or FIFO"),
            _ => EntryError::Io(e),
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
