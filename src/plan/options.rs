//! What the caller asks attach for, and the parsers every door shares.

use std::str::FromStr;

use crate::error::Error;
use crate::model::{Dns, Wiring};

/// Most queues one TAP may have (the kernel's limit is 256).
pub const MAX_QUEUES: u32 = 256;

/// What the caller asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachOptions {
    /// How each pod interface is wired to its TAP.
    pub mode: Wiring,
    /// Queues per TAP, 1 to [`MAX_QUEUES`]; more than 1 makes a multi-queue TAP.
    pub queues: u32,
    /// Create TAPs with `IFF_VNET_HDR` (what virtio-net wants).
    pub vnet_hdr: bool,
    /// The uid that may open the TAPs without CAP_NET_ADMIN (TUNSETOWNER).
    pub owner: Option<u32>,
    /// The gid that may open the TAPs without CAP_NET_ADMIN (TUNSETGROUP).
    pub group: Option<u32>,
    /// Only these pod interfaces; all eligible ones when `None`.
    pub interfaces: Option<Vec<String>>,
    /// The guest's resolver configuration, recorded as the description's `dns`.
    pub dns: Option<Dns>,
}

impl Default for AttachOptions {
    fn default() -> Self {
        AttachOptions {
            mode: Wiring::Tc,
            queues: 1,
            vnet_hdr: true,
            owner: None,
            group: None,
            interfaces: None,
            dns: None,
        }
    }
}

impl AttachOptions {
    /// Set the TAP owner and group from a parsed `UID[:GID]`.
    pub fn with_tap_owner(mut self, owner: TapOwner) -> Self {
        self.owner = Some(owner.uid);
        self.group = owner.gid;
        self
    }
}

/// The environment variable that names tc mode's redirect filter for every
/// attach of this process; a node setting, read from the environment the
/// node admin gives the CLI, the CNI plugin and the OCI hook.
pub const TC_REDIRECT_ENV: &str = "PODTAP_TC_REDIRECT";

/// tc mode's one redirect filter, u32 match-all with a mirred egress
/// redirect, as `--tc-redirect`, `PODTAP_TC_REDIRECT` and the CNI key
/// `tcRedirect` name it. An earlier release also took `bpf` and `auto`;
/// they are refused now, as any other value is.
pub const TC_REDIRECT: &str = "u32";

/// Check a tc redirect setting: [`TC_REDIRECT`], or empty for the default
/// (the same filter).
pub fn check_tc_redirect(value: &str) -> Result<(), Error> {
    if value.is_empty() || value == TC_REDIRECT {
        return Ok(());
    }
    Err(Error::Invalid(format!(
        "{:?}: the tc redirect must be {TC_REDIRECT}",
        value.chars().take(32).collect::<String>()
    )))
}

/// Check `PODTAP_TC_REDIRECT` ([`check_tc_redirect`]); unset is the default.
pub fn check_tc_redirect_env() -> Result<(), Error> {
    match std::env::var(TC_REDIRECT_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(()),
        Err(std::env::VarError::NotUnicode(_)) => Err(Error::Invalid(format!(
            "{TC_REDIRECT_ENV}: not UTF-8: the tc redirect must be {TC_REDIRECT}"
        ))),
        Ok(v) => {
            check_tc_redirect(&v).map_err(|e| Error::Invalid(format!("{TC_REDIRECT_ENV}: {e}")))
        }
    }
}

/// Whether `queues` is a queue count attach accepts; the message says why not.
pub fn check_queues(queues: u32) -> Result<u32, String> {
    if (1..=MAX_QUEUES).contains(&queues) {
        Ok(queues)
    } else {
        Err(format!("{queues} queues: must be 1..={MAX_QUEUES}"))
    }
}

/// Parse a queue count (for text inputs: annotations, `CNI_ARGS`).
pub fn parse_queues(text: &str) -> Result<u32, String> {
    let n: u32 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of queues (1..={MAX_QUEUES})"))?;
    check_queues(n)
}

/// `UID` or `UID:GID`: who may open the TAPs without CAP_NET_ADMIN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TapOwner {
    /// The owning uid.
    pub uid: u32,
    /// The owning gid, if given.
    pub gid: Option<u32>,
}

impl FromStr for TapOwner {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::Invalid(format!("{s:?}: expected UID or UID:GID (numbers)"));
        let (uid, gid) = match s.split_once(':') {
            Some((u, g)) => (u, Some(g)),
            None => (s, None),
        };
        // u32::MAX is (uid_t)-1, which the kernel reads as "no owner".
        let id = |t: &str| {
            t.parse::<u32>()
                .ok()
                .filter(|n| *n != u32::MAX)
                .ok_or_else(bad)
        };
        Ok(TapOwner {
            uid: id(uid)?,
            gid: gid.map(id).transpose()?,
        })
    }
}

impl FromStr for Wiring {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Wiring::ALL
            .into_iter()
            .find(|mode| mode.as_str() == s)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "unknown mode {s:?}: expected {}",
                    one_of(&Wiring::NAMES.map(|n| format!("{n:?}")))
                ))
            })
    }
}

/// `names` as a choice in prose: "a, b or c".
fn one_of<T: AsRef<str>>(names: &[T]) -> String {
    let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
    match names.split_last() {
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_are_serdes_and_parse_back() {
        for mode in Wiring::ALL {
            assert_eq!(serde_json::to_value(mode).unwrap(), mode.as_str());
            assert_eq!(mode.as_str().parse::<Wiring>().unwrap(), mode);
        }
        assert_eq!(Wiring::NAMES, ["tc", "bridge", "macvtap"]);
        let e = "vlan".parse::<Wiring>().unwrap_err().to_string();
        assert!(e.contains(r#"expected "tc", "bridge" or "macvtap""#), "{e}");
    }

    #[test]
    fn tc_redirect_names() {
        assert!(check_tc_redirect("").is_ok());
        assert!(check_tc_redirect("u32").is_ok());
        for gone in ["bpf", "auto", "BPF\n"] {
            let e = check_tc_redirect(gone).unwrap_err().to_string();
            assert!(e.contains("must be u32") && !e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn owner_parses() {
        let o: TapOwner = "1000".parse().unwrap();
        assert_eq!((o.uid, o.gid), (1000, None));
        let o: TapOwner = "1000:100".parse().unwrap();
        assert_eq!((o.uid, o.gid), (1000, Some(100)));
        for bad in ["bob", "1:x", "", "4294967295", "1:4294967295", "-1"] {
            let e = bad.parse::<TapOwner>().unwrap_err();
            assert_eq!(e.exit_code(), crate::error::exit::INVALID, "{bad:?}");
        }
    }

    #[test]
    fn modes_and_queues_parse() {
        assert_eq!("tc".parse::<Wiring>().unwrap(), Wiring::Tc);
        assert_eq!("bridge".parse::<Wiring>().unwrap(), Wiring::Bridge);
        assert_eq!("macvtap".parse::<Wiring>().unwrap(), Wiring::Macvtap);
        assert!("vepa".parse::<Wiring>().is_err());
        assert_eq!(parse_queues(" 4 ").unwrap(), 4);
        for bad in ["0", "257", "x", ""] {
            assert!(parse_queues(bad).is_err(), "{bad:?}");
        }
    }
}
