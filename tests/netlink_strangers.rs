//! A process with CAP_NET_ADMIN in the pod netns talks to podtap's netlink
//! sockets, as a pod author could: the ports are listed in that netns's
//! `/proc/net/netlink`. Every socket of a running `podtap watch` refuses
//! its unicast (the kernel answers ECONNREFUSED, so a flood cannot fill the
//! buffer the kernel's answers need), and a flood of forged announcements
//! to the groups the watch follows neither stops it nor hides a real change.

use std::collections::BTreeSet;

use podtap_testkit::{
    attach_json, detach, exit_code, in_netns, net_tools_or_skip, sh, stderr, unique, Netns, Pod,
    StateDir, Watch,
};
use rtnetlink::constants::{RTMGRP_IPV4_ROUTE, RTMGRP_LINK};
use rtnetlink::sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

/// The podtap binary under test.
const BIN: &str = env!("CARGO_BIN_EXE_podtap");

/// The inodes of the sockets process `pid` holds.
fn socket_inodes(pid: u32) -> BTreeSet<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd dir")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|target| {
            let t = target.to_string_lossy();
            t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

/// The netlink ports, in `ns`, of the sockets whose inodes are `inodes`
/// (`/proc/net/netlink`: the port is the third column, the inode the last).
fn ports_in(ns: &Netns, inodes: BTreeSet<u64>) -> Vec<u32> {
    let table = in_netns(&ns.path_str(), || {
        std::fs::read_to_string("/proc/thread-self/net/netlink").expect("netlink table")
    });
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let inode: u64 = cols.last()?.parse().ok()?;
            inodes.contains(&inode).then(|| cols.get(2)?.parse().ok())?
        })
        .collect()
}

/// A bound netlink socket of the calling thread's netns.
fn stranger() -> Socket {
    let mut s = Socket::new(NETLINK_ROUTE).expect("socket");
    s.bind_auto().expect("bind");
    s
}

#[test]
fn a_watch_takes_netlink_datagrams_from_the_kernel_only() {
    if !net_tools_or_skip("a_watch_takes_netlink_datagrams_from_the_kernel_only") {
        return;
    }
    let pod = Pod::dual_stack();
    let state = StateDir::new();
    let id = unique("stranger");
    attach_json(BIN, &state.0, &pod, &id, "tc");
    let watch = Watch::start(BIN, &state.0, &id, &[]);
    watch.next("ready");

    let ports = ports_in(&pod.pod, socket_inodes(watch.pid()));
    assert!(
        !ports.is_empty(),
        "the watch holds a socket in the pod netns"
    );
    let refused = in_netns(&pod.pod.path_str(), move || {
        let s = stranger();
        ports
            .iter()
            .map(|p| {
                let sent = s.send_to(b"not the kernel", &SocketAddr::new(*p, 0), 0);
                (*p, sent.map_err(|e| e.raw_os_error()))
            })
            .collect::<Vec<_>>()
    });
    for (port, sent) in refused {
        assert_eq!(
            sent,
            Err(Some(libc::ECONNREFUSED)),
            "port {port} took a datagram from a process"
        );
    }

    // 4 MiB of forged "link up" and "route added" announcements: more than
    // the watch's buffer holds.
    in_netns(&pod.pod.path_str(), || {
        let s = stranger();
        let forged = vec![0u8; 1024];
        for _ in 0..4096 {
            s.send_to(
                &forged,
                &SocketAddr::new(0, RTMGRP_LINK | RTMGRP_IPV4_ROUTE),
                0,
            )
            .expect("root may send to a group");
        }
    });
    assert!(
        watch
            .drain(std::time::Duration::from_millis(300))
            .is_empty(),
        "forged announcements are no news"
    );
    // A real change still reaches the watch.
    let (p, q) = (&pod.pod.name, &pod.peer.name);
    sh(&format!(
        "ip -n {q} link add ns1 type veth peer name net1 netns {p} && ip -n {q} link set ns1 up && \
         ip -n {p} addr add 198.19.7.2/24 dev net1 && ip -n {p} link set net1 up"
    ));
    let added = watch.next("added");
    assert_eq!(added["interface"], "net1", "{added}");
    let o = detach(BIN, &state, &id);
    assert_eq!(exit_code(&o), 0, "detach: {}", stderr(&o));
}
