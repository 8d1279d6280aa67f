//! Advisory locks in the state dir (flock), released when dropped or when the process dies.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::error::{Error, Result};

/// How long a command waits for another podtap working on the same id or netns.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(30);

/// A held lock on one lock file.
#[derive(Debug)]
pub struct Lock {
    file: Flock<File>,
    path: PathBuf,
}

impl Lock {
    /// Take the lock at `path` (creating the file), waiting up to `timeout`.
    /// `what` names the lock in the "busy" error.
    pub fn acquire(path: PathBuf, what: &str, timeout: Duration) -> Result<Self> {
        let deadline = Instant::now() + timeout;
        loop {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
                .open(&path)
                .map_err(|e| Error::io("open lock", &path, e))?;
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(file) => {
                    // The holder before us may have unlinked the lock file (see
                    // `Lock::release`); a lock on an unlinked inode guards nothing.
                    if same_file(&file, &path) {
                        return Ok(Lock { file, path });
                    }
                }
                Err((_, Errno::EWOULDBLOCK)) => {
                    if Instant::now() >= deadline {
                        return Err(Error::Busy {
                            id: what.to_string(),
                            lock: path,
                        });
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err((_, e)) => return Err(Error::io("lock", &path, e.into())),
            }
        }
    }

    /// Remove the lock file while still holding it: the id is finished with, so
    /// nothing is left behind in the state dir. Waiters notice and re-open.
    pub fn release(self) {
        let _ = fs::remove_file(&self.path);
        drop(self.file);
    }
}

fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}
