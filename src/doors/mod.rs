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
pub mod oci_hook;
pub mod output;
pub mod pod_policy;
pub mod state_args;
pub mod stdin;

#[cfg(test)]
mod input_props;
