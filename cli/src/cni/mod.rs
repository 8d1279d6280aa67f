//! podtap as a chained CNI plugin (spec 0.3.0 to 1.1.0).
//!
//! The runtime runs the binary with `CNI_COMMAND` and friends in the
//! environment and the network configuration on stdin. podtap answers with a
//! result (ADD), a version list (VERSION), nothing (DEL, CHECK, STATUS, GC),
//! or a CNI error object on stdout and a non-zero exit. See `docs/integration.md`.

mod commands;
pub(crate) mod config;
pub(crate) mod result;
mod status;
pub mod version;

use std::io::Write;

use serde::Serialize;

pub use version::CniVersion;

/// The spec's well-known error codes, and podtap's own (100 + its exit code).
pub mod code {
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    pub const CONTAINER_UNKNOWN: u32 = 3;
    pub const INVALID_ENV: u32 = 4;
    pub const IO_FAILURE: u32 = 5;
    pub const DECODING_FAILURE: u32 = 6;
    pub const INVALID_CONFIG: u32 = 7;
    pub const TRY_AGAIN_LATER: u32 = 11;
    pub const NOT_AVAILABLE: u32 = 50;
    /// podtap-specific codes are this plus podtap's exit code (e.g. 110: kernel operation failed).
    pub const PODTAP_BASE: u32 = 100;
}

/// The exit status of every failed CNI command (the error object says why).
pub const EXIT_ERROR: i32 = 1;

/// A CNI error object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CniError {
    pub code: u32,
    pub msg: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub details: String,
}

impl CniError {
    pub fn new(code: u32, msg: impl Into<String>) -> Self {
        CniError {
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    pub fn details(mut self, details: impl Into<String>) -> Self {
        self.details = details.into();
        self
    }
}

impl From<crate::error::Error> for CniError {
    fn from(e: crate::error::Error) -> Self {
        use podtap::error::Error;
        let exit = e.exit_code();
        let primary = match &e {
            crate::error::Error::Podtap(p) => Some(p.primary()),
            _ => None,
        };
        let code = match primary {
            Some(Error::NetnsMissing { .. }) => code::CONTAINER_UNKNOWN,
            Some(Error::BadId { .. }) => code::INVALID_ENV,
            Some(Error::Busy { .. }) => code::TRY_AGAIN_LATER,
            Some(Error::Io { .. }) => code::IO_FAILURE,
            _ => code::PODTAP_BASE + u32::try_from(exit).unwrap_or(1),
        };
        CniError::new(code, e.to_string().replace('\n', " "))
            .details(format!("podtap exit code {exit}"))
    }
}

impl From<podtap::error::Error> for CniError {
    fn from(e: podtap::error::Error) -> Self {
        CniError::from(crate::error::Error::from(e))
    }
}

/// The `CNI_*` environment.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub command: String,
    pub container_id: Option<String>,
    pub netns: Option<String>,
    pub ifname: Option<String>,
    pub args: String,
}

impl Env {
    fn from_process() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Env {
            command: var("CNI_COMMAND").unwrap_or_default(),
            container_id: var("CNI_CONTAINERID"),
            netns: var("CNI_NETNS"),
            ifname: var("CNI_IFNAME"),
            args: var("CNI_ARGS").unwrap_or_default(),
        }
    }

    /// A variable the command cannot do without (error 4 when unset or empty).
    fn required(&self, name: &str) -> Result<&str, CniError> {
        let v = match name {
            "CNI_CONTAINERID" => &self.container_id,
            "CNI_NETNS" => &self.netns,
            "CNI_IFNAME" => &self.ifname,
            _ => &None,
        };
        v.as_deref().ok_or_else(|| {
            CniError::new(
                code::INVALID_ENV,
                format!("{name} is required for {}", self.command),
            )
        })
    }
}

/// Run the CNI plugin protocol: env `CNI_*`, config on stdin, result or error on stdout.
pub fn main() -> i32 {
    let env = Env::from_process();
    let (stdin, outcome) = match crate::stdin::read_stdin() {
        Ok(stdin) => {
            let outcome = commands::run(&env, &stdin);
            (stdin, outcome)
        }
        Err(e) => (String::new(), Err(stdin_error(&e))),
    };
    match outcome {
        Ok(Some(value)) => match print_json(&value) {
            Ok(()) => 0,
            Err(_) => EXIT_ERROR,
        },
        Ok(None) => 0,
        Err(err) => {
            let version =
                config::requested_version(&stdin).unwrap_or_else(|| CniVersion::LATEST.to_string());
            report(&version, &err);
            EXIT_ERROR
        }
    }
}

/// The CNI error for a stdin podtap will not read: too large or not text is
/// an invalid configuration (7), a failed read an I/O failure (5).
fn stdin_error(e: &crate::stdin::StdinError) -> CniError {
    use crate::stdin::StdinError;
    let code = match e {
        StdinError::TooLarge(_) => code::INVALID_CONFIG,
        StdinError::NotUtf8 => code::DECODING_FAILURE,
        StdinError::Io(_) => code::IO_FAILURE,
    };
    CniError::new(code, format!("network configuration: {e}"))
}

/// Print the error object on stdout (where the runtime reads it) and a line on stderr.
fn report(version: &str, err: &CniError) {
    tracing::error!("CNI error {}: {} {}", err.code, err.msg, err.details);
    let mut obj = serde_json::json!({ "cniVersion": version, "code": err.code, "msg": err.msg });
    if let (false, Some(o)) = (err.details.is_empty(), obj.as_object_mut()) {
        o.insert("details".into(), err.details.clone().into());
    }
    let _ = print_json(&obj);
}

fn print_json(value: &serde_json::Value) -> std::io::Result<()> {
    let text = serde_json::to_string(value).map_err(std::io::Error::other)?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.write_all(b"\n")?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use podtap::error::Error;

    #[test]
    fn podtap_errors_map_to_cni_codes() {
        let missing = Error::NetnsMissing {
            path: "/run/netns/x".into(),
        };
        assert_eq!(CniError::from(missing).code, code::CONTAINER_UNKNOWN);
        let busy = Error::Busy {
            id: "a".into(),
            lock: "/run/podtap/a.lock".into(),
        };
        assert_eq!(CniError::from(busy).code, code::TRY_AGAIN_LATER);
        let failed = CniError::from(Error::CheckFailed {
            id: "a".into(),
            problems: vec!["gone".into()],
        });
        assert_eq!(failed.code, 112);
        assert_eq!(failed.details, "podtap exit code 12");
        assert_eq!(
            CniError::from(crate::error::Error::Invalid("x".into())).code,
            113
        );
    }
}
