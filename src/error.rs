//! podtap's error type and the documented exit codes (see `docs/exit-codes.md`).

use std::io;
use std::path::PathBuf;

/// Exit codes. They are part of the CLI contract.
pub mod exit {
    /// Success.
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
    /// Permission denied opening or entering the netns, or the state dir; or
    /// the node's pod policy does not allow what a pod asked for.
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
    /// The state dir or a checkpoint fails the trust rule (owned by another
    /// user, or writable by group or others): podtap acts on nothing.
    pub const UNTRUSTED: i32 = 16;
    /// `doctor`: a check the node needs (for the mode asked about) failed.
    pub const NODE_NOT_READY: i32 = 17;
}

/// Everything that can go wrong, each with its context and exit code ([`Error::exit_code`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The netns path does not exist (exit 3).
    #[error("netns {path}: does not exist{hint}")]
    NetnsMissing {
        /// The path given.
        path: PathBuf,
        /// Why it may have vanished (for `/proc/PID/ns/net`), or empty.
        hint: &'static str,
    },
    /// The path is not a network namespace (exit 4).
    #[error("netns {path}: not a network namespace ({what})")]
    NotNetns {
        /// The path given.
        path: PathBuf,
        /// What it is instead.
        what: String,
    },
    /// The path is the host's own netns (exit 5).
    #[error("netns {path}: this is the host's own network namespace; refusing (only podtap scan --allow-host-netns reads it)")]
    HostNetns {
        /// The path given.
        path: PathBuf,
    },
    /// Permission denied (exit 6).
    #[error("{what} {path}: permission denied ({source})")]
    Permission {
        /// What podtap was doing.
        what: &'static str,
        /// On which file.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
    /// A pod asked for an option the node's pod policy does not allow (exit 6).
    #[error("{0}")]
    NotAllowed(String),
    /// The sandbox id is not valid (exit 7).
    #[error("invalid sandbox id {id:?}: {why}")]
    BadId {
        /// The id given.
        id: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// The checkpoint cannot be read as one (exit 8).
    #[error("checkpoint {path}: corrupt ({why})")]
    CorruptState {
        /// The checkpoint file.
        path: PathBuf,
        /// The sandbox id.
        id: String,
        /// What is wrong with it.
        why: String,
    },
    /// Another podtap holds the lock and did not release it in time (exit 9).
    #[error("sandbox {id}: busy, another podtap holds {path}")]
    Busy {
        /// The sandbox id.
        id: String,
        /// The lock file, or the netns whose lock another attach holds.
        path: PathBuf,
    },
    /// A netlink request or ioctl failed (exit 10; 6 for EPERM/EACCES).
    #[error("netns {netns}: {op}{on}: {source}")]
    Kernel {
        /// The netns it was sent in.
        netns: String,
        /// The operation.
        op: String,
        /// On what object (with a leading space), or empty.
        on: String,
        /// The kernel's answer.
        source: KernelError,
    },
    /// The id is already attached to another netns (exit 11).
    #[error("sandbox {id} is already attached to netns {existing} (inode {existing_inode}), not {requested}")]
    Conflict {
        /// The sandbox id.
        id: String,
        /// The netns path its checkpoint records.
        existing: String,
        /// That netns's inode.
        existing_inode: u64,
        /// The netns path asked for now.
        requested: String,
    },
    /// `check` found problems (exit 12).
    #[error("sandbox {id}: check failed: {problems}")]
    CheckFailed {
        /// The sandbox id.
        id: String,
        /// Every problem, joined with "; ".
        problems: String,
    },
    /// Invalid input that is not a command-line syntax error (exit 13).
    #[error("{0}")]
    Invalid(String),
    /// No checkpoint for this id (exit 14).
    #[error("sandbox {id}: no checkpoint in {dir}")]
    NotFound {
        /// The sandbox id.
        id: String,
        /// The state directory.
        dir: PathBuf,
    },
    /// A renderer refused the description (exit 15).
    #[error("render: {0}")]
    Render(#[from] crate::render::RenderError),
    /// podtap could not serialize what it was about to write (exit 13).
    #[error("serialize {what}: {source}")]
    Serialize {
        /// What it was serializing.
        what: &'static str,
        /// The serializer's error.
        source: serde_json::Error,
    },
    /// More than one failure; the first decides the exit code.
    #[error("{first} (and {more} more failure(s))")]
    Several {
        /// The first failure.
        first: Box<Error>,
        /// How many more there were.
        more: usize,
    },
    /// Attach built everything but a later step failed; what it built was undone.
    /// The exit code is the failure's.
    #[error("{0}; the attachment was rolled back, nothing is left built")]
    RolledBack(Box<Error>),
    /// The state dir or a checkpoint fails the trust rule (exit 16).
    #[error("state {path}: {why}; refusing to trust it (it must be owned by this user and writable by nobody else)")]
    Untrusted {
        /// The directory or file.
        path: PathBuf,
        /// How it breaks the rule.
        why: String,
    },
    /// Another I/O failure (exit 1).
    #[error("{what} {path}: {source}")]
    Io {
        /// What podtap was doing.
        what: &'static str,
        /// On which file.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
}

/// The kernel's answer to a failed operation.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// An errno (from a netlink error message or an ioctl).
    #[error("{0}")]
    Errno(nix::errno::Errno),
    /// A failure without an errno (a malformed or unexpected reply).
    #[error("{0}")]
    Netlink(String),
}

impl KernelError {
    /// The errno, if the kernel gave one.
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

    /// An I/O error on `path`; permission problems become [`Error::Permission`].
    pub fn io(what: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        let path = path.into();
        if source.kind() == io::ErrorKind::PermissionDenied {
            Error::Permission { what, path, source }
        } else {
            Error::Io { what, path, source }
        }
    }

    /// A serialization failure of `what`.
    pub(crate) fn serialize(what: &'static str, source: serde_json::Error) -> Self {
        Error::Serialize { what, source }
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
            Error::RolledBack(inner) => inner.primary(),
            e => e,
        }
    }

    /// The documented exit code of this error.
    pub fn exit_code(&self) -> i32 {
        match self.primary() {
            Error::NetnsMissing { .. } => exit::NETNS_MISSING,
            Error::NotNetns { .. } => exit::NOT_NETNS,
            Error::HostNetns { .. } => exit::HOST_NETNS,
            Error::Permission { .. } | Error::NotAllowed(_) => exit::PERMISSION,
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
            Error::Invalid(_) | Error::Serialize { .. } => exit::INVALID,
            Error::NotFound { .. } => exit::NOT_FOUND,
            Error::Render(_) => exit::RENDER,
            Error::Untrusted { .. } => exit::UNTRUSTED,
            Error::Io { .. } | Error::Several { .. } | Error::RolledBack(_) => exit::FAILURE,
        }
    }
}

/// podtap's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_errors_keep_the_first_exit_code() {
        let kernel = || {
            Error::kernel(
                "/run/netns/p",
                "delete link",
                "tap0",
                nix::errno::Errno::EBUSY,
            )
        };
        assert!(Error::first_of(vec![]).is_none());
        let one = Error::first_of(vec![kernel()]).unwrap();
        assert_eq!(one.exit_code(), exit::KERNEL);
        let three = Error::first_of(vec![kernel(), Error::Invalid("x".into()), kernel()]).unwrap();
        assert_eq!(three.exit_code(), exit::KERNEL, "{three}");
        assert!(
            three.to_string().ends_with("(and 2 more failure(s))"),
            "{three}"
        );
    }

    #[test]
    fn a_render_error_is_carried_typed_with_its_message_and_code() {
        let e = Error::from(crate::render::RenderError::NoAttachedInterfaces);
        assert_eq!(e.exit_code(), exit::RENDER);
        assert_eq!(
            e.to_string(),
            "render: the description has no attached interfaces (no TAPs): run attach first"
        );
        assert!(matches!(
            e,
            Error::Render(crate::render::RenderError::NoAttachedInterfaces)
        ));
    }
}
