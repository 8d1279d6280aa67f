//! What `podtap watch` reports: one JSON object per line on stdout.

use serde::Serialize;

use crate::model::{Interface, Wiring};

/// One change `podtap watch` made or saw. Serialised with an `event` tag:
/// `{"event":"added","interface":"eth1",...}`. `revision` is the recorded
/// description's revision after the change (`podtap render FORMAT --id`
/// renders that description).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum Event {
    /// Watching: the netns is followed from here on.
    Ready {
        /// The sandbox id.
        id: String,
        /// The description's revision.
        revision: u64,
        /// The pod interfaces attached now.
        interfaces: Vec<String>,
    },
    /// A pod interface appeared and was attached (and hotplugged, when `device` is set).
    Added {
        /// The pod interface.
        interface: String,
        /// Its ifindex.
        ifindex: u32,
        /// The TAP (or macvtap) built for it.
        tap: String,
        /// How it is wired.
        wiring: Wiring,
        /// The VMM device id it was hotplugged as; absent without a VMM socket.
        #[serde(skip_serializing_if = "Option::is_none")]
        device: Option<String>,
        /// The description's revision.
        revision: u64,
        /// Its entry in the description (guest MAC, addresses, TAP).
        nic: Box<Interface>,
    },
    /// A pod interface disappeared; its NIC was unplugged and its objects undone.
    Removed {
        /// The pod interface (its last name).
        interface: String,
        /// Its ifindex.
        ifindex: u32,
        /// The TAP that was removed.
        tap: String,
        /// The VMM device that was unplugged, if any.
        #[serde(skip_serializing_if = "Option::is_none")]
        device: Option<String>,
        /// The description's revision.
        revision: u64,
    },
    /// The description changed otherwise (state, addresses, routes).
    Changed {
        /// Interfaces whose entries changed (empty: routes, neighbours or rules).
        interfaces: Vec<String>,
        /// The description's revision.
        revision: u64,
    },
    /// Routed wiring the kernel undid (a pod interface went down and up, a
    /// TAP lost its routes) was built again.
    Repaired {
        /// The pod interface.
        interface: String,
        /// What was wrong, one line each.
        problems: Vec<String>,
    },
    /// A NIC of another attachment in this netns (a later CNI ADD, such as
    /// a Multus network) was hotplugged; or, on resume, one the VMM was missing.
    Plugged {
        /// The attachment it belongs to.
        id: String,
        /// Its pod interface.
        interface: String,
        /// The VMM device id.
        device: String,
    },
    /// A podtap device nothing wants any more was unplugged (its attachment
    /// was detached, or it was left by an earlier watch).
    Unplugged {
        /// The VMM device id.
        device: String,
    },
    /// A pod interface that appeared could not be attached (reported once).
    Refused {
        /// The pod interface.
        interface: String,
        /// Its ifindex.
        ifindex: u32,
        /// Why.
        error: String,
    },
    /// Something failed; watch goes on (a VMM call, one reconcile round).
    Error {
        /// The pod interface it concerns, if one.
        #[serde(skip_serializing_if = "Option::is_none")]
        interface: Option<String>,
        /// What failed.
        error: String,
    },
    /// The attachment was detached (or replaced); watch returns `Ok`.
    Detached {
        /// The sandbox id.
        id: String,
    },
    /// The caller's [`super::Stop`] fired (the CLI's: SIGTERM or SIGINT):
    /// watch returns `Ok`, leaving the attachment as it is.
    Stopped {
        /// The sandbox id.
        id: String,
        /// Why: the signal's name (`SIGTERM`), or `stopped` for a [`super::Stopper`].
        signal: String,
    },
    /// The pod netns is gone (nothing but watch held it: the pod was
    /// deleted): watch returns [`crate::error::Error::PodDeleted`], leaving the checkpoint for teardown.
    #[serde(rename = "netns_gone")]
    NetnsGone {
        /// The sandbox id.
        id: String,
        /// The netns path attach recorded.
        netns: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_tagged_flat_objects() {
        let e = Event::Removed {
            interface: "eth1".into(),
            ifindex: 7,
            tap: "tap_eth1".into(),
            device: None,
            revision: 3,
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"event":"removed","interface":"eth1","ifindex":7,"tap":"tap_eth1","revision":3}"#
        );
    }
}
