//! The node's policy for what a pod may ask for.
//!
//! A pod's annotations, CNI args and `runtimeConfig` are written by whoever
//! creates the pod; podtap runs as root. Options that grant something on the
//! node are honoured from them only when the node admin allowed them (the
//! conflist's `podPolicy`, the hook's `--pod-*` flags). Default: nothing.
//!
//! | option | a pod may always | beyond that, only with |
//! |---|---|---|
//! | wiring mode | the node's own mode | `modes` |
//! | queues | up to the node's own count | up to `maxQueues` |
//! | TAP owner uid | the node's own owner | `tapOwners` |
//! | TAP group gid | the node's own group | `tapGroups` |
//! | TAP name | podtap's own (`tap_<ifname>`) | `tapNames` |
//! | guest MAC | the pod interface's own | `guestMacs: true` |
//! | being served (DHCP, router advertisements) | what the node does (`--serve`), or not being served | `serve: true` |
//!
//! A NIC's own queues and owner (`io.podtap.nic.IFNAME`) are bounded as the
//! attachment's are. A guest MAC of the pod's choosing could be another
//! pod's on the node's bridge, so it is refused unless the node allows it.
//! This module only decides; each door applies it before attach starts.

use serde::Deserialize;

use podtap::attach::NicOptions;
use podtap::model::Wiring;
use podtap::MacAddr;

/// What the node lets a pod choose beyond the node's own settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodPolicy {
    /// Wiring modes a pod may pick besides the node's own.
    #[serde(default)]
    pub modes: Vec<Wiring>,
    /// The most queues a pod may ask for; without it, the node's own count.
    #[serde(default)]
    pub max_queues: Option<u32>,
    /// uids a pod may make the TAP's owner (TUNSETOWNER).
    #[serde(default)]
    pub tap_owners: Vec<u32>,
    /// gids a pod may make the TAP's group (TUNSETGROUP).
    #[serde(default)]
    pub tap_groups: Vec<u32>,
    /// TAP names a pod may ask for (`tap0` for KubeVirt's tap binding, say).
    #[serde(default)]
    pub tap_names: Vec<String>,
    /// Whether a pod may choose its guest NICs' MACs.
    #[serde(default)]
    pub guest_macs: bool,
    /// Whether a pod may ask that its guests be served their configuration
    /// (DHCP, router advertisements) where the node does not serve them.
    #[serde(default)]
    pub serve: bool,
}

/// The node's own settings: what a pod may always ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeSettings {
    /// The mode the node configured.
    pub mode: Wiring,
    /// The queue count the node configured.
    pub queues: u32,
    /// The TAP owner the node configured.
    pub owner: Option<u32>,
    /// The TAP group the node configured.
    pub group: Option<u32>,
    /// Whether the node serves its guests.
    pub serve: bool,
}

/// The options one pod-controlled place asks for (`None`: it says nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodAsk {
    /// A wiring mode.
    pub mode: Option<Wiring>,
    /// A queue count.
    pub queues: Option<u32>,
    /// A TAP owner uid.
    pub owner: Option<u32>,
    /// A TAP group gid.
    pub group: Option<u32>,
    /// Serving its guests (or not).
    pub serve: Option<bool>,
    /// Choices for single interfaces.
    pub nics: Vec<NicOptions>,
}

/// Which option a pod asked for that the node does not allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// A mode other than the node's and not in `modes`.
    Mode(Wiring),
    /// More queues than the node's and than `maxQueues`.
    Queues(u32),
    /// A TAP owner other than the node's and not in `tapOwners`.
    Owner(u32),
    /// A TAP group other than the node's and not in `tapGroups`.
    Group(u32),
    /// A TAP name not in `tapNames`.
    TapName(String),
    /// A guest MAC, without `guestMacs`.
    GuestMac(MacAddr),
    /// Being served, where the node does not serve and `serve` is off.
    Serve,
}

impl Refused {
    /// What was asked, in words.
    pub fn asked(&self) -> String {
        match self {
            Refused::Mode(m) => format!("wiring mode {}", m.as_str()),
            Refused::Queues(q) => format!("{q} queues"),
            Refused::Owner(uid) => format!("TAP owner uid {uid}"),
            Refused::Group(gid) => format!("TAP group gid {gid}"),
            Refused::TapName(name) => format!("TAP name {name:?}"),
            Refused::GuestMac(mac) => format!("guest MAC {mac}"),
            Refused::Serve => "its guests served (DHCP, router advertisements)".into(),
        }
    }

