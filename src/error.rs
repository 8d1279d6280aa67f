//! podtap's errors, typed so a caller can match on what went wrong: the
//! netns (gone, not one, the host's), the state dir (busy, corrupt,
//! untrusted, no checkpoint), a kernel refusal (operation, object, errno),
//! an invalid input (which option, which interface), a renderer's refusal.
//!
//! Messages name the netns path, sandbox id or file, and no command or
//! flag: a program embedding the library has neither. The `podtap` program
//! maps each error to its exit code and adds its own advice.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

pub use crate::render::RenderError;

/// Everything that can go wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The netns path does not exist (or its process has exited).
    #[error("netns {}: does not exist{}", .path.display(), exited_hint(.path))]
    NetnsMissing {
        /// The path given.
        path: PathBuf,
    },
    /// The path is not a network namespace.
    #[error("netns {}: not a network namespace ({what})", .path.display())]
    NotNetns {
        /// The path given.
        path: PathBuf,
        /// What it is instead.
        what: NotNetns,
    },
    /// The path is the host's own netns: attach, and every command that
    /// changes something, refuse it.
    #[error("netns {}: this is the host's own network namespace; refusing", .path.display())]
    HostNetns {
        /// The path given.
        path: PathBuf,
    },
    /// Permission denied.
    #[error("{action} {}: permission denied ({source})", .path.display())]
    Permission {
        /// What podtap was doing.
        action: &'static str,
        /// On which file.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
    /// The sandbox id is not valid.
    #[error("invalid sandbox id {id:?}: {why}")]
    BadId {
        /// The id given.
        id: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// The checkpoint cannot be read as one.
    #[error("checkpoint {}: corrupt ({why})", .path.display())]
    CorruptState {
        /// The checkpoint file.
        path: PathBuf,
        /// The sandbox id.
        id: String,
        /// What is wrong with it.
        why: String,
    },
    /// Another podtap holds the lock and did not release it in time.
    #[error("sandbox {id}: busy, another podtap holds {}", .lock.display())]
    Busy {
        /// The sandbox id.
        id: String,
        /// The lock file, or the netns whose lock another attach holds.
        lock: PathBuf,
    },
    /// `watch`: the pod netns went away while watched (nothing but the
    /// watch held it any more).
    #[error("netns {}: does not exist (the pod was deleted; the checkpoint is left for detach)", .netns.display())]
    PodDeleted {
        /// The sandbox id.
        id: String,
        /// The netns path it recorded.
        netns: PathBuf,
    },
    /// The kernel refused an operation.
    #[error(transparent)]
    Kernel(#[from] Box<KernelFailure>),
    /// The id is already attached to another netns.
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
    /// An attachment is incomplete or miswired, or the netns or a TAP it
    /// recorded was replaced.
    #[error("sandbox {id}: check failed: {}", .problems.join("; "))]
    CheckFailed {
        /// The sandbox id.
        id: String,
        /// Every problem found.
        problems: Vec<String>,
    },
    /// An input podtap cannot act on.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// No checkpoint for this id.
    #[error("sandbox {id}: no checkpoint in {}", .dir.display())]
    NotFound {
        /// The sandbox id.
        id: String,
        /// The state directory.
        dir: PathBuf,
    },
    /// A renderer refused the description.
    #[error("render: {0}")]
    Render(#[from] RenderError),
    /// podtap could not serialize what it was about to write.
    #[error("serialize {what}: {source}")]
    Serialize {
        /// What it was serializing.
        what: &'static str,
        /// The serializer's error.
        source: serde_json::Error,
    },
    /// More than one failure; the first is the one to act on.
    #[error("{first} (and {more} more failure(s))")]
    Several {
        /// The first failure.
        first: Box<Error>,
        /// How many more there were.
        more: usize,
    },
    /// Attach built everything but a later step failed; what it built was undone.
    #[error("{0}; the attachment was rolled back, nothing is left built")]
    RolledBack(Box<Error>),
    /// The state dir or a checkpoint fails the trust rule: podtap acts on nothing.
    #[error("state {}: {why}; refusing to trust it (it must be owned by this user and writable by nobody else)", .path.display())]
    Untrusted {
        /// The directory or file.
        path: PathBuf,
        /// How it breaks the rule.
        why: String,
    },
    /// A file in the state dir is not what podtap writes there (a symlink,
    /// a directory, a device, too large).
    #[error("{what} {}: {why}", .path.display())]
    StateFile {
        /// "state dir" or "state file".
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// What it is instead.
        why: String,
    },
    /// Another I/O failure.
    #[error("{what} {}: {source}", .path.display())]
    Io {
        /// What podtap was doing.
        what: &'static str,
        /// On which file.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
}

/// What a path that is not a network namespace is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotNetns {
    /// A regular file.
    RegularFile,
    /// A directory.
    Directory,
    /// A FIFO (never opened for reading, so it cannot block).
    Fifo,
    /// A socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A file on a filesystem other than nsfs (its magic number).
    Filesystem(i64),
    /// Another kind of namespace (`/proc/PID/ns/uts`).
    OtherNamespace,
}

impl fmt::Display for NotNetns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotNetns::RegularFile => f.write_str("a regular file"),
            NotNetns::Directory => f.write_str("a directory"),
            NotNetns::Fifo => f.write_str("a FIFO"),
            NotNetns::Socket => f.write_str("a socket"),
            NotNetns::CharDevice => f.write_str("a character device"),
            NotNetns::BlockDevice => f.write_str("a block device"),
            NotNetns::Filesystem(magic) => write!(f, "filesystem type {magic:#x}"),
            NotNetns::OtherNamespace => f.write_str("another kind of namespace"),
        }
    }
}

