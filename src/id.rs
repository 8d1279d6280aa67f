//! The sandbox id: the key of an attachment, validated once at the door.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// Longest sandbox id accepted (CNI ids are 64 hex digits plus an interface name).
pub const MAX_ID_LEN: usize = 128;

/// A validated sandbox id: 1 to 128 bytes of letters, digits and `-_.:@+=`,
/// not starting with `.` and without `..`, so it can never name a path
/// outside the state directory. The state directory accepts only this type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SandboxId(String);

impl SandboxId {
    /// Validate `id`.
    pub fn new(id: impl Into<String>) -> Result<Self, Error> {
        let id = id.into();
        match problem(&id) {
            None => Ok(SandboxId(id)),
            Some(why) => Err(Error::BadId { id, why }),
        }
    }

    /// The id of one CNI attachment: `<containerID>-<ifname>`.
    pub fn for_cni(container_id: &str, ifname: &str) -> Result<Self, Error> {
        SandboxId::new(format!("{container_id}-{ifname}"))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why `id` is not a valid sandbox id, if it is not.
fn problem(id: &str) -> Option<&'static str> {
    if id.is_empty() {
        Some("empty")
    } else if id.len() > MAX_ID_LEN {
        Some("longer than 128 bytes")
    } else if id.contains('/') {
        Some("contains '/'")
    } else if id.contains("..") {
        Some("contains '..'")
    } else if id.starts_with('.') {
        Some("starts with '.'")
    } else if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.:@+=".contains(&b))
    {
        Some("only letters, digits and -_.:@+= are allowed")
    } else {
        None
    }
}

impl FromStr for SandboxId {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        SandboxId::new(s)
    }
}

impl TryFrom<String> for SandboxId {
    type Error = Error;

    fn try_from(s: String) -> Result<Self, Error> {
        SandboxId::new(s)
    }
}

impl From<SandboxId> for String {
    fn from(id: SandboxId) -> String {
        id.0
    }
}

impl AsRef<str> for SandboxId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SandboxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_validated() {
        assert!(SandboxId::new("abc-123_x.eth0").is_ok());
        assert!(SandboxId::new("a".repeat(128)).is_ok());
        for bad in ["", "a/b", "..", "a..b", ".hidden", "sp ace", "x\n"] {
            let err = SandboxId::new(bad).unwrap_err();
            assert!(
                matches!(err.primary(), crate::error::Error::BadId { .. }),
                "{bad:?}"
            );
        }
        assert!(SandboxId::new("a".repeat(129)).is_err());
        assert!(SandboxId::for_cni("c/1", "eth0").is_err());
        assert_eq!(
            SandboxId::for_cni("c1", "eth0").unwrap().as_str(),
            "c1-eth0"
        );
    }

    #[test]
    fn serde_validates() {
        assert!(serde_json::from_str::<SandboxId>("\"../x\"").is_err());
        let id: SandboxId = serde_json::from_str("\"ok\"").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"ok\"");
    }
}
