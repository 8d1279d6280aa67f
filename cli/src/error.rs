//! The program's errors and exit codes (`docs/exit-codes.md`): the
//! library's errors, each mapped to its code here, and the doors' own (an
//! input a door could not read, a pod asking for what the node's policy
//! does not allow).

use std::io;
use std::path::PathBuf;

use nix::errno::Errno;
use podtap::error::Error as Podtap;

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

/// What can go wrong in the program.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The library's error.
    #[error(transparent)]
    Podtap(#[from] Podtap),
    /// An input a door read that it cannot act on (exit 13).
    #[error("{0}")]
    Invalid(String),
    /// A pod asked for an option the node's pod policy does not allow (exit 6).
    #[error("{0}")]
    NotAllowed(String),
}

impl Error {
    /// An I/O error on `path`; permission problems are exit 6.
    pub fn io(what: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Podtap(Podtap::io(what, path, source))
    }

    /// The documented exit code of this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Podtap(e) => exit_code(e),
            Error::Invalid(_) => exit::INVALID,
            Error::NotAllowed(_) => exit::PERMISSION,
        }
    }
}

impl From<podtap::error::Invalid> for Error {
    fn from(e: podtap::error::Invalid) -> Self {
        Error::Podtap(e.into())
    }
}

impl From<podtap::render::RenderError> for Error {
    fn from(e: podtap::render::RenderError) -> Self {
        Error::Podtap(e.into())
    }
}

/// The exit code of a library error (of the first of several; of the
/// cause of a rollback).
pub fn exit_code(e: &Podtap) -> i32 {
    match e.primary() {
        Podtap::NetnsMissing { .. } | Podtap::PodDeleted { .. } => exit::NETNS_MISSING,
        Podtap::NotNetns { .. } => exit::NOT_NETNS,
        Podtap::HostNetns { .. } => exit::HOST_NETNS,
        Podtap::Permission { .. } => exit::PERMISSION,
        Podtap::BadId { .. } => exit::BAD_ID,
        Podtap::CorruptState { .. } => exit::CORRUPT_STATE,
        Podtap::Busy { .. } => exit::BUSY,
        Podtap::Kernel(k) => match k.errno() {
            Some(Errno::EPERM | Errno::EACCES) => exit::PERMISSION,
            _ => exit::KERNEL,
        },
        Podtap::Conflict { .. } => exit::CONFLICT,
        Podtap::CheckFailed { .. } => exit::CHECK_FAILED,
        Podtap::Invalid(_) | Podtap::Serialize { .. } | Podtap::StateFile { .. } => exit::INVALID,
        Podtap::NotFound { .. } => exit::NOT_FOUND,
        Podtap::Render(_) => exit::RENDER,
        Podtap::Untrusted { .. } => exit::UNTRUSTED,
        _ => exit::FAILURE,
    }
}

/// The program's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use podtap::error::Input;

    #[test]
    fn several_errors_keep_the_first_exit_code() {
        let kernel = || Podtap::kernel("/run/netns/p", "delete link", "tap0", Errno::EBUSY);
        let three = Podtap::first_of(vec![kernel(), Podtap::invalid(Input::Queues, "x")]).unwrap();
        assert_eq!(exit_code(&three), exit::KERNEL, "{three}");
        let eperm = Podtap::kernel("/run/netns/p", "create TAP", "tap0", Errno::EPERM);
        assert_eq!(exit_code(&eperm), exit::PERMISSION);
        let rolled = Podtap::RolledBack(Box::new(Podtap::invalid(Input::Queues, "x")));
        assert_eq!(exit_code(&rolled), exit::INVALID);
        assert_eq!(Error::NotAllowed("x".into()).exit_code(), exit::PERMISSION);
    }

    #[test]
    fn a_render_error_is_exit_15() {
        let e = Error::from(podtap::render::RenderError::NoAttachedInterfaces);
        assert_eq!(e.exit_code(), exit::RENDER);
    }
}
