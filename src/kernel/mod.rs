//! The kernel layer: netns entry, rtnetlink requests, TAP ioctls.
//!
//! Nothing here knows about plans or checkpoints: each function is one kind
//! of kernel request, with its errors.

pub mod batch;
pub mod bridge;
pub mod dump;
pub mod links;
pub mod mac;
pub mod macvtap;
pub mod netlink;
pub mod netns;
pub mod netns_id;
pub mod netns_lock;
pub mod netns_search;
pub mod netns_worker;
pub mod nlrecv;
pub mod private_dir;
pub mod replay;
pub mod runtime;
pub mod subscribe;
pub mod sysctl;
pub mod tap;
pub mod tc;
pub mod tun_info;
pub mod unlist;
mod unlist_child;
