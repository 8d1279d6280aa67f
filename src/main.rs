//! The `podtap` binary: a CLI, and a CNI plugin when `CNI_COMMAND` is set.

use std::process::ExitCode;

fn main() -> ExitCode {
    podtap::doors::cli::init_logging();
    let code = podtap::doors::cli::run();
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
