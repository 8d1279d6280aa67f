//! Bridge requests: create a marked bridge, put a port in it, take it out.

use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::{LinkBridge, LinkUnspec};

use super::batch::{Batch, Request};
use super::mac::MacAddr;
use crate::error::KernelError;

/// Create the bridge, marked and grouped as podtap's, with the pod MTU, down
/// (so its IPv6 switch can be turned off before it could speak) and with ARP
/// off: the bridge device receives every broadcast on the pod's wire, and with
/// ARP on the pod netns would answer for the pod's (the guest's) IPv4 address
/// with the bridge's MAC before the guest could. Fails with EEXIST when a link
/// of that name exists.
pub fn create(
    batch: &Batch,
    name: &str,
    mtu: u32,
    group: u32,
    alias: &str,
) -> Result<(), KernelError> {
    let msg = LinkBridge::new(name)
        .mtu(mtu)
        .link_group(group)
        .alias(alias)
        .arp(false)
        .build();
    super::links::add(batch, msg)?;
    // The kernel ignores IFLA_IFALIAS in RTM_NEWLINK: set the marker (which
    // `detach --force` needs for the pod's original MAC) in a second request.
    let alias_msg = LinkUnspec::new_with_name(name).alias(alias).build();
    batch.request(Request::create(RouteNetlinkMessage::SetLink(alias_msg)))
}

/// Give the pod interface `mac` and put it in `bridge`.
pub fn enslave(batch: &Batch, pod: u32, bridge: u32, mac: MacAddr) -> Result<(), KernelError> {
    let msg = LinkUnspec::new_with_index(pod)
        .address(mac.to_vec())
        .controller(bridge)
        .build();
    batch.request(Request::create(RouteNetlinkMessage::SetLink(msg)))
}

/// Take the pod interface out of its bridge and give back its own MAC.
pub fn release(batch: &Batch, pod: u32, mac: MacAddr) -> Result<(), KernelError> {
    let msg = LinkUnspec::new_with_index(pod)
        .nocontroller()
        .address(mac.to_vec())
        .build();
    batch.request(Request::create(RouteNetlinkMessage::SetLink(msg)))
}
