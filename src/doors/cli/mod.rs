//! Command-line interface: argument parsing and one handler per subcommand.
//!
//! Handlers translate arguments into library calls and print results; every
//! error becomes one line on stderr and a documented exit code.

mod args;
mod commands;

use std::io::Write;
use std::path::Path;

use clap::Parser;

pub use args::{Cli, Command, OciHookArgs};

use crate::error::{exit, Error, Result};
use crate::model::Description;

/// Log to stderr; `PODTAP_LOG` sets the filter (default: warnings).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("PODTAP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .try_init();
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

/// Write the description as pretty JSON to `output` (atomically) or stdout.
pub fn emit(desc: &Description, output: Option<&Path>) -> Result<()> {
    let mut text = serde_json::to_string_pretty(desc)
        .map_err(|e| Error::Invalid(format!("serialize: {e}")))?;
    text.push('\n');
    emit_text(&text, output)
}

pub fn emit_text(text: &str, output: Option<&Path>) -> Result<()> {
    match output {
        Some(path) => crate::state::write_atomic(path, text.as_bytes(), 0o644),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|_| out.flush())
                .map_err(|e| Error::io("write", "stdout", e))
        }
    }
}
