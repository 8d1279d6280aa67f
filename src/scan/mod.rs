//! Read a pod netns into a [`Description`]: one netlink dump per object type.

pub mod parse;
#[cfg(test)]
mod parse_tests;

use futures::TryStreamExt;
use rtnetlink::packet_route::route::RouteMessage;
use rtnetlink::Handle;

use crate::error::{Error, Result};
use crate::kernel::netns::NetNs;
use crate::model::{Description, NetnsRef, SCHEMA};
use parse::Dump;

/// A live rtnetlink connection into one netns.
pub struct Netlink {
    pub handle: Handle,
    pub ipv6_enabled: bool,
    /// The netns cookie (see [`crate::kernel::netns::NetnsLink::cookie`]).
    pub cookie: Option<u64>,
    netns: String,
}

impl Netlink {
    /// Open a connection inside `ns`. Must be called from within a tokio runtime.
    pub fn connect(ns: &NetNs) -> Result<Self> {
        let link = ns.netlink()?;
        let (connection, handle, _) = rtnetlink::from_socket(link.socket);
        tokio::spawn(connection);
        Ok(Netlink {
            handle,
            ipv6_enabled: link.ipv6_enabled,
            cookie: link.cookie,
            netns: ns.display(),
        })
    }

    /// The netns path, for error context.
    pub fn netns(&self) -> &str {
        &self.netns
    }

    /// Wrap a kernel failure with this netns and the operation.
    pub fn err(
        &self,
        op: &str,
        on: impl AsRef<str>,
        e: impl Into<crate::error::KernelError>,
    ) -> Error {
        Error::kernel(&self.netns, op, on, e)
    }

    /// Dump links, addresses, routes (all families, every table) and neighbours.
    ///
    /// The dumps run one after another: the kernel allows one dump in flight per socket.
    pub async fn dump(&self) -> Result<Dump> {
        let h = &self.handle;
        let links = h
            .link()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(|e| self.err("dump links", "", e))?;
        let addresses = h
            .address()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(|e| self.err("dump addresses", "", e))?;
        let routes = h
            .route()
            .get(RouteMessage::default())
            .execute()
            .try_collect()
            .await
            .map_err(|e| self.err("dump routes", "", e))?;
        let neighbours = h
            .neighbours()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(|e| self.err("dump neighbours", "", e))?;
        Ok(Dump {
            links,
            addresses,
            routes,
            neighbours,
        })
    }

    /// Scan the netns into a description (no attachment).
    pub async fn describe(&self, ns: &NetNs) -> Result<Description> {
        let dump = self.dump().await?;
        Ok(describe(ns, self.ipv6_enabled, &dump))
    }
}

/// Pure: build the description from a dump.
pub fn describe(ns: &NetNs, ipv6_enabled: bool, dump: &Dump) -> Description {
    let parsed = parse::parse(dump);
    Description {
        schema: SCHEMA.to_string(),
        netns: NetnsRef {
            path: ns.display(),
            inode: ns.inode(),
            dev: ns.dev(),
        },
        ipv6_enabled,
        interfaces: parsed.interfaces,
        routes: parsed.routes,
        neighbours: parsed.neighbours,
        attachment: None,
    }
}

/// Scan `ns` on a fresh current-thread runtime (for the CLI).
pub fn scan(ns: &NetNs) -> Result<Description> {
    crate::kernel::runtime::block_on(async {
        let nl = Netlink::connect(ns)?;
        nl.describe(ns).await
    })
}