/// `/proc/PID/ns/net` paths vanish when their process exits: say so.
fn exited_hint(path: &Path) -> &'static str {
    let s = path.to_string_lossy();
    if s.starts_with("/proc/") && s.ends_with("/ns/net") {
        " (has its process exited?)"
    } else {
        ""
    }
}

/// A kernel operation that failed: in which netns, what podtap asked for,
/// on what, and the kernel's answer.
#[derive(Debug, thiserror::Error)]
#[error("netns {netns}: {op}{}: {source}", .object.as_ref().map(|o| format!(" {o}")).unwrap_or_default())]
pub struct KernelFailure {
    /// The netns it was sent in, as the caller named it.
    pub netns: String,
    /// The operation ("create TAP", "dump routes", ...).
    pub op: &'static str,
    /// The object it was on (an interface, a filter), when there is one.
    pub object: Option<String>,
    /// The kernel's answer.
    pub source: KernelError,
}

impl KernelFailure {
    /// The errno, if the kernel gave one.
    pub fn errno(&self) -> Option<nix::errno::Errno> {
        self.source.errno()
    }
}

/// The kernel's answer to a failed operation.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// An errno (from a netlink error message or an ioctl).
    #[error("{0}")]
    Errno(nix::errno::Errno),
    /// A failure without an errno (a malformed or unexpected reply, a dump
    /// that stayed inconsistent or was too big).
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

/// Which input of a call was invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Input {
    /// The wiring mode.
    Mode,
    /// The queue count of a TAP.
    Queues,
    /// The TAP owner (uid and gid).
    TapOwner,
    /// The name a TAP is asked to have.
    TapName,
    /// The MAC a guest NIC is asked to have.
    GuestMac,
    /// The per-interface choices (an interface named twice, say).
    Nics,
    /// The VMM socket `watch` hotplugs through.
    VmmSocket,
    /// vhost-net fds, asked for where the node has no `/dev/vhost-net`.
    VhostNet,
    /// The bound on one dump of the pod's tables.
    TableAnswerLimit,
    /// A description given to the call.
    Description,
    /// Serving the guest its configuration (DHCP, router advertisements).
    Serve,
}

impl fmt::Display for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Input::Mode => "mode",
            Input::Queues => "queues",
            Input::TapOwner => "TAP owner",
            Input::TapName => "TAP name",
            Input::GuestMac => "guest MAC",
            Input::Serve => "serve",
            Input::Nics => "interfaces",
            Input::VmmSocket => "VMM socket",
            Input::VhostNet => "vhost-net",
            Input::TableAnswerLimit => "table answer limit",
            Input::Description => "description",
        })
    }
}

/// An input podtap cannot act on, saying which.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Invalid {
    /// An option's value, for one interface or for all.
    #[error("{}{input}: {why}", .interface.as_ref().map(|i| format!("interface {i}: ")).unwrap_or_default())]
    Option {
        /// Which option.
        input: Input,
        /// The interface it was given for, if per interface.
        interface: Option<String>,
        /// What is wrong with the value.
        why: String,
    },
    /// An interface asked for is not in the netns.
    #[error("interface {name}: not found in netns {netns}")]
    NoSuchInterface {
        /// Its name.
        name: String,
        /// The netns path.
        netns: String,
    },
    /// An interface asked for cannot back a VM NIC.
    #[error("interface {name}: not eligible ({why})")]
    Ineligible {
        /// Its name.
        name: String,
        /// Why.
        why: String,
    },
    /// No interface of the netns can back a VM NIC.
    #[error("netns {netns}: no eligible interface to attach ({})", list_passed_over(.passed_over))]
    NoEligibleInterface {
        /// The netns path.
        netns: String,
        /// Each interface passed over, with why.
        passed_over: Vec<(String, String)>,
    },
    /// The interface is wired already, by another podtap attachment.
    #[error("interface {name}: already wired by another podtap attachment (tc filter prio {prio}); detach it first, or attach other interfaces")]
    AlreadyWired {
        /// Its name.
        name: String,
        /// The priority of the other attachment's filter.
        prio: u16,
    },
    /// Every tc priority podtap may use is held by other filters.
    #[error("interface {name}: every tc priority podtap may use ({first}..{last}) is held by other filters; nothing was built")]
    NoFreePriority {
        /// Its name.
        name: String,
        /// podtap's first priority.
        first: u16,
        /// Its last.
        last: u16,
    },
    /// A corrupt checkpoint's objects can be found only in the pod's netns,
    /// which the checkpoint no longer says.
    #[error("{0}; a forced detach needs the pod's netns to know where to clean up")]
    ForcedDetachNeedsNetns(Box<Error>),
}

