//! One rtnetlink session into one netns: the rtnetlink crate's connection,
//! the batch sockets beside it and the netns thread, and one request at a
//! time over the connection ([`create`], [`request`]).
//!
//! The socket is made inside the netns on a dedicated thread
//! ([`NetNs::open_netlink`]) and then driven from the caller's tokio runtime: a
//! netlink socket keeps the netns it was created in, whichever thread uses it.

use std::sync::Arc;

use futures::StreamExt;
use rtnetlink::packet_core::{
    NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST,
};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::Handle;

use super::batch::Batch;
use super::errno;
use super::netns::{NetNs, OpeningLink};
use super::netns_worker::NetnsWorker;
use crate::error::{Error, KernelError, Result};

/// A live rtnetlink connection into one netns.
pub struct Netlink {
    /// The rtnetlink handle; its requests go to this netns.
    pub handle: Handle,
    /// A blocking socket in the same netns for request batches.
    pub batch: Batch,
    /// Another, for dumps the netns thread runs beside the caller's
    /// (`scan::dump`): shared with that thread, used by one at a time.
    pub side: Arc<Batch>,
    /// A thread inside the netns, for work that must run there.
    pub worker: NetnsWorker,
    /// Whether IPv6 is enabled in the netns (`conf/all/disable_ipv6` is 0;
    /// false, not probed, after [`Netlink::connect_bare`]).
    pub ipv6_enabled: bool,
    /// The netns cookie (see [`super::netns::NetnsLink::cookie`]).
    pub cookie: Option<u64>,
    netns: String,
}

impl Netlink {
    /// Open a connection inside `ns`. Must be called from within a tokio runtime.
    pub fn connect(ns: &NetNs) -> Result<Self> {
        Self::connect_opening(ns, ns.open_netlink()?)
    }

    /// [`Netlink::connect`] without learning whether IPv6 is on
    /// (`ipv6_enabled` is false): for check and detach ([`NetNs::open_netlink_bare`]).
    pub fn connect_bare(ns: &NetNs) -> Result<Self> {
        Self::connect_opening(ns, ns.open_netlink_bare()?)
    }

    /// [`Netlink::connect`] with sockets whose opening started earlier
    /// ([`NetNs::open_netlink`]).
    pub fn connect_opening(ns: &NetNs, opening: OpeningLink) -> Result<Self> {
        let link = opening.finish(ns)?;
        let (connection, handle, _) = rtnetlink::from_socket(link.socket);
        tokio::spawn(Pipelined {
            connection: Box::pin(connection),
        });
        Ok(Netlink {
            handle,
            batch: Batch::new(link.batch),
            side: Arc::new(Batch::new(link.side)),
            worker: link.worker,
            ipv6_enabled: link.ipv6_enabled,
            cookie: link.cookie,
            netns: ns.display(),
        })
    }

    /// Wrap a kernel failure with this netns and the operation.
    pub fn err(&self, op: &str, on: impl AsRef<str>, e: impl Into<KernelError>) -> Error {
        errno::in_netns(&self.netns, op, on, e)
    }
}

/// Requests podtap keeps in flight at most, per wake-up of the connection.
///
/// netlink-proto 0.14 sends one queued request each time its connection is
/// polled, and then waits to be woken by the reply: requests issued together
/// (`join_all`) would go out one round trip at a time. The kernel handles a
/// request inside `sendmsg(2)` and queues its ack before `sendmsg` returns,
/// so polling the connection up to this many times per wake-up sends that
/// many requests back to back while at most this many acks wait in the
/// socket's receive queue: pipelining with a bounded window (an unbounded
/// burst of 64-NIC attaches overran the queue with ENOBUFS).
pub const POLLS_PER_WAKE: usize = 32;

/// The rtnetlink connection, polled [`POLLS_PER_WAKE`] times per wake-up.
struct Pipelined<C> {
    connection: std::pin::Pin<Box<C>>,
}

impl<C: std::future::Future<Output = ()>> std::future::Future for Pipelined<C> {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        for _ in 0..POLLS_PER_WAKE {
            if self.connection.as_mut().poll(cx).is_ready() {
                return std::task::Poll::Ready(());
            }
        }
        std::task::Poll::Pending
    }
}

/// Send `msg`, a request that creates an object and fails if it exists
/// (`NLM_F_CREATE | NLM_F_EXCL`, as rtnetlink's `add` builders send), and
/// wait for the kernel's ack. For messages podtap also sends in a batch
/// ([`super::batch`]).
pub async fn create(handle: &Handle, msg: RouteNetlinkMessage) -> Result<(), KernelError> {
    request(handle, msg, NLM_F_CREATE | NLM_F_EXCL).await
}

/// Send `msg` with `flags` (besides `NLM_F_REQUEST | NLM_F_ACK`) and wait
/// for the kernel's ack: the first error it answers, or `Ok`.
pub async fn request(
    handle: &Handle,
    msg: RouteNetlinkMessage,
    flags: u16,
) -> Result<(), KernelError> {
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
