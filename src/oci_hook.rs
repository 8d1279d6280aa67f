//! podtap as an OCI runtime hook (createRuntime attach, poststop detach). (Being written.)

use crate::error::{Error, Result};

/// `podtap oci-hook attach|detach`: OCI state JSON on stdin.
pub fn run(_action: &str, _args: &crate::cli::OciHookArgs) -> Result<i32> {
    Err(Error::Invalid("oci-hook: not implemented yet".into()))
}
