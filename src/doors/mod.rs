//! The doors: the CLI, the CNI plugin, the OCI hook, `exec` and `demo`.
//!
//! Each door turns its own inputs into calls of the library and formats the results.

pub(crate) mod beneath;
pub mod cli;
pub mod cni;
pub mod cni_install;
pub mod demo;
pub mod exec;
pub mod hook_output;
pub mod hook_state;
pub mod oci_hook;
pub mod output;
pub mod pod_policy;
pub mod state_args;
pub mod stdin;
pub mod table_limit;
pub mod terminal;

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
pub(crate) fn run() -> i32 {
    let cni_command = std::env::var_os("CNI_COMMAND").is_some();
    let args = std::env::args_os().len();
    if is_cni_plugin(cni_command, args) {
        cli::logging::init(cli::logging::LogFormat::from_env());
        return cni::main();
    }
    if cni_command {
        eprintln!("podtap: warning: CNI_COMMAND is ignored: the command line names a subcommand");
    }
    cli::run()
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
