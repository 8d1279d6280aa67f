//! Kernel objects recorded exactly as the kernel dumped them, to be put back.
//!
//! Bridge mode takes the pod interface's addresses, routes and permanent
//! neighbours away while it is bridged; detach must put back exactly what
//! was there (flags such as `nodad`, lifetimes, metrics, protocol, table).
//! So the dumped netlink message itself is recorded (hex in the checkpoint)
//! and replayed as a NEW request.

use rtnetlink::packet_core::{
    NetlinkDeserializable, NetlinkHeader, NetlinkSerializable, NLM_F_CREATE, NLM_F_REPLACE,
};
use rtnetlink::packet_route::neighbour::NeighbourAttribute;
use rtnetlink::packet_route::route::{RouteFlags, RouteMessage};
use rtnetlink::packet_route::RouteNetlinkMessage;
use serde::{Deserialize, Serialize};

use super::batch::{Batch, Request};
use crate::error::KernelError;

/// One dumped address, route or neighbour message, as hex of its netlink payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    /// `RTM_NEWADDR` (20), `RTM_NEWROUTE` (24) or `RTM_NEWNEIGH` (28).
    pub message_type: u16,
    /// The payload bytes, hex.
    pub payload: String,
}

impl Recorded {
    /// Record `msg` (a dumped NEWADDR, NEWROUTE or NEWNEIGH).
    pub fn of(msg: &RouteNetlinkMessage) -> Self {
        let mut buf = vec![0u8; msg.buffer_len()];
        msg.serialize(&mut buf);
        Recorded {
            message_type: msg.message_type(),
            payload: buf.iter().map(|b| format!("{b:02x}")).collect(),
        }
    }

    /// The message again; `None` when the record is not one.
    pub fn message(&self) -> Option<RouteNetlinkMessage> {
        let bytes: Option<Vec<u8>> = (0..self.payload.len())
            .step_by(2)
            .map(|i| {
                self.payload
                    .get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
            })
            .collect();
        let mut header = NetlinkHeader::default();
        header.message_type = self.message_type;
        RouteNetlinkMessage::deserialize(&header, &bytes?).ok()
    }
}

/// A dumped route as a request: without the state the kernel reports but
/// refuses in a request (dead, linkdown).
pub fn requestable(mut r: RouteMessage) -> RouteMessage {
    r.header.flags.remove(RouteFlags::Dead);
    r.header.flags.remove(RouteFlags::Linkdown);
    r
}

/// Put a recorded object back (create, or replace one with the same key).
pub fn restore(batch: &Batch, rec: &Recorded) -> Result<(), KernelError> {
    let msg = rec
        .message()
        .ok_or_else(|| KernelError::Netlink("unreadable recorded netlink message".into()))?;
    let msg = match msg {
        RouteNetlinkMessage::NewRoute(r) => RouteNetlinkMessage::NewRoute(requestable(r)),
        RouteNetlinkMessage::NewNeighbour(mut n) => {
            n.attributes.retain(|a| {
                matches!(
                    a,
                    NeighbourAttribute::Destination(_) | NeighbourAttribute::LinkLayerAddress(_)
                )
            });
            RouteNetlinkMessage::NewNeighbour(n)
        }
        other => other,
    };
    batch.request(Request::with_flags(msg, NLM_F_CREATE | NLM_F_REPLACE))
}

#[cfg(test)]
mod tests {
    use rtnetlink::packet_route::address::{AddressAttribute, AddressMessage};

    use super::*;

    #[test]
    fn a_record_round_trips() {
        let mut a = AddressMessage::default();
        a.header.index = 7;
        a.header.prefix_len = 24;
        a.attributes
            .push(AddressAttribute::Local("198.18.0.2".parse().unwrap()));
        let msg = RouteNetlinkMessage::NewAddress(a);
        let rec = Recorded::of(&msg);
        assert_eq!(rec.message_type, 20);
        assert_eq!(rec.message(), Some(msg));
        let bad = Recorded {
            message_type: 20,
            payload: "zz".into(),
        };
        assert_eq!(bad.message(), None);
    }
}
