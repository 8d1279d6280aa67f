//! podtap's error type and the documented exit codes (see `docs/exit-codes.md`).

use std::io;
use std::path::PathBuf;

/// Exit codes. They are part of the CLI contract.
pub mod exit {
    pub const OK: i32 = 0;
    /// Unexpected failure (a bug, or an I/O error podtap cannot classify).
    pub const FAILURE: i32 = 1;
    /// Bad command line (clap's own code).
    pub const USAGE: i32 = 2;
    /// The netns path does not exist (or its process has exited).
    pub const NETNS_MISSING: i32 = 3;
    /// The path exists but is not a network namespace.
    pub const NOT_NETNS: i32 = 4;
    /// The path is the host's own netns and `--allow-host-netns` was not given.
    pub const HOST_NETNS: i32 = 5;
    /// Permission denied opening or entering the netns, or the state dir.
    pub const PERMISSION: i32 = 6;
    /// Invalid sandbox id.
    pub const BAD_ID: i32 = 7;
    /// Corrupt or unreadable checkpoint file.
    pub const CORRUPT_STATE: i32 = 8;
    /// Another podtap holds the lock for this id and did not release it in time.
    pub const BUSY: i32 = 9;
    /// A kernel operation (netlink or ioctl) failed.
    pub const KERNEL: i32 = 10;
    /// The id is attached to a different netns.
    pub const CONFLICT: i32 = 11;
    /// `check` found the attachment incomplete or miswired.
    pub const CHECK_FAILED: i32 = 12;
    /// Invalid input that is not a command-line syntax error (unknown interface, bad option value).
    pub const INVALID: i32 = 13;
    /// No checkpoint for this id (for commands that need one).
    pub const NOT_FOUND: i32 = 14;
    /// A renderer refused the description.
    pub const RENDER: i32 = 15;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("netns {path}: does not exist{hint}")]
    NetnsMissing { path: PathBuf, hint: &'static str },
    #[error("netns {path}: not a network namespace ({what})")]
    NotNetns { path: PathBuf, what: String },
    #[error("netns {path}: this is the host's own network namespace; refusing without --allow-host-netns")]
    HostNetns { path: PathBuf },
    #[error("{what} {path}: permission denied ({source})")]
    Permission {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("invalid sandbox id {id:?}: {why}")]
    BadId { id: String, why: &'static str },
    #[error(
        "checkpoint {path}: corrupt ({why}); inspect it, or run `podtap detach --force --id {id}`"
    )]
    CorruptState {
        path: PathBuf,
        id: String,
        why: String,
    },
    #[error("sandbox {id}: busy, another podtap holds {path}")]
    Busy { id: String, path: PathBuf },
    #[error("netns {netns}: {op}{on}: {source}")]
    Kernel {
        netns: String,
        op: String,
        on: String,
        source: KernelError,
    },
    #[error("sandbox {id} is already attached to netns {existing} (inode {existing_inode}), not {requested}")]
    Conflict {
        id: String,
        existing: String,
        existing_inode: u64,
        requested: String,
    },
    #[error("sandbox {id}: check failed: {problems}")]
    CheckFailed { id: String, problems: String },
    #[error("{0}")]
    Invalid(String),

    #[error("sandbox {id}: no checkpoint in {dir}")]
    NotFound { id: String, dir: PathBuf },
    #[error("render: {0}")]
    Render(String),
    #[error("{first} (and {more} more failure(s))")]
    Several { first: Box<Error>, more: usize },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

/// The kernel's answer to a failed operation.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("{0}")]
    Errno(nix::errno::Errno),
    #[error("{0}")]
    Netlink(String),
}

impl KernelError {
    pub fn errno(&self) -> Option<nix::errno::Errno> {
        match self {
            KernelError::Errno(e) => Some(*e),
            KernelError::Netlink(_) => None,
        }
    }
}