fn list_passed_over(list: &[(String, String)]) -> String {
    let parts: Vec<String> = list.iter().map(|(n, why)| format!("{n}: {why}")).collect();
    parts.join("; ")
}

impl Invalid {
    /// An invalid `input`, for all interfaces.
    pub fn option(input: Input, why: impl Into<String>) -> Self {
        Invalid::Option {
            input,
            interface: None,
            why: why.into(),
        }
    }

    /// An invalid `input` given for `interface`.
    pub fn nic_option(input: Input, interface: &str, why: impl Into<String>) -> Self {
        Invalid::Option {
            input,
            interface: Some(interface.to_string()),
            why: why.into(),
        }
    }
}

impl Error {
    /// A kernel failure with its context: which netns, which operation, on
    /// what (empty for nothing).
    pub fn kernel(
        netns: &str,
        op: &'static str,
        object: impl AsRef<str>,
        source: impl Into<KernelError>,
    ) -> Self {
        let object = object.as_ref();
        Error::Kernel(Box::new(KernelFailure {
            netns: netns.to_string(),
            op,
            object: (!object.is_empty()).then(|| object.to_string()),
            source: source.into(),
        }))
    }

    /// An I/O error on `path`; permission problems become [`Error::Permission`].
    pub fn io(what: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        let path = path.into();
        if source.kind() == io::ErrorKind::PermissionDenied {
            Error::Permission {
                action: what,
                path,
                source,
            }
        } else {
            Error::Io { what, path, source }
        }
    }

    /// A serialization failure of `what`.
    pub fn serialize(what: &'static str, source: serde_json::Error) -> Self {
        Error::Serialize { what, source }
    }

    /// An invalid `input`, for all interfaces.
    pub fn invalid(input: Input, why: impl Into<String>) -> Self {
        Error::Invalid(Invalid::option(input, why))
    }

    /// The first of `errors` (carrying the count of the rest), or `None` when there are none.
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

    /// The error to act on: the first of several, the cause of a rollback.
    pub fn primary(&self) -> &Error {
        match self {
            Error::Several { first, .. } => first.primary(),
            Error::RolledBack(inner) => inner.primary(),
            e => e,
        }
    }

    /// The kernel's errno, when the kernel refused (of the primary error).
    pub fn errno(&self) -> Option<nix::errno::Errno> {
        match self.primary() {
            Error::Kernel(k) => k.errno(),
            _ => None,
        }
    }
}

/// podtap's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_errors_keep_the_first() {
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
        assert_eq!(one.errno(), Some(nix::errno::Errno::EBUSY));
        let three =
            Error::first_of(vec![kernel(), Error::invalid(Input::Queues, "x"), kernel()]).unwrap();
        assert!(matches!(three.primary(), Error::Kernel(_)), "{three}");
        assert!(
            three.to_string().ends_with("(and 2 more failure(s))"),
            "{three}"
        );
        assert_eq!(
            kernel().to_string(),
            "netns /run/netns/p: delete link tap0: EBUSY: Device or resource busy"
        );
    }

    #[test]
    fn messages_name_the_input_and_no_flag() {
        let e = Error::Invalid(Invalid::nic_option(Input::TapName, "eth0", "too long"));
        assert_eq!(e.to_string(), "interface eth0: TAP name: too long");
        let gone = Error::NetnsMissing {
            path: "/proc/42/ns/net".into(),
        };
        assert_eq!(
            gone.to_string(),
            "netns /proc/42/ns/net: does not exist (has its process exited?)"
        );
    }

    #[test]
    fn a_render_error_is_carried_typed_with_its_message() {
        let e = Error::from(RenderError::NoAttachedInterfaces);
        assert!(matches!(
            e,
            Error::Render(RenderError::NoAttachedInterfaces)
        ));
        assert!(e
            .to_string()
            .starts_with("render: the description has no attached interfaces"));
    }
}