    /// The policy key that would allow it (`podPolicy.<key>`, `--pod-<flag>`).
    pub fn keys(&self) -> (&'static str, &'static str) {
        match self {
            Refused::Mode(_) => ("modes", "--pod-modes"),
            Refused::Queues(_) => ("maxQueues", "--pod-max-queues"),
            Refused::Owner(_) => ("tapOwners", "--pod-tap-owners"),
            Refused::Group(_) => ("tapGroups", "--pod-tap-groups"),
            Refused::TapName(_) => ("tapNames", "--pod-tap-names"),
            Refused::GuestMac(_) => ("guestMacs", "--pod-guest-macs"),
            Refused::Serve => ("serve", "--pod-serve"),
        }
    }
}

impl PodPolicy {
    /// Whether the node allows everything `ask` asks for; the first refusal if not.
    pub fn admit(&self, node: &NodeSettings, ask: &PodAsk) -> Result<(), Refused> {
        if let Some(mode) = ask.mode {
            if mode != node.mode && !self.modes.contains(&mode) {
                return Err(Refused::Mode(mode));
            }
        }
        if let Some(queues) = ask.queues {
            let most = node.queues.max(self.max_queues.unwrap_or(0));
            if queues > most {
                return Err(Refused::Queues(queues));
            }
        }
        if let Some(uid) = ask.owner {
            if Some(uid) != node.owner && !self.tap_owners.contains(&uid) {
                return Err(Refused::Owner(uid));
            }
        }
        if let Some(gid) = ask.group {
            if Some(gid) != node.group && !self.tap_groups.contains(&gid) {
                return Err(Refused::Group(gid));
            }
        }
        if ask.serve == Some(true) && !node.serve && !self.serve {
            return Err(Refused::Serve);
        }
        ask.nics
            .iter()
            .try_for_each(|nic| self.admit_nic(node, nic))
    }

