//! The `podtap` binary: a CLI, and a CNI plugin when `CNI_COMMAND` is set and it has no arguments.

use std::process::ExitCode;

/// An exit code outside 0-255 (none is documented) becomes 1, not its low byte.
fn main() -> ExitCode {
    ExitCode::from(u8::try_from(podtap::main()).unwrap_or(1))
}
