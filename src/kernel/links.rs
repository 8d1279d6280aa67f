//! Link requests: list links with their groups, configure a TAP, delete by group.

use std::collections::BTreeMap;

use futures::TryStreamExt;
use rtnetlink::packet_route::link::{
    InfoKind, LinkAttribute, LinkExtentMask, LinkFlags, LinkInfo, LinkMessage,
};
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::{Handle, LinkUnspec};

use super::mac::MacAddr;
use crate::error::KernelError;

/// What teardown and check need to know about a live link.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkState {
    /// The kernel's interface index.
    pub ifindex: u32,
    /// The interface name now.
    pub name: String,
    /// The `IFLA_INFO_KIND` string ("tun", "bridge", "veth", ...); `None` for physical links.
    pub kind: Option<String>,
    /// `IFLA_GROUP`.
    pub group: u32,
    /// The bridge (or other controller) the link is a port of.
    pub controller: Option<u32>,
    /// `IFLA_LINK` in this netns: the lower of a macvtap/macvlan/vlan (a
    /// veth's peer too, when it is in the same netns).
    pub lower: Option<u32>,
    /// The hardware address, when it is an Ethernet one.
    pub mac: Option<MacAddr>,
    /// MTU in bytes.
    pub mtu: u32,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// Transmit queue length.
    pub txqlen: Option<u32>,
    /// `IFLA_IFALIAS`.
    pub alias: Option<String>,
}

impl LinkState {
    /// Whether the link is a TAP (kind "tun"), a bridge or a macvtap: the kinds podtap creates.
    pub fn is_podtap_kind(&self) -> bool {
        self.is_kind(InfoKind::Tun)
            || self.is_kind(InfoKind::Bridge)
            || self.is_kind(InfoKind::MacVtap)
    }

    /// Whether the link's kind is `kind`.
    pub fn is_kind(&self, kind: InfoKind) -> bool {
        self.kind.as_deref() == Some(kind.to_string().as_str())
    }
}

/// All links of the netns by ifindex.
pub async fn list(handle: &Handle) -> Result<BTreeMap<u32, LinkState>, KernelError> {
    // No per-link statistics: nothing here reads them.
    let msgs: Vec<LinkMessage> = handle
        .link()
        .get()
        .set_filter_mask(AddressFamily::Unspec, vec![LinkExtentMask::SkipStats])
        .execute()
        .try_collect()
        .await?;
    Ok(msgs
        .iter()
        .map(link_state)
        .map(|s| (s.ifindex, s))
        .collect())
}

/// The parts of a link message podtap reads.
pub fn link_state(msg: &LinkMessage) -> LinkState {
    let mut s = LinkState {
        ifindex: msg.header.index,
        up: msg.header.flags.contains(LinkFlags::Up),
        ..LinkState::default()
    };
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::IfName(n) => s.name = n.clone(),
            LinkAttribute::Group(g) => s.group = *g,
            LinkAttribute::Controller(c) => s.controller = Some(*c),
            LinkAttribute::Link(l) => s.lower = Some(*l),
            LinkAttribute::Mtu(m) => s.mtu = *m,
            LinkAttribute::TxQueueLen(q) => s.txqlen = Some(*q),
            LinkAttribute::IfAlias(a) => s.alias = Some(a.clone()),
            LinkAttribute::Address(a) => s.mac = MacAddr::from_bytes(a),
            LinkAttribute::LinkInfo(infos) => {
                s.kind = infos.iter().find_map(|i| match i {
                    LinkInfo::Kind(k) => Some(k.to_string()),
                    _ => None,
                })
            }
            _ => {}
        }
    }
    s
}

/// MTU, group and marker for a freshly made TAP, plus its bridge when
/// bridged, and up when `up`.
pub async fn configure_tap(
    handle: &Handle,
    ifindex: u32,
    mtu: u32,
    group: u32,
    alias: &str,
    controller: Option<u32>,
    up: bool,
) -> Result<(), KernelError> {
    let msg = tap_settings(ifindex, mtu, group, alias, controller, up);
    Ok(handle.link().set(msg).execute().await?)
}

/// The message [`configure_tap`] sends (an `RTM_SETLINK`).
pub fn tap_settings(
    ifindex: u32,
    mtu: u32,
    group: u32,
    alias: &str,
    controller: Option<u32>,
    up: bool,
) -> LinkMessage {
    let mut b = LinkUnspec::new_with_index(ifindex)
        .mtu(mtu)
        .link_group(group)
        .alias(alias);
    if up {
        b = b.up();
    }
    if let Some(c) = controller {
        b = b.controller(c);
    }
    b.build()
}

/// The message [`set_up`] sends (an `RTM_SETLINK`).
pub fn up_settings(ifindex: u32) -> LinkMessage {
    LinkUnspec::new_with_index(ifindex).up().build()
}

/// Bring a link up.
pub async fn set_up(handle: &Handle, ifindex: u32) -> Result<(), KernelError> {
    let msg = up_settings(ifindex);
    Ok(handle.link().set(msg).execute().await?)
}

/// Put back a link's transmit queue length.
pub async fn set_txqlen(handle: &Handle, ifindex: u32, txqlen: u32) -> Result<(), KernelError> {
    let msg = LinkUnspec::new_with_index(ifindex)
        .txqueuelen(txqlen)
        .build();
    Ok(handle.link().set(msg).execute().await?)
}

/// Move a link into link group `group` (0: the default group).
pub async fn set_group(handle: &Handle, ifindex: u32, group: u32) -> Result<(), KernelError> {
    let msg = LinkUnspec::new_with_index(ifindex)
        .link_group(group)
        .build();
    Ok(handle.link().set(msg).execute().await?)
}

/// Delete every link in `group` with one request: one RCU grace period for all of them.
pub async fn delete_group(handle: &Handle, group: u32) -> Result<(), KernelError> {
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::Group(group));
    Ok(handle.link().del_with_message(msg).execute().await?)
}

/// Delete one link.
pub async fn delete(handle: &Handle, ifindex: u32) -> Result<(), KernelError> {
    Ok(handle.link().del(ifindex).execute().await?)
}
