//! Link-level requests: configure a TAP, list links with their groups, delete by group.

use std::collections::BTreeMap;

use rtnetlink::packet_route::link::{InfoKind, LinkAttribute, LinkInfo, LinkMessage};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::{Handle, LinkUnspec};

use super::netlink::{ack, dump};
use crate::error::KernelError;

/// What teardown and check need to know about a live link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkState {
    pub ifindex: u32,
    pub name: String,
    pub kind: Option<String>,
    pub group: u32,
    pub controller: Option<u32>,
    pub mac: Option<String>,
    pub mtu: u32,
    pub up: bool,
    pub txqlen: Option<u32>,
    pub alias: Option<String>,
}

/// The ifalias podtap puts on its own TAPs and bridges.
pub fn marker(id: &str) -> String {
    format!("podtap:{id}")
}

/// All links of the netns by ifindex.
pub async fn list(handle: &Handle) -> Result<BTreeMap<u32, LinkState>, KernelError> {
    let msgs = dump(handle, RouteNetlinkMessage::GetLink(LinkMessage::default())).await?;
    Ok(msgs
        .into_iter()
        .filter_map(|m| match m {
            RouteNetlinkMessage::NewLink(l) => Some(link_state(&l)),
            _ => None,
        })
        .map(|s| (s.ifindex, s))
        .collect())
}

pub fn link_state(msg: &LinkMessage) -> LinkState {
    let mut s = LinkState {
        ifindex: msg.header.index,
        name: String::new(),
        kind: None,
        group: 0,
        controller: None,
        mac: None,
        mtu: 0,
        up: msg
            .header
            .flags
            .contains(rtnetlink::packet_route::link::LinkFlags::Up),
        txqlen: None,
        alias: None,
    };
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::IfName(n) => s.name = n.clone(),
            LinkAttribute::Group(g) => s.group = *g,
            LinkAttribute::Controller(c) => s.controller = Some(*c),
            LinkAttribute::Mtu(m) => s.mtu = *m,
            LinkAttribute::TxQueueLen(q) => s.txqlen = Some(*q),
            LinkAttribute::IfAlias(a) => s.alias = Some(a.clone()),
            LinkAttribute::Address(a) if a.len() == 6 => {
                s.mac = Some(crate::scan::parse::format_mac(a))
            }
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

/// MTU, group, marker and up for a freshly made TAP, plus its bridge when bridged.
pub async fn configure_tap(
    handle: &Handle,
    ifindex: u32,
    mtu: u32,
    group: u32,
    alias: &str,
    controller: Option<u32>,
) -> Result<(), KernelError> {
    let mut b = LinkUnspec::new_with_index(ifindex)
        .mtu(mtu)
        .link_group(group)
        .alias(alias)
        .up();
    if let Some(c) = controller {
        b = b.controller(c);
    }
    ack(handle, RouteNetlinkMessage::SetLink(b.build()), 0).await
}

/// Put back a link's transmit queue length.
pub async fn set_txqlen(handle: &Handle, ifindex: u32, txqlen: u32) -> Result<(), KernelError> {
    let msg = LinkUnspec::new_with_index(ifindex)
        .txqueuelen(txqlen)
        .build();
    ack(handle, RouteNetlinkMessage::SetLink(msg), 0).await
}

/// Delete every link in `group` with one request: one RCU grace period for all of them.
pub async fn delete_group(handle: &Handle, group: u32) -> Result<(), KernelError> {
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::Group(group));
    ack(handle, RouteNetlinkMessage::DelLink(msg), 0).await
}

pub async fn delete(handle: &Handle, ifindex: u32) -> Result<(), KernelError> {
    ack(
        handle,
        RouteNetlinkMessage::DelLink(LinkUnspec::new_with_index(ifindex).build()),
        0,
    )
    .await
}

/// Whether a kind string is one podtap creates.
pub fn is_tap_or_bridge(kind: Option<&str>) -> bool {
    matches!(kind, Some(k) if k == InfoKind::Tun.to_string() || k == InfoKind::Bridge.to_string())
}
