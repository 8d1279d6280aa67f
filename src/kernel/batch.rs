//! Many rtnetlink requests in a few system calls.
//!
//! The kernel handles every message of a `sendmsg(2)` buffer in order, inside
//! that call, and answers a message without `NLM_F_ACK` only when it fails.
//! So a batch goes out as buffers of up to [`MESSAGES_PER_SEND`] messages, only the last
//! of each asking for an ack: one `sendmsg` and (when nothing fails) one
//! `recvmsg` per window, where one request at a time through the rtnetlink
//! connection costs a message build, a channel hop, a wake-up and a
//! `recvmsg` each. Order within a batch is the order of the requests, so a
//! request may depend on the ones before it (a TAP goes up after its
//! filters). A failed request does not stop the ones after it; the caller
//! gets one result per request and undoes what it must.
//!
//! The socket is a plain blocking one, made in the netns next to the
//! connection's ([`super::netns::NetNs::open_netlink`]); every reply of a window
//! is queued before its `sendmsg` returns, so a receive never waits on the
//! kernel's work, and at most a window's worth of replies is ever queued.
//!
//! Dumps go over the same socket one at a time ([`Batch::dumps`],
//! [`Batch::dump_raw`], in [`super::dump`]): a send and two receives per
//! datagram (one sizes it), read to the end and asked again when the kernel
//! flags the answer interrupted, and no typed parse where the caller reads
//! a few attributes of many messages. Only the kernel's datagrams count
//! ([`super::nlrecv`]).

