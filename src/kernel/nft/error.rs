//! Errors, each with the errno the kernel or the socket gave when there is one.

use std::fmt;
use std::io;

use nix::errno::Errno;

use super::model::Invalid;
use super::msg::Op;

/// Why an nf_tables operation failed.
#[derive(Debug)]
pub enum Error {
    /// The table cannot be encoded (a name too long, a bad interface name).
    Invalid(Invalid),
    /// The socket failed: sending, receiving, or no answer in time
    /// (`TimedOut`, no errno).
    Io {
        /// What was being done.
        what: &'static str,
        /// The socket's error.
        source: io::Error,
    },
    /// The kernel refused a message (the first that failed, by sequence
    /// number). In a batch nothing was applied.
    Kernel {
        /// The message: [`Op::Batch`] when the kernel refused the batch as
        /// a whole (`ERESTART`: the generation moved; `EPERM`) or its commit.
        op: Op,
        /// The kernel's errno.
        errno: Errno,
        /// The kernel's extended-ack message, when it gave one.
        message: Option<String>,
        /// The other messages of the batch that failed (often as a
        /// consequence of the first).
        also: Vec<(Op, Errno)>,
    },
    /// An answer that is not what the protocol says (an ack missing, a
    /// reply that does not parse).
    Protocol(String),
    /// A table of that name exists but does not carry the expected marker:
    /// it is not podtap's, and it was left alone.
    NotOurs {
        /// The table's name.
        table: String,
        /// Its `NFTA_TABLE_USERDATA` (empty when it has none).
        userdata: Vec<u8>,
    },
    /// The ruleset kept changing while it was read or the deletion was
    /// prepared; gave up after this many tries.
    Busy(u32),
}

impl Error {
    /// The errno behind the error, when there is one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Error::Kernel { errno, .. } => Some(*errno),
            Error::Io { source, .. } => source.raw_os_error().map(Errno::from_raw),
            _ => None,
        }
    }

    pub(crate) fn io(what: &'static str) -> impl FnOnce(io::Error) -> Error {
        move |source| Error::Io { what, source }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid(e) => write!(f, "invalid table: {e}"),
            Error::Io { what, source } => write!(f, "{what}: {source}"),
            Error::Kernel {
                op,
                errno,
                message,
                also,
            } => {
                write!(f, "the kernel refused {op:?}: {errno}")?;
                if let Some(m) = message {
                    write!(f, " ({m})")?;
                }
                if !also.is_empty() {
                    write!(f, "; {} more messages of the batch failed", also.len())?;
                }
                Ok(())
            }
            Error::Protocol(m) => write!(f, "nfnetlink protocol: {m}"),
            Error::NotOurs { table, userdata } => write!(
                f,
                "the table {table} is not podtap's (its user data is {:?})",
                String::from_utf8_lossy(userdata)
            ),
            Error::Busy(n) => write!(f, "the ruleset changed under podtap {n} times in a row"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Invalid(e) => Some(e),
            _ => None,
        }
    }
}

impl From<Invalid> for Error {
    fn from(e: Invalid) -> Self {
        Error::Invalid(e)
    }
}
