//! The `podtap` binary: a CLI, and a CNI plugin when `CNI_COMMAND` is set and it has no arguments.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(u8::try_from(podtap::main()).unwrap_or(1))
}
