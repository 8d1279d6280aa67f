//! Command-line interface: argument parsing and one handler per subcommand.
//!
//! Handlers translate arguments into library calls and print results; every
//! error becomes one line on stderr and a documented exit code.

mod args;
mod commands;
mod doctor;
mod generated;
mod list;
mod logging;
mod ops;
pub(crate) mod resolv_conf;
mod show;

use clap::Parser;

pub use args::{Cli, Command};

use crate::error::{exit, Error};

/// Which door a process is: the CNI plugin only when `CNI_COMMAND` is set
/// and the command line names nothing. A runtime runs a CNI plugin with no
/// arguments (libcni passes only the program's path); arguments are a
/// caller's explicit choice, and an inherited environment variable must not
/// redirect them.
fn is_cni_plugin(cni_command: bool, args: usize) -> bool {
    cni_command && args <= 1
}

/// Parse the command line, run it, and return the exit code.
pub fn run() -> i32 {
    let cni_command = std::env::var_os("CNI_COMMAND").is_some();
    let args = std::env::args_os().len();
    if is_cni_plugin(cni_command, args) {
        logging::init(logging::LogFormat::from_env());
        return crate::doors::cni::main();
    }
    if cni_command {
        eprintln!("podtap: warning: CNI_COMMAND is ignored: the command line names a subcommand");
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
    logging::init(cli.log_format);
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

#[cfg(test)]
mod tests {
    use super::is_cni_plugin;

    #[test]
    fn the_command_line_wins_over_cni_command() {
        assert!(is_cni_plugin(true, 1));
        assert!(is_cni_plugin(true, 0));
        assert!(!is_cni_plugin(true, 2));
        assert!(!is_cni_plugin(false, 1));
        assert!(!is_cni_plugin(false, 3));
    }
}
