//! Command-line interface: argument parsing and one handler per subcommand.
//!
//! Handlers translate arguments into library calls and print results; every
//! error becomes one line on stderr and a documented exit code.

mod args;
mod commands;
mod doctor;
mod generated;
mod list;
pub(crate) mod logging;
mod ops;
pub(crate) mod resolv_conf;
mod show;
mod stop_signals;

use clap::Parser;

pub use args::{Cli, Command};

use crate::error::{exit, Error};
use podtap::error::Error as Podtap;
use podtap::render::RenderError;

/// Parse the command line, run it, and return the exit code. (Whether this
/// process is the CLI at all is decided in one place: [`crate::run`].)
pub fn run() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
        }
    };
    logging::init(cli.log_format);
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => report(&e),
    }
}

/// Print `e` as one line, in the CLI's words (its flags) and with what to
/// do about it where the CLI knows, and return its exit code.
pub fn report(e: &Error) -> i32 {
    let mut line = crate::terminal::one_line(&wording(e));
    if let Some(advice) = advice(e) {
        line.push_str(&advice);
    }
    eprintln!("podtap: error: {line}");
    e.exit_code()
}

/// The message, naming the CLI's flag where the library names its option.
fn wording(e: &Error) -> String {
    use podtap::error::{Input, Invalid};
    match e {
        Error::Podtap(Podtap::Invalid(Invalid::Option {
            input: Input::Queues,
            interface: None,
            why,
        })) => format!("--queues {why}"),
        e => e.to_string(),
    }
}

/// The CLI's advice for an error, with its separator, which the library's
/// own message leaves out (a library caller has no `podtap` command to run).
fn advice(e: &Error) -> Option<String> {
    use podtap::error::{Input, Invalid};
    let Error::Podtap(e) = e else {
        return None;
    };
    match e.primary() {
        Podtap::HostNetns { .. } => Some(" (only podtap scan --allow-host-netns reads it)".into()),
        Podtap::CorruptState { id, .. } => Some(format!(
            "; inspect it, or run `podtap detach --force --id {id}`"
        )),
        Podtap::Invalid(Invalid::ForcedDetachNeedsNetns(_)) => {
            Some("; pass --netns PATH of the pod's netns".into())
        }
        Podtap::Invalid(Invalid::Option {
            input: Input::VhostNet,
            ..
        }) => Some("; load the vhost_net module, or drop --vhost".into()),
        Podtap::Kernel(k)
            if k.op == "open the queues of TAP" && k.errno() == Some(nix::errno::Errno::EBUSY) =>
        {
            Some(" (is a VMM already holding it?)".into())
        }
        Podtap::Render(RenderError::MacvtapByName { format, .. }) => {
            let vmm = if format.starts_with("QEMU") {
                "qemu"
            } else {
                "cloud-hypervisor"
            };
            Some(format!("; `podtap exec --vmm {vmm}` does that"))
        }
        _ => None,
    }
}
