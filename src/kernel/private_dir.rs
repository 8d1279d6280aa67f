//! Root-only directories, reached without trusting a path.
//!
//! podtap's macvtap device nodes are raw Ethernet ports of pods; they live in
//! directories only root may enter or change (`/dev/podtap`, mode 0700,
//! owned by root, and one such directory per sandbox). Each directory is
//! opened by name relative to its parent's fd with `O_NOFOLLOW` and proven
//! with `fstat` on the fd before anything is made, removed or opened in it,
//! so a symlink or another user's directory planted in its place is refused
//! rather than followed.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fchmod, fstat, mkdirat, Mode, SFlag};

/// The only mode podtap's directories may have.
pub const MODE: u32 = 0o700;

/// Open directory `name` in `parent` (making it, mode 0700, when `create`
/// and it is absent) and prove it: a directory, not a symlink, owned by
/// root. A root-owned directory with another mode (earlier podtap versions
/// made `/dev/podtap` 0755) is set to 0700 through the fd. `Ok(None)`: it
/// does not exist and `create` is false.
pub fn open(parent: impl AsFd, name: &str, create: bool) -> io::Result<Option<OwnedFd>> {
    let parent = parent.as_fd();
    let context = |what: &str, e: Errno| {
        io::Error::new(io::Error::from(e).kind(), format!("{what} {name}: {e}"))
    };
    if create {
        match mkdirat(parent, name, Mode::from_bits_truncate(MODE)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(context("mkdir", e)),
        }
    }
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let dir = match openat(parent, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) if !create => return Ok(None),
        // O_NOFOLLOW on a symlink: ELOOP; O_DIRECTORY on anything else: ENOTDIR.
        Err(e @ (Errno::ELOOP | Errno::ENOTDIR)) => {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{name} is not a directory (a symlink or another file is in its place: {e}); refused"),
            ))
        }
        Err(e) => return Err(context("open", e)),
    };
    let st = fstat(&dir).map_err(|e| context("fstat", e))?;
    verify(name, st.st_uid, st.st_mode)?;
    if st.st_mode & 0o7777 != MODE {
        fchmod(&dir, Mode::from_bits_truncate(MODE)).map_err(|e| context("chmod", e))?;
    }
    Ok(Some(dir))
}

/// A directory owned by root, or an error naming what is wrong.
fn verify(name: &str, uid: u32, mode: u32) -> io::Result<()> {
    if mode & SFlag::S_IFMT.bits() != SFlag::S_IFDIR.bits() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{name} is not a directory; refused"),
        ));
    }
    if uid != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{name} is owned by uid {uid}, not root; refused (remove it)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_root_owned_directories_pass() {
        assert!(verify("d", 0, 0o040700).is_ok());
        assert!(verify("d", 0, 0o040755).is_ok());
        let e = verify("d", 65534, 0o040700).unwrap_err();
        assert!(e.to_string().contains("uid 65534"), "{e}");
        assert!(verify("d", 0, 0o020600).is_err());
    }
}
