//! One rtnetlink session into one netns: the blocking sockets every request
//! and dump goes over ([`super::batch`], one place that reads acks and
//! errors) and the netns thread.
//!
//! The sockets are made inside the netns on a dedicated thread
//! ([`NetNs::open_netlink`]) and then used from the caller's thread: a
//! netlink socket keeps the netns it was created in, whichever thread uses it.

use super::batch::Batch;
use super::errno;
use super::netns::{NetNs, OpeningLink};
use super::netns_worker::NetnsWorker;
use crate::error::{Error, KernelError, Result};

/// A live rtnetlink session in one netns.
pub struct Netlink {
    /// The blocking socket every request and dump goes over.
    pub batch: Batch,
    /// A thread inside the netns, for work that must run there (opening
    /// `/dev/net/tun` fds, sysctls); never for dumps.
    pub worker: NetnsWorker,
    /// Whether IPv6 is enabled in the netns (`conf/all/disable_ipv6` is 0;
    /// false, not probed, after [`Netlink::connect_bare`]).
    pub ipv6_enabled: bool,
    /// The netns cookie (see [`super::netns::NetnsLink::cookie`]).
    pub cookie: Option<u64>,
    netns: String,
}

impl Netlink {
    /// Open a session inside `ns`.
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
        Ok(Netlink {
            batch: Batch::new(link.batch),
            worker: link.worker,
            ipv6_enabled: link.ipv6_enabled,
            cookie: link.cookie,
            netns: ns.display(),
        })
    }

    /// Read at most `bytes` of one dump of a table the pod fills.
    pub fn set_table_answer_limit(&mut self, bytes: usize) {
        self.batch.set_table_answer_limit(bytes);
    }

    /// Wrap a kernel failure with this netns and the operation.
    pub fn err(&self, op: &'static str, on: impl AsRef<str>, e: impl Into<KernelError>) -> Error {
        errno::in_netns(&self.netns, op, on, e)
    }

    /// A socket on the netns's nf_tables, made inside it by the netns thread.
    pub fn nft(&self) -> Result<super::nft::Nft> {
        self.worker.run(super::nft::Nft::open)
    }

    /// The nf_tables failure `e` of `op` in this netns.
    pub fn nft_err(&self, op: &'static str, on: impl AsRef<str>, e: super::nft::Error) -> Error {
        match e.errno() {
            Some(errno) => self.err(op, on, errno),
            None => self.err(op, on, KernelError::Netlink(e.to_string())),
        }
    }
}
