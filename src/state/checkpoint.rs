//! What one checkpoint file holds.

use serde::{Deserialize, Serialize};

use crate::id::SandboxId;
use crate::kernel::mac::MacAddr;
use crate::kernel::netns_id::NetnsId;
use crate::model::{Description, NetnsRef};
use crate::plan::Plan;

/// Checkpoint format version.
pub const VERSION: u32 = 1;

/// Where attach got to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The plan is recorded; kernel objects may exist partly.
    Applying,
    /// Every object exists; `description` is what attach printed.
    Complete,
}

/// The content of one checkpoint file.
///
/// `D` is the description's type: [`Description`], or
/// [`serde::de::IgnoredAny`] for teardown, which never needs it (read
/// through [`crate::state::StateDir::load_for_teardown`]: checked as JSON,
/// never built; it is nine tenths of a 64-interface checkpoint).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(bound(deserialize = "D: Deserialize<'de>"))]
pub struct Checkpoint<D = Description> {
    /// [`VERSION`].
    pub version: u32,
    /// The sandbox id (also the file's name).
    pub id: SandboxId,
    /// The netns attached to, and its identity.
    pub netns: NetnsRef,
    /// `SO_NETNS_COOKIE` of the netns: tells a reused inode number from the same netns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns_cookie: Option<u64>,
    /// Where attach got to.
    pub phase: Phase,
    /// What attach planned to build (recorded before the first kernel change).
    pub plan: Plan,
    /// ifindexes the kernel gave the TAPs and bridges, by planned name.
    #[serde(default)]
    pub created: Vec<Created>,
    /// The description attach printed, once complete (and as `podtap watch`
    /// revised it since).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<D>,
    /// The pod interfaces attach was limited to (`--interfaces`); `podtap
    /// watch` wires only these when they appear. `None`: every eligible one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<Vec<String>>,
    /// TAPs of NICs `podtap watch` added after attach (the ones it hotplugs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub late: Vec<String>,
    /// TAPs of other attachments in this netns that `podtap watch` hotplugged
    /// for this one's VM (NICs that a later CNI ADD built).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adopted: Vec<String>,
    /// TAPs of NICs `podtap watch` is building right now: recorded before the
    /// first kernel change, cleared once built. Non-empty after a crash, and
    /// then teardown also matches these by planned name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
}

impl<D> Checkpoint<D> {
    /// Whether an open netns (identity and cookie) is the one this checkpoint recorded.
    /// The kernel may give a freed nsfs inode number to a new netns; the cookie never repeats.
    pub fn is_netns(&self, identity: (u64, u64), cookie: Option<u64>) -> bool {
        self.netns_id().matches(&NetnsId::new(identity, cookie))
    }

    /// The netns identity attach recorded (without a cookie in checkpoints
    /// older than the cookie, which still read).
    pub fn netns_id(&self) -> NetnsId {
        NetnsId::new((self.netns.dev, self.netns.inode), self.netns_cookie)
    }
}

/// One object podtap created, keyed by its ifindex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created {
    /// The name it was created with.
    pub name: String,
    /// The ifindex the kernel gave it.
    pub ifindex: u32,
    /// What it is.
    pub kind: CreatedKind,
    /// Its hardware address when it was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
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
            phase: Phase::Complete,
            plan,
            created: vec![],
            description: None,
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
