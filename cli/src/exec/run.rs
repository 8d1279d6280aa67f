//! Passing the fds by exec: the command replaces this process, keeping
//! stdio and the handed-over fds only ([`confine`](super::confine)).

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use nix::sched::{setns, CloneFlags};

use super::confine::{confine, RunAs};
use crate::error::Error;
use podtap::netns::Netns;

/// Exec `argv` + `extra` (the fd arguments) in this netns, holding exactly
/// `keep`, as `user` when given. Returns only the error.
pub fn exec_vmm(
    argv: &[String],
    extra: &[String],
    keep: &[BorrowedFd<'_>],
    user: Option<RunAs>,
) -> Error {
    if let Err(e) = confine(keep, user) {
        return e;
    }
    // The fds stay open (owned by the caller) until the exec replaces the
    // process; if the exec fails they close when the caller drops them.
    exec_argv(argv, extra)
}

/// Exec `argv` unchanged inside the proven pod netns `ns`, with stdio
/// only, as `user` when given. Returns only the error.
///
/// `setns(2)` changes only the calling thread, and a library call never
/// makes it on its caller's. Here the calling thread is the one about to
/// exec: `podtap exec` starts no other thread before this point, and the
/// exec replaces the whole process with the command, which then runs
/// entirely in the pod netns.
pub fn exec_in_netns(ns: &Netns, argv: &[String], user: Option<RunAs>) -> Error {
    let entered = setns(ns.as_fd(), CloneFlags::CLONE_NEWNET)
        .map_err(|e| Error::io("enter netns", ns.path(), e.into()))
        .and_then(|()| confine(&[], user));
    match entered {
        Ok(()) => exec_argv(argv, &[]),
        Err(e) => e,
    }
}

/// execvp `argv` + `extra`; returns only the error (exit code 1).
fn exec_argv(argv: &[String], extra: &[String]) -> Error {
    let Some((program, args)) = argv.split_first() else {
        return Error::Invalid("exec: no command given after --".into());
    };
    let e = std::process::Command::new(program)
        .args(args)
        .args(extra)
        .exec();
    // Not Error::io: a permission error here is still "exec failed" (exit 1).
    Error::Podtap(podtap::error::Error::Io {
        what: "exec",
        path: PathBuf::from(program),
        source: io::Error::new(e.kind(), e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_command_exits_1() {
        let err = exec_argv(&["/nonexistent/podtap-no-such-vmm".into()], &[]);
        assert_eq!(err.exit_code(), crate::error::exit::FAILURE);
        assert!(err.to_string().starts_with("exec /nonexistent/"), "{err}");
    }
}
