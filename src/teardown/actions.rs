//! What teardown sees and what it does: the kernel's state as teardown and
//! check observe it ([`Observed`]) and one undo step ([`Action`]). A leaf of
//! `teardown`: the decisions (`decide`, `restore`) and the executor read it.

use std::collections::BTreeMap;
use std::fmt;

use crate::kernel::links::LinkState;
use crate::kernel::mac::MacAddr;
use crate::kernel::replay::Recorded;
use crate::kernel::tc::FilterInfo;

/// What the kernel holds now, as far as teardown and check look.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Every link of the netns, by ifindex.
    pub(crate) links: BTreeMap<u32, LinkState>,
    /// The ingress filters of the links whose filters were read.
    pub(crate) filters: BTreeMap<u32, Vec<FilterInfo>>,
    /// Permanent neighbours `(ifindex, ip, lladdr)`, when they were read.
    pub(crate) neighbours: Vec<(u32, String, String)>,
}

impl Observed {
    /// The filters read on `ifindex` (none when they were not read).
    pub fn filters_of(&self, ifindex: u32) -> &[FilterInfo] {
        self.filters.get(&ifindex).map_or(&[], Vec::as_slice)
    }
}

/// One kernel change teardown makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Delete the filters at `prio` on the ingress hook of `ifindex`.
    DeleteFilter {
        /// The link.
        ifindex: u32,
        /// Its name now (for messages).
        name: String,
        /// podtap's priority.
        prio: u16,
    },
    /// Delete the ingress qdisc podtap added.
    DeleteIngressQdisc {
        /// The link.
        ifindex: u32,
        /// Its name now.
        name: String,
    },
    /// Put back the transmit queue length the link had before attach.
    SetTxqlen {
        /// The link.
        ifindex: u32,
        /// Its name now.
        name: String,
        /// The recorded value.
        txqlen: u32,
    },
    /// Take a pod interface out of podtap's bridge and give back its MAC.
    ReleaseFromBridge {
        /// The pod interface.
        ifindex: u32,
        /// Its name now.
        name: String,
        /// Its original MAC.
        mac: MacAddr,
    },
    /// Put back a neighbour entry exactly as recorded. A
    /// failure is a warning: the pod's own state is restored as far as the
    /// netns still allows, and teardown never blocks pod deletion on it.
    Restore {
        /// The pod interface now.
        name: String,
        /// What it is ("neighbour").
        what: &'static str,
        /// The recorded message.
        record: Recorded,
    },
    /// Move a bridge out of the link group (group 0), so that the group
    /// deletion of the TAPs does not take it too: every bridge deletion costs
    /// an `rcu_barrier()` under RTNL, and bridges are deleted one request each.
    LeaveGroup {
        /// The bridge.
        ifindex: u32,
        /// Its name now.
        name: String,
    },
    /// Delete every link of a group with one request (one RCU grace period).
    DeleteGroup {
        /// The link group.
        group: u32,
        /// The ifindexes of its members that are left when it runs.
        members: Vec<u32>,
    },
    /// Delete one link.
    DeleteLink {
        /// The link.
        ifindex: u32,
        /// Its name now.
        name: String,
        /// Its kind ("tun", "bridge", "macvtap").
        kind: String,
    },
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::DeleteFilter { name, prio, .. } => {
                write!(f, "podtap filter prio {prio} on {name}")
            }
            Action::DeleteIngressQdisc { name, .. } => write!(f, "ingress qdisc on {name}"),
            Action::SetTxqlen { name, txqlen, .. } => write!(f, "txqueuelen {txqlen} on {name}"),
            Action::ReleaseFromBridge { name, mac, .. } => {
                write!(f, "{name} from its bridge (MAC {mac})")
            }
            Action::Restore { name, what, .. } => write!(f, "a recorded {what} of {name}"),
            Action::LeaveGroup { name, .. } => write!(f, "bridge {name} out of its link group"),
            Action::DeleteGroup { group, .. } => write!(f, "link group {group}"),
            Action::DeleteLink { name, kind, .. } => write!(f, "{kind} {name}"),
        }
    }
}
