//! A netlink subscription inside one netns: the kernel announces every link,
//! address and route change there (`podtap watch` waits on it, no polling).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};

use rtnetlink::constants::{
    RTMGRP_IPV4_IFADDR, RTMGRP_IPV4_ROUTE, RTMGRP_IPV6_IFADDR, RTMGRP_IPV6_ROUTE, RTMGRP_LINK,
};
use rtnetlink::sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use super::netns::NetNs;
use crate::error::Result;

/// The groups watched: links, addresses and routes of both families.
/// Neighbours are left out: their state changes all the time.
const GROUPS: u32 =
    RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE;

/// A non-blocking socket subscribed to [`GROUPS`] in one netns.
pub struct Subscription {
    fd: OwnedFd,
}

impl Subscription {
    /// Subscribe inside `ns` (the socket is made on a netns thread and keeps
    /// that netns for life).
    pub fn open(ns: &NetNs) -> Result<Self> {
        let fd = ns.run(|| {
            let mut socket = Socket::new(NETLINK_ROUTE)?;
            socket.bind(&SocketAddr::new(0, GROUPS))?;
            socket.set_rx_buf_sz(1 << 20)?;
            socket.set_non_blocking(true)?;
            // SAFETY: into_raw_fd transfers ownership of a valid open fd.
            Ok(unsafe { OwnedFd::from_raw_fd(socket.into_raw_fd()) })
        })?;
        Ok(Subscription { fd })
    }

    /// Read and drop everything queued; true when anything was (an overrun,
    /// ENOBUFS, counts: announcements were lost, so something changed).
    pub fn drain(&self) -> io::Result<bool> {
        let mut buf = vec![0u8; 1 << 16];
        let mut any = false;
        loop {
            match nix::sys::socket::recv(
                std::os::fd::AsRawFd::as_raw_fd(&self.fd),
                &mut buf,
                nix::sys::socket::MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(0) => return Ok(any),
                Ok(_) => any = true,
                Err(nix::errno::Errno::EAGAIN) => return Ok(any),
                Err(nix::errno::Errno::ENOBUFS) => any = true,
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl AsFd for Subscription {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
