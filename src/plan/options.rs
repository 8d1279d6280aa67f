//! What the caller asks attach for, and the parsers every door shares.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

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
    /// Which filter tc mode redirects with.
    pub tc_redirect: TcRedirect,
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
            tc_redirect: TcRedirect::U32,
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

/// The environment variable that chooses tc mode's redirect filter for
/// every attach of this process ([`TcRedirect`]); a node setting, read
/// from the environment the node admin gives the CLI, the CNI plugin and
/// the OCI hook. `watch` uses what the attachment's checkpoint records.
pub const TC_REDIRECT_ENV: &str = "PODTAP_TC_REDIRECT";

/// Which filter tc mode redirects with.
///
/// The default is [`TcRedirect::U32`]: the BPF redirect measured no more
/// packets per second than u32 + mirred (`docs/benchmarks.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TcRedirect {
    /// The BPF redirect where the kernel takes it, else u32 + mirred.
    Auto,
    /// The BPF redirect; attach fails when the kernel refuses it.
    Bpf,
    /// u32 match-all with a mirred egress redirect (the default).
    U32,
}

impl TcRedirect {
    /// Every kind, the default ([`TcRedirect::U32`]) first.
    pub const ALL: [TcRedirect; 3] = [TcRedirect::U32, TcRedirect::Bpf, TcRedirect::Auto];
    /// Their names, in the order of [`TcRedirect::ALL`]: `--tc-redirect`'s
    /// values (an empty value also means the default).
    pub const NAMES: [&'static str; 3] = [
        TcRedirect::ALL[0].as_str(),
        TcRedirect::ALL[1].as_str(),
        TcRedirect::ALL[2].as_str(),
    ];

    /// The name used on command lines, in CNI configurations, annotations
    /// and checkpoints (serde's lowercase names, spelled here once).
    pub const fn as_str(self) -> &'static str {
        match self {
            TcRedirect::Auto => "auto",
            TcRedirect::Bpf => "bpf",
            TcRedirect::U32 => "u32",
        }
    }

    /// What a version-3 checkpoint without the field means: `auto`, which
    /// the podtap that first wrote the field left out as its default.
    pub fn absent() -> Self {
        TcRedirect::Auto
    }

    /// Whether a checkpoint leaves it out ([`TcRedirect::absent`]).
    pub fn is_absent(&self) -> bool {
        *self == TcRedirect::absent()
    }

    /// From `PODTAP_TC_REDIRECT`: unset or empty is [`TcRedirect::U32`].
    pub fn from_env() -> Result<Self, Error> {
        match std::env::var(TC_REDIRECT_ENV) {
            Err(std::env::VarError::NotPresent) => Ok(TcRedirect::U32),
            Err(std::env::VarError::NotUnicode(_)) => Err(Error::Invalid(format!(
                "{TC_REDIRECT_ENV}: not UTF-8: the tc redirect must be {}",
                one_of(&Self::NAMES)
            ))),
            Ok(v) => v
                .parse()
                .map_err(|e| Error::Invalid(format!("{TC_REDIRECT_ENV}: {e}"))),
        }
    }
}

impl FromStr for TcRedirect {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        if s.is_empty() {
            return Ok(TcRedirect::ALL[0]);
        }
        Self::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "{:?}: the tc redirect must be {}",
                    s.chars().take(32).collect::<String>(),
                    one_of(&Self::NAMES)
                ))
            })
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
        for kind in TcRedirect::ALL {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
            assert_eq!(kind.as_str().parse::<TcRedirect>().unwrap(), kind);
        }
        assert_eq!(Wiring::NAMES, ["tc", "bridge", "macvtap"]);
        assert_eq!(TcRedirect::NAMES, ["u32", "bpf", "auto"]);
        let e = "vlan".parse::<Wiring>().unwrap_err().to_string();
        assert!(e.contains(r#"expected "tc", "bridge" or "macvtap""#), "{e}");
    }

    #[test]
    fn tc_redirect_names() {
        assert_eq!("".parse::<TcRedirect>().ok(), Some(TcRedirect::U32));
        assert_eq!("auto".parse::<TcRedirect>().ok(), Some(TcRedirect::Auto));
        assert_eq!("bpf".parse::<TcRedirect>().ok(), Some(TcRedirect::Bpf));
        assert_eq!("u32".parse::<TcRedirect>().ok(), Some(TcRedirect::U32));
        let e = "BPF\n".parse::<TcRedirect>().err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("must be u32, bpf or auto") && !e.contains('\n')));
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
