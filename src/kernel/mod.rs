//! The kernel layer: netns entry, rtnetlink requests, TAP ioctls.
//!
//! Nothing here knows about plans or checkpoints: each function is one kind
//! of kernel request, with its errors.
//!
//! # Kernel transports
//!
//! Every way podtap talks to the kernel, and what for:
//!
//! | transport | where | what for |
//! |---|---|---|
//! | batch socket (blocking `NETLINK_ROUTE`, messages of rtnetlink's types) | [`batch`], [`dump`] | every request, alone ([`batch::Batch::request`]: create a bridge or macvtap, configure a TAP, enslave, replay recorded neighbours) or many per `sendmsg`; consistent dumps (links, addresses, routes, rules, neighbours, qdiscs, filters) read raw, or handed over a datagram at a time (`Batch::dump_streamed`). Its acks and errors are read in one place, `Batch::run` |
//! | `NETLINK_NETFILTER` socket (nf_tables messages encoded here) | [`nft`] | the routed mode's table of its own: replaced in one batch, read back, deleted |
//! | link deleter: a forked child process + its socket, `RTNLGRP_LINK` listener (both sockets opened ahead by the netns thread) | [`unlist`] | delete links and return once the kernel announced them gone, not after its `rcu_barrier()` |
//! | `NETLINK_ROUTE` subscription (links, addresses, routes) | [`subscribe`] | `podtap watch` wakes on changes in the pod netns |
//! | `/dev/net/tun` ioctls (`TUNSETIFF`, `TUNSETPERSIST`, `TUNSETOWNER`/`GROUP`, `TUNGETIFF`) and `SIOCGIFHWADDR`/`SIOCGIFNAME` | [`tap`] | create TAPs, prove their ifindex, open queues for a VMM |
//! | macvtap character devices (sysfs `dev` in a private mount namespace, `mknod`) | [`macvtap`] | the macvtap's queues under `/dev/podtap/<id>/` |
//! | sysctl writes (`/proc/sys/net/ipv6/conf/*/disable_ipv6`, the routed mode's forwarding and proxy settings) and reads (`conf/all`) | [`sysctl`], [`netns::NetNs::open_netlink`] | IPv6 off on TAPs and bridges; routing a guest; whether the netns has IPv6 |
//! | `AF_PACKET` sockets with a classic BPF filter, bound to a TAP | `crate::serve` (through [`netns::NetNs::run`]) | the responder hears its guest's DHCP, DHCPv6 and router solicitations and answers on the TAP |
//! | `setns(2)` on a dedicated thread; `unshare(CLONE_NEWNS)` | [`netns`], [`netns_worker`], [`macvtap`] | enter the pod netns (never on the caller's thread); a private sysfs |
//! | nsfs: `fstatfs`, `NS_GET_NSTYPE`, `/proc/PID/ns/net`, `/proc/PID/fd` | [`netns`], [`netns_search`] | prove a path is a netns and not the host's; find one whose path died |
//! | `SO_NETNS_COOKIE` | [`netns_id`] | a netns identity the kernel never reuses |
//! | `flock(2)` | [`netns_lock`], [`unlist`] (drain lock) | one attach per netns; one bridge drain per node |
//!
//! Outside this module: `handover` opens the TAP queues and `/dev/vhost-net`
//! for a VMM and sends fds over a socket (`SCM_RIGHTS`), which `watch` and
//! the responder's hand-over use too.
//!
//! # The line
//!
//! A module imports only modules on lower rows (or, where the row says
//! "above", a lower one of its own row), never one above it, so there are
//! no circles:
//!
//! | row | modules | import |
//! |---|---|---|
//! | 7 waits | [`resolve`] (have the kernel resolve neighbours and wait for it) | batch, routing |
//! | 6 requests | [`links`], [`tc`], [`bridge`], [`replay`], [`routing`] (pure builders of the routed mode's requests), [`nft`] (its own socket and encoder); [`unlist`] above its child | batch, session, wire, errno |
//! | 5 session | [`netlink`]: the batch sockets and the netns thread | batch, netns, errno |
//! | 4 many requests on one socket | [`batch`], then [`dump`] (consistent dumps) | wire, nlrecv, errno |
//! | 3 netns users | [`netns_lock`], [`netns_search`], [`subscribe`], [`sysctl`] | netns |
//! | 2 netns entry, devices | [`netns`]; [`macvtap`] | netns_worker, netns_id; tap |
//! | 1 threads, ioctls | [`netns_worker`], [`tap`] | errno, mac |
//! | 0 leaves | [`wire`] (the one netlink parser, above [`mac`]), [`errno`], [`nlrecv`], [`netns_id`] | nothing of the kernel layer |
//!
//! Check: `grep -n "use super::\|use crate::kernel" src/kernel/*.rs src/kernel/*/*.rs`.

pub mod batch;
pub mod bridge;
pub mod dump;
pub mod errno;
pub mod links;
pub mod mac;
pub mod macvtap;
pub mod netlink;
pub mod netns;
pub mod netns_id;
pub mod netns_lock;
pub mod netns_search;
pub mod netns_worker;
pub mod nft;
pub mod nlrecv;
pub mod private_dir;
pub mod replay;
pub mod resolve;
pub mod routing;
pub mod subscribe;
pub mod sysctl;
pub mod tap;
pub mod tc;
pub mod unlist;
mod unlist_child;
pub mod wire;