impl From<rtnetlink::Error> for KernelError {
    fn from(e: rtnetlink::Error) -> Self {
        match &e {
            rtnetlink::Error::NetlinkError(m) => match m.code {
                Some(code) => KernelError::Errno(nix::errno::Errno::from_raw(-code.get())),
                None => KernelError::Netlink(e.to_string()),
            },
            _ => KernelError::Netlink(e.to_string()),
        }
    }
}

impl From<nix::errno::Errno> for KernelError {
    fn from(e: nix::errno::Errno) -> Self {
        KernelError::Errno(e)
    }
}

impl From<io::Error> for KernelError {
    fn from(e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(code) => KernelError::Errno(nix::errno::Errno::from_raw(code)),
            None => KernelError::Netlink(e.to_string()),
        }
    }
}

impl Error {
    /// Build a kernel error with its context: which netns, which operation, on what.
    pub fn kernel(
        netns: &str,
        op: impl Into<String>,
        on: impl AsRef<str>,
        source: impl Into<KernelError>,
    ) -> Self {
        let on = on.as_ref();
        Error::Kernel {
            netns: netns.to_string(),
            op: op.into(),
            on: if on.is_empty() {
                String::new()
            } else {
                format!(" {on}")
            },
            source: source.into(),
        }
    }

    pub fn io(what: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        let path = path.into();
        if source.kind() == io::ErrorKind::PermissionDenied {
            Error::Permission { what, path, source }
        } else {
            Error::Io { what, path, source }
        }
    }

    /// The first of `errors` (carrying the count of the rest), or `None` when there are none.
    /// Its exit code is the first error's: never "invalid input" because there were several.
    pub fn first_of(errors: Vec<Error>) -> Option<Error> {
        let mut errors = errors.into_iter();
        let first = errors.next()?;
        let more = errors.count();
        Some(if more == 0 {
            first
        } else {
            Error::Several {
                first: Box::new(first),
                more,
            }
        })
    }

    /// The error that decides the exit code (the first of several).
    pub fn primary(&self) -> &Error {
        match self {
            Error::Several { first, .. } => first.primary(),
            e => e,
        }
    }

    /// The documented exit code of this error.
    pub fn exit_code(&self) -> i32 {
        match self.primary() {
            Error::NetnsMissing { .. } => exit::NETNS_MISSING,
            Error::NotNetns { .. } => exit::NOT_NETNS,
            Error::HostNetns { .. } => exit::HOST_NETNS,
            Error::Permission { .. } => exit::PERMISSION,
            Error::BadId { .. } => exit::BAD_ID,
            Error::CorruptState { .. } => exit::CORRUPT_STATE,
            Error::Busy { .. } => exit::BUSY,
            Error::Kernel { source, .. } => match source.errno() {
                Some(nix::errno::Errno::EPERM) | Some(nix::errno::Errno::EACCES) => {
                    exit::PERMISSION
                }
                _ => exit::KERNEL,
            },
            Error::Conflict { .. } => exit::CONFLICT,
            Error::CheckFailed { .. } => exit::CHECK_FAILED,
            Error::Invalid(_) => exit::INVALID,
            Error::NotFound { .. } => exit::NOT_FOUND,
            Error::Render(_) => exit::RENDER,
            Error::Io { .. } | Error::Several { .. } => exit::FAILURE,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_errors_keep_the_first_exit_code() {
        let kernel = || Error::kernel("/run/netns/p", "delete link", "tap0", nix::errno::Errno::EBUSY);
        assert!(Error::first_of(vec![]).is_none());
        let one = Error::first_of(vec![kernel()]).unwrap();
        assert_eq!(one.exit_code(), exit::KERNEL);
        let three = Error::first_of(vec![kernel(), Error::Invalid("x".into()), kernel()]).unwrap();
        assert_eq!(three.exit_code(), exit::KERNEL, "{three}");
        assert!(three.to_string().ends_with("(and 2 more failure(s))"), "{three}");
    }
}
