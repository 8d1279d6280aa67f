//! What the caller asks attach for, and the parsers every door shares.

use std::str::FromStr;

use crate::error::{Error, Input};
use crate::kernel::mac::MacAddr;
use crate::model::{Dns, Wiring};

/// Most queues one TAP may have (the kernel's limit is 256).
pub const MAX_QUEUES: u32 = 256;

/// What the caller asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachOptions {
    /// How each pod interface is wired to its TAP.
    pub mode: Wiring,
    /// Queues per TAP, 1 to [`MAX_QUEUES`]; more than 1 makes a multi-queue
    /// TAP. A NIC's own [`NicOptions::queues`] wins.
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
    /// Choices for single pod interfaces: TAP name, guest MAC, queues, owner.
    pub nics: Vec<NicOptions>,
    /// Answer every NIC's guest's DHCPv4, DHCPv6 and router solicitations
    /// (`podtap serve`, `watch`), for the NICs that can be served: not in
    /// macvtap mode, and not an interface without an address (its network
    /// configures the guest itself). A NIC's own [`NicOptions::serve`] wins.
    pub serve: bool,
    /// The most podtap reads of one dump of the pod's tables (routes,
    /// rules, neighbours, addresses): [`TABLE_ANSWER_LIMIT`] unless the
    /// caller raises it for a pod with a larger table. Past it, attach
    /// fails with nothing built.
    pub table_answer_limit: usize,
}

pub use crate::kernel::dump::TABLE_ANSWER_LIMIT;

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
            nics: Vec::new(),
            serve: false,
            table_answer_limit: TABLE_ANSWER_LIMIT,
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

    /// The choices for pod interface `name`, if the caller made any.
    pub fn nic(&self, name: &str) -> Option<&NicOptions> {
        self.nics.iter().find(|n| n.interface == name)
    }
}

/// What the caller chose for one pod interface; `None` keeps the
/// attachment's own setting ([`AttachOptions`]) or podtap's default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NicOptions {
    /// The pod interface these choices are for.
    pub interface: String,
    /// The TAP's (or macvtap's) name, instead of `tap_<interface>`: at most
    /// 15 bytes of letters, digits and `-_.`, and no link of the netns may
    /// have it (KubeVirt's tap binding wants `tap0`, Istio's Kata mode
    /// `tap0_kata`).
    pub tap_name: Option<String>,
    /// The guest NIC's MAC, instead of the pod interface's own: a unicast
    /// address no other NIC of the attachment has. Not in macvtap mode
    /// (passthru gives the guest the pod interface's MAC).
    pub guest_mac: Option<MacAddr>,
    /// Queues of this NIC's TAP.
    pub queues: Option<u32>,
    /// Who may open this NIC's TAP without CAP_NET_ADMIN.
    pub owner: Option<TapOwner>,
    /// Serve this NIC's guest its configuration; asked for explicitly, a
    /// NIC that cannot be served is an error.
    pub serve: Option<bool>,
}

/// Whether `queues` is a queue count attach accepts; the message says why not.
pub fn check_queues(queues: u32) -> Result<u32, String> {
    if (1..=MAX_QUEUES).contains(&queues) {
        Ok(queues)
    } else {
        Err(format!("{queues} queues: must be 1..={MAX_QUEUES}"))
    }
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
        let bad = || {
            Error::invalid(
                Input::TapOwner,
                format!("{s:?}: expected UID or UID:GID (numbers)"),
            )
        };
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
                Error::invalid(
                    Input::Mode,
                    format!(
                        "unknown mode {s:?}: expected {}",
                        one_of(&Wiring::NAMES.map(|n| format!("{n:?}")))
                    ),
                )
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
        assert_eq!(Wiring::NAMES, ["tc", "bridge", "macvtap", "l3"]);
        let e = "vlan".parse::<Wiring>().unwrap_err().to_string();
        assert!(e.starts_with("mode: unknown mode \"vlan\""), "{e}");
        assert!(
            e.contains(r#"expected "tc", "bridge", "macvtap" or "l3""#),
            "{e}"
        );
    }

    #[test]
    fn owner_parses() {
        let o: TapOwner = "1000".parse().unwrap();
        assert_eq!((o.uid, o.gid), (1000, None));
        let o: TapOwner = "1000:100".parse().unwrap();
        assert_eq!((o.uid, o.gid), (1000, Some(100)));
        for bad in ["bob", "1:x", "", "4294967295", "1:4294967295", "-1"] {
            let e = bad.parse::<TapOwner>().unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::Invalid(crate::error::Invalid::Option {
                        input: Input::TapOwner,
                        ..
                    })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn modes_and_queues_parse() {
        assert_eq!("tc".parse::<Wiring>().unwrap(), Wiring::Tc);
        assert_eq!("bridge".parse::<Wiring>().unwrap(), Wiring::Bridge);
        assert_eq!("macvtap".parse::<Wiring>().unwrap(), Wiring::Macvtap);
        assert!("vepa".parse::<Wiring>().is_err());
        assert_eq!(check_queues(4), Ok(4));
        for bad in [0, 257] {
            assert!(check_queues(bad).is_err(), "{bad:?}");
        }
    }
}
