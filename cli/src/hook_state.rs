//! The OCI hook's input: the runtime's container state on stdin and the
//! annotation keys podtap reads from it. A leaf: the hook (`oci_hook`) and
//! where its description goes (`hook_output`) both read it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use crate::error::{Error, Result};
use podtap::state::SandboxId;

/// Annotation keys podtap reads.
pub mod annotation {
    pub const MODE: &str = "io.podtap.mode";
    pub const QUEUES: &str = "io.podtap.queues";
    pub const INTERFACES: &str = "io.podtap.interfaces";
    pub const OUTPUT: &str = "io.podtap.output";
    pub const TAP_OWNER: &str = "io.podtap.tap-owner";
    /// `yes`/`no`: serve the pod's guests (DHCP, router advertisements).
    pub const SERVE: &str = "io.podtap.serve";
    /// `io.podtap.nic.IFNAME`: one interface's own choices (`crate::nic_spec`).
    pub const NIC_PREFIX: &str = "io.podtap.nic.";
}

/// The OCI runtime state (runtime-spec `state`), as far as podtap reads it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    pub id: SandboxId,
    #[serde(default)]
    pub pid: Option<i64>,
    #[serde(default)]
    pub bundle: Option<PathBuf>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// Parse and sanity-check the state JSON.
pub fn parse_state(text: &str) -> Result<State> {
    // The id is validated first, so a bad one is exit 7 whatever else is wrong.
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| Error::Invalid(format!("oci-hook: invalid OCI state on stdin: {e}")))?;
    if let Some(id) = value.get("id").and_then(serde_json::Value::as_str) {
        SandboxId::new(id)?;
    }
    serde_json::from_value(value)
        .map_err(|e| Error::Invalid(format!("oci-hook: invalid OCI state on stdin: {e}")))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    /// Annotations from pairs.
    pub(crate) fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}
