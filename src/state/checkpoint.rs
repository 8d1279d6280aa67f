//! What one checkpoint file holds.

use serde::{Deserialize, Serialize};

use crate::id::SandboxId;
use crate::kernel::mac::MacAddr;
use crate::kernel::netns_id::NetnsId;
use crate::model::{Description, NetnsRef};
use crate::plan::Plan;

/// Checkpoint format version: 3 since a tc redirect could be a cls_bpf
/// filter (`plan.tc_redirect`), which a podtap that writes version 2 does
/// not recognise as its own: it must refuse these files rather than leave
/// such a filter behind at teardown. podtap makes u32 + mirred only now,
/// and still reads, checks and tears down the cls_bpf redirects an
/// earlier release recorded.
pub const VERSION: u32 = 3;

/// Version 2: the description recorded without its routes and rules (see
/// [`Checkpoint`]); tc redirects were u32 + mirred. Read as version 3.
pub const VERSION_2: u32 = 2;

/// The format before it: the description with every route, neighbour and
/// rule (still read, and torn down, as a node upgrade finds them).
pub const VERSION_1: u32 = 1;

/// Where attach got to: the `phase` a checkpoint file records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The plan is recorded; kernel objects may exist partly.
    Applying,
    /// Every object exists; `description` is what attach printed.
    Complete,
}

/// Where attach got to, with what that stage holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stage<D> {
    /// The intent: the plan is recorded; kernel objects may exist partly
    /// (written as phase "applying", without a description).
    Intent,
    /// Every object exists; the description attach printed (and as `podtap
    /// watch` revised it since), without its routes and rules
    /// (`tables_digest` stands for the tables; the neighbours stay). Written as phase "complete". podtap always
    /// writes the description with this phase; a file without one still
    /// reads (as it always did), and then commands that need the description
    /// treat the attach as unfinished.
    Complete(Option<D>),
}

/// The content of one checkpoint file.
///
/// `D` is the description's type: [`Description`], or
/// [`serde::de::IgnoredAny`] for teardown, which never needs it (read
/// through [`crate::state::StateDir::load_for_teardown`]: checked as JSON,
/// never built; it is nine tenths of a 64-interface checkpoint).
///
/// On disk it is one JSON object (see `json.rs`): `phase` says whether it
/// is an intent or complete, and only a complete one has a `description`.
#[derive(Debug, Clone)]
pub struct Checkpoint<D = Description> {
    /// [`VERSION`].
    pub(crate) version: u32,
    /// The sandbox id (also the file's name).
    pub(crate) id: SandboxId,
    /// The netns attached to, and its identity.
    pub(crate) netns: NetnsRef,
    /// `SO_NETNS_COOKIE` of the netns: tells a reused inode number from the same netns.
    pub(crate) netns_cookie: Option<u64>,
    /// Intent or complete, with the description once complete.
    pub(crate) stage: Stage<D>,
    /// [`crate::model::Tables::digest`] of the description's tables, whose
    /// routes and rules the checkpoint leaves out: `podtap watch` counts a revision when they
    /// change. `None` in a version-1 file (which held the tables).
    pub(crate) tables_digest: Option<u64>,
    /// What attach planned to build (recorded before the first kernel change).
    pub(crate) plan: Plan,
    /// ifindexes the kernel gave the TAPs and bridges, by planned name.
    pub(crate) created: Vec<Created>,
    /// The pod interfaces attach was limited to (`--interfaces`); `podtap
    /// watch` wires only these when they appear. `None`: every eligible one.
    pub(crate) only: Option<Vec<String>>,
    /// TAPs of NICs `podtap watch` added after attach (the ones it hotplugs).
    pub(crate) late: Vec<String>,
    /// TAPs of other attachments in this netns that `podtap watch` hotplugged
    /// for this one's VM (NICs that a later CNI ADD built).
    pub(crate) adopted: Vec<String>,
    /// TAPs of NICs `podtap watch` is building right now: recorded before the
    /// first kernel change, cleared once built. Non-empty after a crash, and
    /// then teardown also matches these by planned name.
    pub(crate) pending: Vec<String>,
}

