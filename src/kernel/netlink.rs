//! Sending rtnetlink requests: ack, dump, and which errors mean "already gone".

use futures::StreamExt;
use rtnetlink::packet_core::{NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_REQUEST};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::Handle;

use crate::error::KernelError;

/// Send `msg` with `flags` and wait for the kernel's ack.
pub async fn ack(handle: &Handle, msg: RouteNetlinkMessage, flags: u16) -> Result<(), KernelError> {
    let mut req = NetlinkMessage::from(msg);
    req.header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    let mut responses = handle.clone().request(req).map_err(KernelError::from)?;
    while let Some(reply) = responses.next().await {
        if let NetlinkPayload::Error(e) = reply.payload {
            return Err(rtnetlink::Error::NetlinkError(e).into());
        }
    }
    Ok(())
}

/// Send a dump request and collect the messages.
pub async fn dump(
    handle: &Handle,
    msg: RouteNetlinkMessage,
) -> Result<Vec<RouteNetlinkMessage>, KernelError> {
    let mut req = NetlinkMessage::from(msg);
    req.header.flags = NLM_F_REQUEST | rtnetlink::packet_core::NLM_F_DUMP;
    let mut responses = handle.clone().request(req).map_err(KernelError::from)?;
    let mut out = Vec::new();
    while let Some(reply) = responses.next().await {
        match reply.payload {
            NetlinkPayload::InnerMessage(m) => out.push(m),
            NetlinkPayload::Error(e) => return Err(rtnetlink::Error::NetlinkError(e).into()),
            _ => {}
        }
    }
    Ok(out)
}

/// Errors that mean "already gone": teardown treats them as success.
pub fn is_gone(e: &KernelError) -> bool {
    use nix::errno::Errno;
    matches!(
        e.errno(),
        Some(Errno::ENOENT | Errno::ENODEV | Errno::EINVAL | Errno::ESRCH)
    )
}
