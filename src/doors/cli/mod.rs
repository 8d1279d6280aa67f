//! Command-line interface: argument parsing and one handler per subcommand.
//!
//! Handlers translate arguments into library calls and print results; every
//! error becomes one line on stderr and a documented exit code.

mod args;
mod commands;
mod list;
pub(crate) mod resolv_conf;

use clap::Parser;

pub use args::{Cli, Command};

use crate::error::{exit, Error};

/// Log to stderr; `PODTAP_LOG` sets the filter (default: warnings).
pub fn init_logging() {
    let fmt = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time();
    // Without PODTAP_LOG a plain level: an EnvFilter costs a podtap process
    // 50 us to build, a twentieth of its start-up.
    let _ = match tracing_subscriber::EnvFilter::try_from_env("PODTAP_LOG") {
        Ok(filter) => fmt.with_env_filter(filter).try_init(),
        Err(_) => fmt.with_max_level(tracing::Level::WARN).try_init(),
    };
}

/// Parse the command line, run it, and return the exit code.
pub fn run() -> i32 {
    if std::env::var_os("CNI_COMMAND").is_some() {
        return crate::doors::cni::main();
    }
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
    match commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => report(&e),
    }
}

/// Print `e` as one line and return its exit code.
pub fn report(e: &Error) -> i32 {
    let line = e.to_string().replace('\n', " ");
    eprintln!("podtap: error: {line}");
    e.exit_code()
}
