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
use crate::render::RenderError;

/// Parse the command line, run it, and return the exit code. (Whether this
/// process is the CLI at all is decided in one place: [`crate::doors::run`].)
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

/// Print `e` as one line, with what to do about it where the CLI knows,
/// and return its exit code.
pub fn report(e: &Error) -> i32 {
    let mut line = crate::doors::terminal::one_line(&e.to_string());
    if let Some(advice) = advice(e) {
        line = format!("{line}; {advice}");
    }
    eprintln!("podtap: error: {line}");
    e.exit_code()
}

/// The CLI's advice for an error, which the library's own message leaves
/// out (a library caller has no `podtap` command to run).
fn advice(e: &Error) -> Option<String> {
    match e {
        Error::CorruptState { id, .. } => Some(format!(
            "inspect it, or run `podtap detach --force --id {id}`"
        )),
        Error::Render(RenderError::MacvtapByName { format, .. }) => {
            let vmm = if format.starts_with("QEMU") {
                "qemu"
            } else {
                "cloud-hypervisor"
            };
            Some(format!("`podtap exec --vmm {vmm}` does that"))
        }
        _ => None,
    }
}
