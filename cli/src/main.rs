//! The `podtap` program: the CLI, and the chained CNI plugin when
//! `CNI_COMMAND` is set and it has no arguments; the OCI hook, `exec`,
//! `demo` and `cni-install` are subcommands of the CLI.
//!
//! Each door turns its own inputs into calls of the `podtap` library (its
//! public API only) and formats the results; the exit codes, flag wording
//! and log set-up live here, not in the library.

mod beneath;
mod cmd;
mod cni;
mod cni_install;
mod demo;
mod error;
mod exec;
mod hook_output;
mod hook_state;
mod nic_spec;
mod oci_hook;
mod output;
mod pod_policy;
mod state_args;
mod stdin;
mod table_limit;
mod terminal;

#[cfg(test)]
mod input_props;

/// Which door a process is: the CNI plugin only when `CNI_COMMAND` is set
/// and the command line names nothing. A runtime runs a CNI plugin with no
/// arguments (libcni passes only the program's path); arguments are a
/// caller's explicit choice, and an inherited environment variable must not
/// redirect them.
fn is_cni_plugin(cni_command: bool, args: usize) -> bool {
    cni_command && args <= 1
}

/// Run the process's door, chosen here and nowhere else: the CNI plugin or
/// the CLI. Returns the exit code.
fn run() -> i32 {
    let cni_command = std::env::var_os("CNI_COMMAND").is_some();
    let args = std::env::args_os().len();
    if is_cni_plugin(cni_command, args) {
        cmd::logging::init(cmd::logging::LogFormat::from_env());
        return cni::main();
    }
    if cni_command {
        eprintln!("podtap: warning: CNI_COMMAND is ignored: the command line names a subcommand");
    }
    cmd::run()
}

/// An exit code outside 0-255 (none is documented) becomes 1, not its low byte.
fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(u8::try_from(run()).unwrap_or(1))
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
