//! Passing the fds by exec: the command replaces this process, keeping
//! stdio and the handed-over fds only ([`confine`](super::confine)).

use std::io;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use super::confine::{confine, RunAs};
use super::open::Handover;
use super::recorded_netns::enter;
use crate::error::Error;
use crate::kernel::netns::NetNs;

/// Exec `argv` + the handover's fd arguments in this netns, holding exactly
/// the handover's fds, as `user` when given. Returns only the error.
pub(crate) fn exec_vmm(argv: &[String], handover: &Handover, user: Option<RunAs>) -> Error {
    let keep: Vec<_> = handover.fds.iter().map(AsFd::as_fd).collect();
    if let Err(e) = confine(&keep, user) {
        return e;
    }
    // The fds stay open (owned by `handover`) until the exec replaces the
    // process; if the exec fails they close when the caller drops it.
    exec_argv(argv, &handover.args)
}

/// Exec `argv` unchanged inside the proven pod netns `ns`, with stdio
/// only, as `user` when given. Returns only the error.
pub(crate) fn exec_in_netns(ns: &NetNs, argv: &[String], user: Option<RunAs>) -> Error {
    let entered = enter(ns).and_then(|()| confine(&[], user));
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
    Error::Io {
        what: "exec",
        path: PathBuf::from(program),
        source: io::Error::new(e.kind(), e.to_string()),
    }
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
