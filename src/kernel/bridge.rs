//! Bridge wiring: one bridge per pod interface holding it and its TAP.
//!
//! The guest uses the pod interface's MAC, so while bridged the pod interface
//! takes a generated locally administered MAC; otherwise the bridge sees the
//! guest's frames arrive with its own port's address and drops them.

use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::{Handle, LinkBridge, LinkUnspec};

use super::netlink::ack;
use crate::error::KernelError;

/// Create the bridge, marked and grouped as podtap's, up, with the pod MTU.
pub async fn create(
    handle: &Handle,
    name: &str,
    mtu: u32,
    group: u32,
    alias: &str,
) -> Result<(), KernelError> {
    let msg = LinkBridge::new(name)
        .mtu(mtu)
        .link_group(group)
        .alias(alias)
        .up()
        .build();
    ack(
        handle,
        RouteNetlinkMessage::NewLink(msg),
        rtnetlink::packet_core::NLM_F_CREATE | rtnetlink::packet_core::NLM_F_EXCL,
    )
    .await?;
    // The kernel ignores IFLA_IFALIAS in RTM_NEWLINK: set the marker (which
    // `detach --force` needs for the pod's original MAC) in a second request.
    let alias_msg = LinkUnspec::new_with_name(name).alias(alias).build();
    ack(handle, RouteNetlinkMessage::SetLink(alias_msg), 0).await
}

/// Give the pod interface `mac` and put it in `bridge`.
pub async fn enslave_pod(
    handle: &Handle,
    pod: u32,
    bridge: u32,
    mac: &str,
) -> Result<(), KernelError> {
    let msg = LinkUnspec::new_with_index(pod)
        .address(parse_mac(mac)?)
        .controller(bridge)
        .build();
    ack(handle, RouteNetlinkMessage::SetLink(msg), 0).await
}

/// Take the pod interface out of its bridge and give back its own MAC.
pub async fn release_pod(handle: &Handle, pod: u32, mac: &str) -> Result<(), KernelError> {
    let msg = LinkUnspec::new_with_index(pod)
        .nocontroller()
        .address(parse_mac(mac)?)
        .build();
    ack(handle, RouteNetlinkMessage::SetLink(msg), 0).await
}

pub fn parse_mac(mac: &str) -> Result<Vec<u8>, KernelError> {
    let bytes: Result<Vec<u8>, _> = mac.split(':').map(|b| u8::from_str_radix(b, 16)).collect();
    match bytes {
        Ok(b) if b.len() == 6 => Ok(b),
        _ => Err(KernelError::Netlink(format!("bad MAC address {mac:?}"))),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn macs_parse() {
        assert_eq!(
            super::parse_mac("02:00:0a:ff:10:01").unwrap(),
            vec![2, 0, 10, 255, 16, 1]
        );
        assert!(super::parse_mac("02:00").is_err());
        assert!(super::parse_mac("zz:00:00:00:00:00").is_err());
    }
}