    /// One interface's own choices: its queues and owner as the
    /// attachment's are, its TAP name and guest MAC only when allowed.
    fn admit_nic(&self, node: &NodeSettings, nic: &NicOptions) -> Result<(), Refused> {
        let ask = PodAsk {
            queues: nic.queues,
            owner: nic.owner.map(|o| o.uid),
            group: nic.owner.and_then(|o| o.gid),
            serve: nic.serve,
            ..PodAsk::default()
        };
        self.admit(node, &ask)?;
        if let Some(name) = &nic.tap_name {
            if !self.tap_names.contains(name) {
                return Err(Refused::TapName(name.clone()));
            }
        }
        match nic.guest_mac {
            Some(mac) if !self.guest_macs => Err(Refused::GuestMac(mac)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: NodeSettings = NodeSettings {
        mode: Wiring::Tc,
        queues: 2,
        owner: Some(107),
        group: None,
        serve: false,
    };

    fn ask(
        mode: Option<Wiring>,
        queues: Option<u32>,
        owner: Option<u32>,
        group: Option<u32>,
    ) -> PodAsk {
        PodAsk {
            mode,
            queues,
            owner,
            group,
            serve: None,
            nics: Vec::new(),
        }
    }

    #[test]
    fn a_nics_choices_are_bounded_too() {
        let nic = |f: fn(&mut NicOptions)| {
            let mut n = NicOptions {
                interface: "eth0".into(),
                ..NicOptions::default()
            };
            f(&mut n);
            PodAsk {
                nics: vec![n],
                ..PodAsk::default()
            }
        };
        let deny = PodPolicy::default();
        let named = nic(|n| n.tap_name = Some("tap0".into()));
        assert_eq!(
            deny.admit(&NODE, &named),
            Err(Refused::TapName("tap0".into()))
        );
        let mac: MacAddr = "02:00:00:00:00:01".parse().unwrap();
        let with_mac = nic(|n| n.guest_mac = Some("02:00:00:00:00:01".parse().unwrap()));
        assert_eq!(deny.admit(&NODE, &with_mac), Err(Refused::GuestMac(mac)));
        let many = nic(|n| n.queues = Some(8));
        assert_eq!(deny.admit(&NODE, &many), Err(Refused::Queues(8)));
        let allow: PodPolicy =
            serde_json::from_str(r#"{"tapNames":["tap0"],"guestMacs":true,"maxQueues":8}"#)
                .unwrap();
        for ok in [named, with_mac, many] {
            assert_eq!(allow.admit(&NODE, &ok), Ok(()));
        }
    }

    #[test]
    fn the_default_allows_only_what_the_node_set() {
        let deny = PodPolicy::default();
        assert_eq!(deny.admit(&NODE, &PodAsk::default()), Ok(()));
        assert_eq!(
            deny.admit(&NODE, &ask(Some(Wiring::Tc), Some(1), Some(107), None)),
            Ok(())
        );
        assert_eq!(deny.admit(&NODE, &ask(None, Some(2), None, None)), Ok(()));
        for (a, refused) in [
            (
                ask(Some(Wiring::Bridge), None, None, None),
                Refused::Mode(Wiring::Bridge),
            ),
            (
                ask(Some(Wiring::Macvtap), None, None, None),
                Refused::Mode(Wiring::Macvtap),
            ),
            (ask(None, Some(3), None, None), Refused::Queues(3)),
            (ask(None, Some(256), None, None), Refused::Queues(256)),
            (ask(None, None, Some(0), None), Refused::Owner(0)),
            (ask(None, None, Some(1000), None), Refused::Owner(1000)),
            (ask(None, None, None, Some(100)), Refused::Group(100)),
        ] {
            assert_eq!(deny.admit(&NODE, &a), Err(refused), "{a:?}");
        }
    }

    #[test]
    fn the_policy_widens_each_option_separately() {
        let p: PodPolicy = serde_json::from_str(
            r#"{"modes":["bridge"],"maxQueues":4,"tapOwners":[1000],"tapGroups":[100]}"#,
        )
        .unwrap();
        let ok = ask(Some(Wiring::Bridge), Some(4), Some(1000), Some(100));
        assert_eq!(p.admit(&NODE, &ok), Ok(()));
        assert_eq!(
            p.admit(&NODE, &ask(Some(Wiring::Macvtap), None, None, None)),
            Err(Refused::Mode(Wiring::Macvtap))
        );
        assert_eq!(
            p.admit(&NODE, &ask(None, Some(5), None, None)),
            Err(Refused::Queues(5))
        );
        assert_eq!(
            p.admit(&NODE, &ask(None, None, Some(1001), None)),
            Err(Refused::Owner(1001))
        );
        assert_eq!(
            p.admit(&NODE, &ask(None, None, None, Some(0))),
            Err(Refused::Group(0))
        );
        // A maxQueues below the node's own count does not take the node's away.
        let low = PodPolicy {
            max_queues: Some(1),
            ..PodPolicy::default()
        };
        assert_eq!(low.admit(&NODE, &ask(None, Some(2), None, None)), Ok(()));
    }

    #[test]
    fn a_misspelt_policy_key_is_an_error() {
        assert!(serde_json::from_str::<PodPolicy>(r#"{"maxQueue":4}"#).is_err());
        assert!(serde_json::from_str::<PodPolicy>(r#"{"modes":["vepa"]}"#).is_err());
        assert_eq!(
            serde_json::from_str::<PodPolicy>("{}").unwrap(),
            PodPolicy::default()
        );
    }

    #[test]
    fn serving_is_refused_unless_the_node_serves_or_the_policy_allows() {
        let wants = PodAsk {
            serve: Some(true),
            ..PodAsk::default()
        };
        assert_eq!(
            PodPolicy::default().admit(&NODE, &wants),
            Err(Refused::Serve)
        );
        let serving = NodeSettings {
            serve: true,
            ..NODE
        };
        assert_eq!(PodPolicy::default().admit(&serving, &wants), Ok(()));
        let allow: PodPolicy = serde_json::from_str(r#"{"serve":true}"#).unwrap();
        assert_eq!(allow.admit(&NODE, &wants), Ok(()));
        let declines = PodAsk {
            serve: Some(false),
            ..PodAsk::default()
        };
        assert_eq!(PodPolicy::default().admit(&NODE, &declines), Ok(()));
    }
}
