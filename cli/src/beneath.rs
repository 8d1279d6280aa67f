//! Writing a file beneath a directory whose content podtap does not control.
//!
//! The OCI hook writes the description into the bundle, whose content (the
//! rootfs above all) comes from an image, and whose path below the bundle
//! (`io.podtap.output`) the pod author picks. A symlink checked and then
//! written through by path can be swapped in between: root would write
//! anywhere. So every step is resolved by the kernel relative to a directory
//! fd, one component at a time, never following a symlink: `openat2(2)` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`, or, on a
//! kernel without it (before 5.6: `ENOSYS`), `openat(2)` of a single name with
//! `O_NOFOLLOW`. Missing directories are made with `mkdirat(2)` relative to
//! their parent's fd, and the file is written to a temp name beside it and
//! renamed (`renameat(2)`, which replaces a symlink in the way, never follows it).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{openat, openat2, renameat, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{mkdirat, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};

use crate::error::{Error, Result};

/// Set once `openat2` answered `ENOSYS`: the fallback is used from then on.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);
static SEQ: AtomicU64 = AtomicU64::new(0);

/// An open directory at `shown` (for messages), reached beneath a root.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    shown: PathBuf,
    /// What the path is, for messages ("annotation io.podtap.output").
    what: String,
}

/// Open `name` in `dir` without ever leaving it or following a symlink.
pub(crate) fn open_beneath(
    dir: impl AsFd,
    name: &OsStr,
    flags: OFlag,
    mode: Mode,
) -> nix::Result<OwnedFd> {
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let resolve = ResolveFlag::RESOLVE_BENEATH
            | ResolveFlag::RESOLVE_NO_SYMLINKS
            | ResolveFlag::RESOLVE_NO_MAGICLINKS;
        let how = OpenHow::new().flags(flags).mode(mode).resolve(resolve);
        match openat2(dir.as_fd(), name, how) {
            Err(Errno::ENOSYS) => NO_OPENAT2.store(true, Ordering::Relaxed),
            other => return other,
        }
    }
    open_nofollow(dir, name, flags, mode)
}

/// The fallback: one name (no `/`, not `..`: the caller checked) with
/// `O_NOFOLLOW`, which refuses a symlink as the last (and only) component.
pub(crate) fn open_nofollow(
    dir: impl AsFd,
    name: &OsStr,
    flags: OFlag,
    mode: Mode,
) -> nix::Result<OwnedFd> {
    // O_PATH with O_NOFOLLOW would open a symlink itself: open directories for reading.
    let flags = if flags.contains(OFlag::O_PATH) {
        (flags - OFlag::O_PATH) | OFlag::O_RDONLY
    } else {
        flags
    };
    match openat(dir.as_fd(), name, flags | OFlag::O_NOFOLLOW, mode) {
        // With O_DIRECTORY the kernel answers a symlink with ENOTDIR, not
        // ELOOP: say which it was.
        Err(Errno::ENOTDIR) if is_symlink(dir.as_fd(), name) => Err(Errno::ELOOP),
        other => other,
    }
}

fn is_symlink(dir: impl AsFd, name: &OsStr) -> bool {
    use nix::sys::stat::{fstatat, SFlag};
    fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK)
}

/// The names of `rel`, which must be a relative path of plain names.
fn names(rel: &Path) -> Option<Vec<&OsStr>> {
    let names: Option<Vec<&OsStr>> = rel
        .components()
        .map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    names.filter(|n| !n.is_empty())
}

impl Dir {
    /// Open the directory `root` itself (trusted: the runtime names it).
    pub fn root(root: &Path, what: &str) -> Result<Dir> {
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::open(root, flags, Mode::empty())
            .map_err(|e| Error::io("open", root, std::io::Error::from(e)))?;
        Ok(Dir {
            fd,
            shown: root.to_path_buf(),
            what: what.to_string(),
        })
    }

    /// The directory that will hold `rel` (a relative path of plain names),
    /// making the missing ones (mode 0755) one at a time, and its file name.
    pub fn parent_of(&self, rel: &Path) -> Result<(Dir, OsString)> {
        let names = names(rel).ok_or_else(|| {
            Error::Invalid(format!(
                "{} {}: must be a relative path of plain names",
                self.what,
                rel.display()
            ))
        })?;
        let (file, dirs) = names
            .split_last()
            .ok_or_else(|| Error::Invalid(self.what.clone()))?;
        let fd = self
            .fd
            .try_clone()
            .map_err(|e| Error::io("open", &self.shown, e))?;
        let mut at = Dir {
            fd,
            shown: self.shown.clone(),
            what: self.what.clone(),
        };
        for name in dirs {
            at = at.subdir(name)?;
        }
        Ok((at, file.to_os_string()))
    }

    /// Open the directory `name` in this one, making it first if missing.
    fn subdir(&self, name: &OsStr) -> Result<Dir> {
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let shown = self.shown.join(name);
        let mut made = false;
        loop {
            match open_beneath(&self.fd, name, flags, Mode::empty()) {
                Ok(fd) => {
                    return Ok(Dir {
                        fd,
                        shown,
                        what: self.what.clone(),
                    })
                }
                Err(Errno::ENOENT) if !made => {
                    // Another writer may make it first: EEXIST is fine, the open decides.
                    match mkdirat(&self.fd, name, Mode::from_bits_truncate(0o755)) {
                        Ok(()) | Err(Errno::EEXIST) => made = true,
                        Err(e) => return Err(self.refusal("create directory", &shown, e)),
                    }
                }
                Err(e) => return Err(self.refusal("open directory", &shown, e)),
            }
        }
    }

    /// Write `bytes` as the file `name` in this directory: a temp file made
    /// here (`O_CREAT | O_EXCL | O_NOFOLLOW`), then renamed over `name`.
    pub fn write_atomic(&self, name: &OsStr, bytes: &[u8], mode: u32) -> Result<PathBuf> {
        let shown = self.shown.join(name);
        // Not derived from `name`, which may already be as long as a name can be.
        let tmp = OsString::from(format!(
            ".podtap.tmp.{}.{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let flags =
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = open_beneath(&self.fd, &tmp, flags, Mode::from_bits_truncate(mode))
            .map_err(|e| self.refusal("create", &self.shown.join(&tmp), e))?;
        let written = File::from(fd)
            .write_all(bytes)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)));
        let renamed = written.and_then(|()| renameat(&self.fd, tmp.as_os_str(), &self.fd, name));
        renamed.map_err(|e| {
            let _ = unlinkat(&self.fd, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
            self.refusal("write", &shown, e)
        })?;
        Ok(shown)
    }

    /// The error for `op` on `path`: a symlink or a non-directory in the way
    /// is invalid input (13), anything else an I/O failure naming the file.
    fn refusal(&self, op: &'static str, path: &Path, e: Errno) -> Error {
        match e {
            Errno::ELOOP => Error::Invalid(format!(
                "{} {}: is a symlink; refusing to write through it",
                self.what,
                path.display()
            )),
            Errno::ENOTDIR => Error::Invalid(format!(
                "{} {}: is not a directory",
                self.what,
                path.display()
            )),
            // RESOLVE_BENEATH's answer to a step out of the directory.
            Errno::EXDEV => Error::Invalid(format!(
                "{} {}: leaves {}",
                self.what,
                path.display(),
                self.shown.display()
            )),
            e => Error::io(op, path, std::io::Error::from(e)),
        }
    }
}

#[cfg(test)]
mod tests;