use std::borrow::Borrow;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nix::errno::Errno;
use rtnetlink::packet_core::{NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::sys::Socket;

use super::errno;
use super::nlrecv;
use super::wire::{code, frames, push, NLMSG_ERROR};
use crate::error::KernelError;

/// Requests per `sendmsg`: at most this many error replies wait in the
/// socket (an unbounded burst overran the receive queue with ENOBUFS).
pub const MESSAGES_PER_SEND: usize = 64;

/// How long a reply may take: the kernel queues them inside `sendmsg`, so
/// this only bounds a kernel that misbehaves.
pub(super) const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// One request of a batch.
#[derive(Debug, Clone)]
pub struct Request {
    message: RouteNetlinkMessage,
    flags: u16,
}

impl Request {
    /// A request that creates an object and fails if it exists
    /// (`NLM_F_CREATE | NLM_F_EXCL`, as rtnetlink's `add` and `set` builders send).
    pub fn create(message: RouteNetlinkMessage) -> Self {
        Request {
            message,
            flags: NLM_F_CREATE | NLM_F_EXCL,
        }
    }

    /// A request that changes or deletes an existing object (no create flags).
    pub fn change(message: RouteNetlinkMessage) -> Self {
        Request { message, flags: 0 }
    }

    /// A request with these flags (besides `NLM_F_REQUEST | NLM_F_ACK`).
    pub fn with_flags(message: RouteNetlinkMessage, flags: u16) -> Self {
        Request { message, flags }
    }

    /// The message this request sends.
    #[cfg(test)]
    pub fn message(&self) -> &RouteNetlinkMessage {
        &self.message
    }
}

/// A blocking rtnetlink socket for batches, in one netns.
#[derive(Debug)]
pub struct Batch {
    pub(super) socket: Socket,
    /// Index of the next request over this socket's life: sequence numbers
    /// never repeat, so a reply left over from a failed batch is never taken
    /// for another's.
    pub(super) sent: AtomicU32,
    /// Sequence number of a dump whose answer was not read to its end (0:
    /// none): the kernel keeps one dump per socket and answers EBUSY to the
    /// next until that one is read out ([`super::dump`] drains it first).
    pub(super) open_dump: AtomicU32,
    /// The most read of one dump of a table the pod fills
    /// ([`super::dump::TABLE_ANSWER_LIMIT`] unless the caller said another).
    pub(super) table_limit: usize,
}

impl Batch {
    /// Wrap a bound `NETLINK_ROUTE` socket.
    pub fn new(socket: Socket) -> Self {
        Batch {
            socket,
            sent: AtomicU32::new(0),
            open_dump: AtomicU32::new(0),
            table_limit: super::dump::TABLE_ANSWER_LIMIT,
        }
    }

    /// Read at most `bytes` of one dump of a table the pod fills (routes,
    /// rules, neighbours, addresses, next-hop objects).
    pub fn set_table_answer_limit(&mut self, bytes: usize) {
        self.table_limit = bytes;
    }

    /// Send `requests` in order and return one result per request (the
    /// errno of each that failed), or the I/O error that stopped the batch.
    /// Requests after an I/O error were not sent; the error says so.
    pub fn run<R: Borrow<Request>>(
        &self,
        requests: &[R],
    ) -> std::io::Result<Vec<Result<(), Errno>>> {
        let mut results = vec![Ok(()); requests.len()];
        let mut buf = Vec::new();
        let mut reply = Vec::with_capacity(nlrecv::DATAGRAM);
        let count = u32::try_from(requests.len()).unwrap_or(u32::MAX);
        let base = self.sent.fetch_add(count, Ordering::Relaxed);
        for (w, window) in requests.chunks(MESSAGES_PER_SEND).enumerate() {
            let first = base.wrapping_add(u32::try_from(w * MESSAGES_PER_SEND).unwrap_or(u32::MAX));
            encode(window, first, &mut buf);
            self.socket.send(&buf, 0)?;
            let len = u32::try_from(window.len()).unwrap_or(u32::MAX);
            let last = seq_of(first.wrapping_add(len - 1));
            self.replies(last, &mut reply, |seq, errno| {
                let i = seq.wrapping_sub(seq_of(base));
                if let Some(slot) = usize::try_from(i).ok().and_then(|i| results.get_mut(i)) {
                    *slot = Err(errno);
                }
            })?;
        }
        Ok(results)
    }

    /// Send one request and wait for its ack: `Ok`, or the kernel's answer.
    pub fn request(&self, request: Request) -> Result<(), KernelError> {
        match self.run(&[request])?.pop() {
            Some(Err(errno)) => Err(errno.into()),
            _ => Ok(()),
        }
    }

    /// Wait (up to [`REPLY_TIMEOUT`]) for the next datagram from the kernel
    /// and read it into `buf` (its capacity, never zeroed); its length. A
    /// datagram longer than `buf`'s capacity is an error, never a message cut short.
    fn receive(&self, buf: &mut Vec<u8>) -> std::io::Result<usize> {
        let n = nlrecv::receive_spare(&self.socket, buf, REPLY_TIMEOUT)?;
        if n > buf.len() {
            return Err(std::io::Error::other(format!(
                "a netlink reply of {n} bytes did not fit the {} byte buffer",
                buf.capacity()
            )));
        }
        Ok(n)
    }

    /// Read replies until the ack of `last`, calling `failed` for each error.
    fn replies(
        &self,
        last: u32,
        buf: &mut Vec<u8>,
        mut failed: impl FnMut(u32, Errno),
    ) -> std::io::Result<()> {
        loop {
            let n = self.receive(buf)?;
            for (kind, seq, frame) in frames(&buf[..n]) {
                if kind != NLMSG_ERROR {
                    continue;
                }
                if let Err(e) = errno::reply(code(frame)) {
                    failed(seq, e);
                }
                if seq == last {
                    return Ok(());
                }
            }
        }
    }
}

/// Serialise one window into `buf`: request `first + i` gets sequence
/// number `seq_of(first + i)`, and only the window's last asks for an ack.
fn encode<R: Borrow<Request>>(window: &[R], first: u32, buf: &mut Vec<u8>) {
    buf.clear();
    for (i, r) in window.iter().enumerate() {
        let r = r.borrow();
        let mut flags = NLM_F_REQUEST | r.flags;
        if i + 1 == window.len() {
            flags |= NLM_F_ACK;
        }
        let i = u32::try_from(i).unwrap_or(u32::MAX);
        push(buf, r.message.clone(), flags, seq_of(first.wrapping_add(i)));
    }
}

/// Sequence numbers of a batch start here, apart from the kernel's own
/// messages (0) and any other sender's small numbers.
const SEQ_BASE: u32 = 0x4000_0000;

pub(super) fn seq_of(i: u32) -> u32 {
    SEQ_BASE.wrapping_add(i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::wire::NLMSG_DONE;
    use rtnetlink::packet_core::{NetlinkMessage, NetlinkPayload};
    use rtnetlink::packet_route::link::LinkMessage;
    use rtnetlink::packet_route::tc::TcMessage;

    #[test]
    fn a_window_is_the_requests_in_order_and_only_its_last_asks_for_an_ack() {
        let reqs: Vec<Request> = (0..3)
            .map(|_| Request::create(RouteNetlinkMessage::SetLink(LinkMessage::default())))
            .collect();
        let mut buf = Vec::new();
        encode(&reqs, 5, &mut buf);
        let flags: Vec<(u32, u16)> = frames(&buf)
            .map(|(_, seq, frame)| {
                let f = u16::from_ne_bytes([frame[6], frame[7]]);
                (seq.wrapping_sub(SEQ_BASE), f)
            })
            .collect();
        let create = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL;
        assert_eq!(
            flags,
            vec![(5, create), (6, create), (7, create | NLM_F_ACK)]
        );
    }

    /// A control message (`NLMSG_DONE` or `NLMSG_ERROR`) carrying `code`.
    fn control(kind: u16, seq: u32, code: i32) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&20u32.to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&code.to_ne_bytes());
        m
    }

    #[test]
    fn a_datagram_splits_into_whole_messages_with_their_codes() {
        let mut buf = Vec::new();
        push(
            &mut buf,
            RouteNetlinkMessage::NewTrafficFilter(TcMessage::with_index(4)),
            0,
            seq_of(1),
        );
        buf.extend(control(NLMSG_DONE, seq_of(1), 0));
        buf.extend(control(NLMSG_ERROR, seq_of(2), -libc::EBUSY));
        // A message cut short ends the datagram.
        buf.extend(&control(NLMSG_DONE, seq_of(3), 0)[..12]);
        let got: Vec<(u16, u32, i32)> = frames(&buf)
            .map(|(kind, seq, frame)| (kind, seq.wrapping_sub(SEQ_BASE), code(frame)))
            .collect();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].1, 1);
        assert_eq!(got[1], (NLMSG_DONE, 1, 0));
        assert_eq!(got[2], (NLMSG_ERROR, 2, -libc::EBUSY));
        let first = frames(&buf).next().map(|(_, _, f)| f).unwrap_or_default();
        let parsed = NetlinkMessage::<RouteNetlinkMessage>::deserialize(first).unwrap();
        assert!(matches!(
            parsed.payload,
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewTrafficFilter(t)) if t.header.index == 4
        ));
    }
}