impl<D> Checkpoint<D> {
    /// Whether an open netns (identity and cookie) is the one this checkpoint recorded.
    /// The kernel may give a freed nsfs inode number to a new netns; the cookie never repeats.
    pub fn is_netns(&self, identity: (u64, u64), cookie: Option<u64>) -> bool {
        self.netns_id().matches(&NetnsId::new(identity, cookie))
    }

    /// The netns identity attach recorded (without a cookie in checkpoints
    /// older than the cookie, which still read).
    pub(crate) fn netns_id(&self) -> NetnsId {
        NetnsId::new((self.netns.dev, self.netns.inode), self.netns_cookie)
    }

    /// The sandbox id.
    pub fn id(&self) -> &SandboxId {
        &self.id
    }

    /// The netns attached to (path, device and inode).
    pub fn netns(&self) -> &NetnsRef {
        &self.netns
    }

    /// The wiring mode attach was asked for.
    pub fn mode(&self) -> crate::model::Wiring {
        self.plan.mode
    }

    /// The TAPs (or macvtaps) attach planned, with their queue counts, in order.
    pub fn taps(&self) -> impl Iterator<Item = (&str, u32)> {
        self.plan
            .nics
            .iter()
            .map(|n| (n.tap.name.as_str(), n.tap.queues))
    }

    /// Where attach got to.
    pub fn phase(&self) -> Phase {
        match self.stage {
            Stage::Intent => Phase::Applying,
            Stage::Complete(_) => Phase::Complete,
        }
    }

    /// The description attach printed (as `podtap watch` revised it), once complete.
    pub fn description(&self) -> Option<&D> {
        match &self.stage {
            Stage::Intent => None,
            Stage::Complete(d) => d.as_ref(),
        }
    }

    /// [`Self::description`], by value.
    pub fn into_description(self) -> Option<D> {
        match self.stage {
            Stage::Intent => None,
            Stage::Complete(d) => d,
        }
    }
}

/// One object podtap created, keyed by its ifindex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created {
    /// The name it was created with.
    pub(crate) name: String,
    /// The ifindex the kernel gave it.
    pub(crate) ifindex: u32,
    /// What it is.
    pub(crate) kind: CreatedKind,
    /// Its hardware address when it was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mac: Option<MacAddr>,
}

/// What kind of link podtap created (written as "tap", "bridge" or "macvtap").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CreatedKind {
    /// A TAP (a tun link in TAP mode).
    Tap,
    /// A Linux bridge.
    Bridge,
    /// A passthru macvtap.
    Macvtap,
}

impl CreatedKind {
    /// The name the checkpoint records.
    pub fn as_str(self) -> &'static str {
        match self {
            CreatedKind::Tap => "tap",
            CreatedKind::Bridge => "bridge",
            CreatedKind::Macvtap => "macvtap",
        }
    }
}

impl std::fmt::Display for CreatedKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The ifindex recorded for the link podtap created under `name`, if any.
pub fn created_ifindex(created: &[Created], name: &str) -> Option<u32> {
    created.iter().find(|c| c.name == name).map(|c| c.ifindex)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A finished checkpoint of `id` with no NICs.
    pub(crate) fn sample(id: &str) -> Checkpoint {
        let id = SandboxId::new(id).unwrap();
        let plan = Plan {
            id: id.clone(),
            mode: crate::model::Wiring::Tc,
            group: 1,
            nics: vec![],
            taps: None,
            tc_redirect: None,
            l3: None,
        };
        Checkpoint {
            version: VERSION,
            id,
            netns: NetnsRef {
                path: "/run/netns/p".into(),
                inode: 10,
                dev: 4,
            },
            netns_cookie: Some(77),
            stage: Stage::Complete(None),
            tables_digest: None,
            plan,
            created: vec![],
            only: None,
            late: vec![],
            adopted: vec![],
            pending: vec![],
        }
    }

    #[test]
    fn netns_identity_needs_inode_and_cookie() {
        let cp = sample("s");
        assert!(cp.is_netns((4, 10), Some(77)));
        assert!(
            !cp.is_netns((4, 10), Some(78)),
            "a reused inode is another netns"
        );
        assert!(!cp.is_netns((4, 11), Some(77)));
        assert!(
            cp.is_netns((4, 10), None),
            "kernels without cookies fall back to the inode"
        );
    }
}
