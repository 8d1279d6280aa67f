//! Link requests: list links with their groups, configure a TAP, delete by group.
//!
//! What a link's messages say is read in [`wire::link`]; its [`LinkState`]
//! is re-exported here, beside [`list`], which returns it.

use std::collections::BTreeMap;

use rtnetlink::packet_route::link::{LinkAttribute, LinkExtentMask, LinkMessage};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::LinkUnspec;

use super::batch::{Batch, Request};
use super::errno::kernel_error;
use super::wire;
use crate::error::KernelError;

pub use super::wire::link::LinkState;

/// All links of the netns by ifindex.
///
/// Dumped on the batch socket and read raw ([`wire::link::parse`]): a
/// typed parse of every attribute of every link (devconf arrays, IPv6
/// statistics, link info) took 3 ms for 129 links, ten times the kernel's
/// dump, for the ten attributes podtap reads.
pub fn list(batch: &Batch) -> Result<BTreeMap<u32, LinkState>, KernelError> {
    let mut out = BTreeMap::new();
    batch
        .dump_raw(dump_request(), |frame| {
            if let Some(s) = wire::link::parse(wire::payload(frame)) {
                out.insert(s.ifindex, s);
            }
        })
        .map_err(|e| kernel_error(&e))?
        .map_err(KernelError::from)?;
    Ok(out)
}

/// The request that dumps every link of the netns, without per-link
/// statistics: nothing in podtap reads them, and they are most of a dump.
pub fn dump_request() -> RouteNetlinkMessage {
    let mut msg = LinkMessage::default();
    msg.attributes
        .push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
    RouteNetlinkMessage::GetLink(msg)
}

/// Create the link `msg` describes (`RTM_NEWLINK`); EEXIST when its name is taken.
pub fn add(batch: &Batch, msg: LinkMessage) -> Result<(), KernelError> {
    batch.request(Request::create(RouteNetlinkMessage::NewLink(msg)))
}

/// The index of the link named `name` now, if there is one.
pub fn index_of(batch: &Batch, name: &str) -> Result<Option<u32>, KernelError> {
    Ok(list(batch)?
        .values()
        .find(|l| l.name == name)
        .map(|l| l.ifindex))
}

/// MTU, group and marker for a freshly made TAP, plus its bridge when
/// bridged, and up when `up`.
pub fn configure_tap(
    batch: &Batch,
    ifindex: u32,
    mtu: u32,
    group: u32,
    alias: &str,
    controller: Option<u32>,
    up: bool,
) -> Result<(), KernelError> {
    let msg = tap_settings(ifindex, mtu, group, alias, controller, up);
    batch.request(Request::create(RouteNetlinkMessage::SetLink(msg)))
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
pub fn set_up(batch: &Batch, ifindex: u32) -> Result<(), KernelError> {
    let msg = up_settings(ifindex);
    batch.request(Request::create(RouteNetlinkMessage::SetLink(msg)))
}

/// The request that sets a link's transmit queue length.
pub fn set_txqlen(ifindex: u32, txqlen: u32) -> RouteNetlinkMessage {
    let msg = LinkUnspec::new_with_index(ifindex)
        .txqueuelen(txqlen)
        .build();
    RouteNetlinkMessage::SetLink(msg)
}

/// Move a link into link group `group` (0: the default group).
pub fn set_group(batch: &Batch, ifindex: u32, group: u32) -> Result<(), KernelError> {
    let msg = LinkUnspec::new_with_index(ifindex)
        .link_group(group)
        .build();
    batch.request(Request::create(RouteNetlinkMessage::SetLink(msg)))
}

/// Delete every link in `group` with one request: one RCU grace period for all of them.
pub fn delete_group(batch: &Batch, group: u32) -> Result<(), KernelError> {
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::Group(group));
    batch.request(Request::change(RouteNetlinkMessage::DelLink(msg)))
}

/// Delete one link.
pub fn delete(batch: &Batch, ifindex: u32) -> Result<(), KernelError> {
    let mut msg = LinkMessage::default();
    msg.header.index = ifindex;
    batch.request(Request::change(RouteNetlinkMessage::DelLink(msg)))
}
