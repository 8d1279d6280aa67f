//! A netlink subscription inside one netns: the kernel announces every link,
//! address and route change there (`podtap watch` waits on it, no polling).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};

use nix::sys::socket::NetlinkAddr;
use rtnetlink::constants::{
    RTMGRP_IPV4_IFADDR, RTMGRP_IPV4_ROUTE, RTMGRP_IPV6_IFADDR, RTMGRP_IPV6_ROUTE, RTMGRP_LINK,
};
use rtnetlink::sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use super::netns::NetNs;
use crate::error::Result;

/// The groups watched (besides next-hop objects): links, addresses and routes of both families.
/// Neighbours are left out: their state changes all the time.
const GROUPS: u32 =
    RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE;

/// `RTNLGRP_NEXTHOP`: announcements of next-hop objects.
const RTNLGRP_NEXTHOP: u32 = 32;

/// A non-blocking socket subscribed to [`GROUPS`] and [`RTNLGRP_NEXTHOP`] in one netns.
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
            // Changes of next-hop objects (Linux 5.3): with the netns's
            // nexthop_compat_mode at 0 a route that uses one is not announced
            // when the object changes. Group 32 is past bind's bit mask. A
            // kernel without the group refuses it: nothing to follow there.
            let _ = socket.add_membership(RTNLGRP_NEXTHOP);
            super::nlrecv::from_kernel_only(&socket)?;
            socket.set_rx_buf_sz(1 << 20)?;
            socket.set_non_blocking(true)?;
            // SAFETY: into_raw_fd transfers ownership of a valid open fd.
            Ok(unsafe { OwnedFd::from_raw_fd(socket.into_raw_fd()) })
        })?;
        Ok(Subscription { fd })
    }

    /// Read and drop everything queued; true when the kernel announced
    /// anything (an overrun, ENOBUFS, counts: announcements were lost, so
    /// something may have changed). A process with CAP_NET_ADMIN in the
    /// netns may send to these groups too: its datagrams (sender port not 0)
    /// are dropped unseen; only one that overruns the buffer costs a rescan.
    pub fn drain(&self) -> io::Result<bool> {
        let mut buf = vec![0u8; 1 << 16];
        let mut any = false;
        loop {
            match nix::sys::socket::recvfrom::<NetlinkAddr>(
                std::os::fd::AsRawFd::as_raw_fd(&self.fd),
                &mut buf,
            ) {
                // A datagram may be empty (a process can send one): not the end.
                Ok((_, from)) => any |= from.is_some_and(|a| a.pid() == 0),
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

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_core::{NLM_F_ACK, NLM_F_REQUEST};
    use rtnetlink::packet_route::link::{LinkFlags, LinkMessage};
    use rtnetlink::packet_route::RouteNetlinkMessage;

    /// `message` as bytes.
    fn bytes(message: RouteNetlinkMessage, flags: u16) -> Vec<u8> {
        let mut buf = Vec::new();
        crate::kernel::wire::push(&mut buf, message, flags, 0);
        buf
    }

    /// A process that sends to the groups a watch follows is not the kernel:
    /// its datagram is no news; the kernel's announcement of a change is.
    /// In a netns of this thread's own (unshared; gone with the thread).
    #[test]
    fn a_process_multicast_is_no_news() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIP a_process_multicast_is_no_news: needs root (a private netns)");
            return;
        }
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("private netns");
            let ns = NetNs::open(std::path::Path::new("/proc/thread-self/ns/net"), false)
                .expect("this thread's netns");
            let sub = Subscription::open(&ns).expect("subscribe");
            let mut stranger = Socket::new(NETLINK_ROUTE).expect("socket");
            stranger.bind_auto().expect("bind");
            // A forged announcement: loopback is up.
            let mut lo = LinkMessage::default();
            lo.header.index = 1;
            lo.header.flags = LinkFlags::Up;
            let forged = bytes(RouteNetlinkMessage::NewLink(lo.clone()), 0);
            stranger
                .send_to(&forged, &SocketAddr::new(0, RTMGRP_LINK), 0)
                .expect("root may send to a group");
            assert!(!sub.drain().expect("drain"), "a process's multicast");
            // The real change, announced by the kernel.
            lo.header.change_mask = LinkFlags::Up;
            let request = bytes(RouteNetlinkMessage::SetLink(lo), NLM_F_REQUEST | NLM_F_ACK);
            stranger
                .send_to(&request, &SocketAddr::new(0, 0), 0)
                .expect("request");
            let mut ack = vec![0u8; 4096];
            stranger.recv(&mut &mut ack[..], 0).expect("ack");
            assert!(sub.drain().expect("drain"), "the kernel's announcement");
        })
        .join()
        .expect("test thread");
    }
}
