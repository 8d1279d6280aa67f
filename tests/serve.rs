//! `podtap serve` answering guests, without a VM: a stand-in holds each
//! TAP as a VMM does and hands frames to a netns of its own where real
//! clients run as the guest (busybox udhcpc, the kernel's router
//! advertisement handling). QEMU guests with udhcpc and dhcpcd are
//! `tests/serve_vm.rs`.
//!
//! 1. In tc, bridge and l3 mode the guest ends with the pod's address,
//!    routes, MTU and DNS, and a router for IPv6; `tcpdump` on the pod's
//!    link sees none of its requests.
//! 2. A hostile guest (malformed and truncated frames, option loops, floods
//!    of DISCOVER and RS) does not stop another pod's guest being served
//!    on time, its own well-formed request is answered once the flood
//!    stops, and the daemon's memory stays flat.

use std::time::{Duration, Instant};

use podtap_testkit::serve::ServeDaemon;
use podtap_testkit::standin::{GuestStandin, GUEST_IF};
use podtap_testkit::{
    iface, in_netns, podtap_ok, root_or_skip, sh, tool_or_skip, unique, Netns, Pod, StateDir,
    TempDir,
};

const BIN: &str = env!("CARGO_BIN_EXE_podtap");

fn prerequisites(test: &str) -> bool {
    root_or_skip(test)
        && ["python3", "busybox", "tcpdump"]
            .iter()
            .all(|t| tool_or_skip(test, t))
}

/// Attach `pod` with `--serve` in `mode`, DNS from a resolv.conf of the
/// test's: the description.
fn attach_served(state: &StateDir, pod: &Pod, id: &str, mode: &str) -> serde_json::Value {
    let dir = TempDir::new();
    let resolv = dir.path().join("resolv.conf");
    std::fs::write(
        &resolv,
        "nameserver 198.18.0.53\nnameserver 2001:db8::53\nsearch pod.example svc.example\n",
    )
    .expect("write resolv.conf");
    let netns = pod.pod.path_str();
    let resolv = resolv.display().to_string();
    let args = [
        "attach",
        "--netns",
        &netns,
        "--id",
        id,
        "--mode",
        mode,
        "--serve",
        "--dns-from",
        &resolv,
    ];
    serde_json::from_str(&podtap_ok(BIN, &state.0, &args)).expect("attach prints JSON")
}

/// busybox udhcpc in the guest netns, once: what it was given, as the
/// variables its script sees (`ip`, `mask`, `router`, `staticroutes`,
/// `mtu`, `dns`, `search`...).
fn udhcpc(guest: &Netns) -> std::collections::BTreeMap<String, String> {
    let dir = TempDir::new();
    let script = dir.path().join("script");
    let out = dir.path().join("lease");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n[ \"$1\" = bound ] && env > {}\nexit 0\n",
            out.display()
        ),
    )
    .expect("write the udhcpc script");
    sh(&format!("chmod +x {}", script.display()));
    guest.exec(&format!(
        "timeout 20 busybox udhcpc -i {GUEST_IF} -n -q -f -O staticroutes -O search -O mtu -s {}",
        script.display()
    ));
    std::fs::read_to_string(&out)
        .expect("udhcpc got a lease")
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Capture on `ifname` of `ns` what a guest's requests would look like there.
fn capture(ns: &Netns, ifname: &str) -> std::process::Child {
    let child = std::process::Command::new("ip")
        .args([
            "netns", "exec", &ns.name, "tcpdump", "-n", "-e", "-l", "-i", ifname,
        ])
        .args(["udp port 67 or udp port 68 or udp port 547 or icmp6[icmp6type] == 133"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run tcpdump");
    std::thread::sleep(Duration::from_millis(500));
    child
}

fn captured(child: std::process::Child) -> String {
    let _ = sh(&format!("kill -INT {}", child.id()));
    let out = child.wait_with_output().expect("tcpdump");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_served_guest_is_configured_in_every_mode_and_nothing_leaks() {
    let test = "a_served_guest_is_configured_in_every_mode_and_nothing_leaks";
    if !prerequisites(test) {
        return;
    }
    let state = StateDir::new();
    let daemon = ServeDaemon::start(BIN, &state.0);
    for mode in ["tc", "bridge", "l3"] {
        let pod = Pod::stable_dual_stack();
        // The node's end asks for routers itself when bridge mode takes eth0
        // down and up to give it a new MAC (its carrier came back), and so
        // may the pod's eth0: quiet both, so that any solicitation the
        // capture sees is the guest's.
        pod.peer
            .exec("sysctl -qw net.ipv6.conf.veth0.router_solicitations=0");
        pod.pod
            .exec("sysctl -qw net.ipv6.conf.eth0.router_solicitations=0");
        let id = unique("srv");
        let desc = attach_served(&state, &pod, &id, mode);
        let eth0 = iface(&desc, "eth0");
        assert_eq!(
            eth0["tap"]["served"], true,
            "{mode}: the description says so"
        );
        // The checkpoint's write and attach's hand-over both reach the
        // daemon; the hand-over's socket was bound before attach returned.
        let handed = (0..2).any(|_| daemon.next("serving", 10)["handed_over"] == true);
        assert!(handed, "{mode}: attach handed the socket over");
        let tap = eth0["tap"]["name"].as_str().expect("tap");
        let mac = eth0["guest_mac"]
            .as_str()
            .or(eth0["mac"].as_str())
            .expect("mac");
        let g = GuestStandin::start(&pod.pod.path_str(), tap, mac);
        let tcpdump = capture(&pod.peer, "veth0");
        let lease = udhcpc(&g.guest);
        let n = pod.net;
        assert_eq!(
            lease["ip"],
            format!("198.18.{n}.2"),
            "{mode}: the pod's address"
        );
        assert_eq!(lease["mask"], "24");
        let routes = lease.get("staticroutes").cloned().unwrap_or_default();
        assert!(
            routes.contains(&format!("0.0.0.0/0 198.18.{n}.1")),
            "{mode}: the default route: {routes}"
        );
        if mode == "l3" {
            assert!(
                routes.contains("169.254.0.1/32 0.0.0.0"),
                "l3: the netns's own address on-link: {routes}"
            );
        }
        assert_eq!(lease["mtu"], "1500");
        assert_eq!(lease["dns"].split_whitespace().next(), Some("198.18.0.53"));
        assert!(lease["search"].contains("pod.example"), "{mode}: {lease:?}");
        // The kernel's router advertisement handling: a default route.
        let router =
            podtap_testkit::poll(Duration::from_secs(10), Duration::from_millis(200), || {
                g.guest
                    .ip(&format!("-6 route show default dev {GUEST_IF}"))
                    .contains("via fe80:")
            });
        assert!(
            router,
            "{mode}: no IPv6 default route from a router advertisement"
        );
        g.guest.exec(&format!(
            "timeout 5 busybox udhcpc -i {GUEST_IF} -n -q -f -s /bin/true"
        ));
        let seen = captured(tcpdump);
        assert!(
            seen.trim().is_empty(),
            "{mode}: the guest's (MAC {mac}) requests left by the pod interface \
             (MAC {}):\n{seen}",
            pod.pod.ip_json("link show eth0")[0]["address"]
        );
        podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
        let stopped = daemon.next("stopped", 10);
        assert!(stopped["answered"].as_u64() > Some(2), "{mode}: {stopped}");
    }
}

/// One Ethernet frame from `mac`: IPv4/UDP 68 → 67 broadcast, a BOOTP
/// request with the magic cookie and `options`.
fn dhcp_frame(mac: [u8; 6], options: &[u8]) -> Vec<u8> {
    let mut bootp = vec![0u8; 236];
    bootp[0] = 1; // BOOTREQUEST
    bootp[1] = 1;
    bootp[2] = 6;
    bootp[4..8].copy_from_slice(&[1, 2, 3, 4]);
    bootp[28..34].copy_from_slice(&mac);
    bootp.extend_from_slice(&[99, 130, 83, 99]);
    bootp.extend_from_slice(options);
    let udp_len = 8 + bootp.len();
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = 20 + udp_len;
    let [hi, lo] = u16::try_from(total).expect("short").to_be_bytes();
    let mut ip = vec![
        0x45, 0, hi, lo, 0, 0, 0, 0, 64, 17, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255,
    ];
    let sum = checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    let [hi, lo] = u16::try_from(udp_len).expect("short").to_be_bytes();
    f.extend_from_slice(&[0, 68, 0, 67, hi, lo, 0, 0]);
    f.extend_from_slice(&bootp);
    f
}

fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !u16::try_from(sum).expect("folded")
}

/// A router solicitation from `mac` (`::` source, no options), or one whose
/// option claims more bytes than the frame has.
fn rs_frame(mac: [u8; 6], bad_option: bool) -> Vec<u8> {
    let mut icmp = vec![133, 0, 0, 0, 0, 0, 0, 0];
    if bad_option {
        icmp.extend_from_slice(&[1, 200, 0, 0, 0, 0, 0, 0]);
    }
    let mut f = vec![0x33, 0x33, 0, 0, 0, 2];
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[
        0x86,
        0xdd,
        0x60,
        0,
        0,
        0,
        0,
        u8::try_from(icmp.len()).expect("short"),
        58,
        255,
    ]);
    f.extend_from_slice(&[0; 16]);
    f.extend_from_slice(&[0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&icmp);
    f
}

/// The hostile frames: truncated at every length, an option that loops
/// (overload pointing at itself), options that run past the end, a
/// DISCOVER flood and an RS flood.
fn hostile(mac: [u8; 6]) -> Vec<Vec<u8>> {
    let discover = dhcp_frame(mac, &[53, 1, 1, 255]);
    let mut frames: Vec<Vec<u8>> = (0..discover.len())
        .map(|n| discover[..n].to_vec())
        .collect();
    frames.push(dhcp_frame(mac, &[52, 1, 3, 53, 1, 1, 255]));
    frames.push(dhcp_frame(mac, &[53, 1, 1, 121, 250, 24]));
    frames.push(dhcp_frame(mac, &[0; 300]));
    frames.push(rs_frame(mac, true));
    frames.extend(std::iter::repeat_n(discover, 2000));
    frames.extend(std::iter::repeat_n(rs_frame(mac, false), 2000));
    frames
}

/// Send `frames` out of the guest NIC in the netns at `guest` (raw, as its kernel would).
fn send_raw(guest: &str, frames: Vec<Vec<u8>>) {
    in_netns(guest, move || {
        // SAFETY: socket(2) takes no pointers; the result is checked.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        assert!(fd >= 0, "packet socket");
        let index = nix::net::if_::if_nametoindex(GUEST_IF).expect("gtap0");
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = u16::try_from(libc::AF_PACKET).expect("AF_PACKET");
        sll.sll_ifindex = i32::try_from(index).expect("ifindex");
        sll.sll_halen = 6;
        for f in &frames {
            // SAFETY: the buffers and the address outlive the call.
            unsafe {
                libc::sendto(
                    fd,
                    f.as_ptr().cast(),
                    f.len(),
                    0,
                    (&raw const sll).cast(),
                    libc::socklen_t::try_from(std::mem::size_of::<libc::sockaddr_ll>())
                        .expect("size"),
                );
            }
        }
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
    });
}

#[test]
fn a_hostile_guest_does_not_stop_another_pods_guest_being_served() {
    let test = "a_hostile_guest_does_not_stop_another_pods_guest_being_served";
    if !prerequisites(test) {
        return;
    }
    let state = StateDir::new();
    let daemon = ServeDaemon::start(BIN, &state.0);
    let (bad_pod, good_pod) = (Pod::stable_dual_stack(), Pod::stable_dual_stack());
    let (bad_id, good_id) = (unique("hostile"), unique("calm"));
    let bad = attach_served(&state, &bad_pod, &bad_id, "tc");
    let good = attach_served(&state, &good_pod, &good_id, "tc");
    let guest = |pod: &Pod, desc: &serde_json::Value| {
        let eth0 = iface(desc, "eth0");
        let mac = eth0["guest_mac"]
            .as_str()
            .or(eth0["mac"].as_str())
            .expect("mac")
            .to_string();
        let tap = eth0["tap"]["name"].as_str().expect("tap");
        (GuestStandin::start(&pod.pod.path_str(), tap, &mac), mac)
    };
    let (bad_guest, bad_mac) = guest(&bad_pod, &bad);
    let (good_guest, _) = guest(&good_pod, &good);
    udhcpc(&good_guest.guest);
    let rss_before = daemon.rss_kib();
    let mac: [u8; 6] = parse_mac(&bad_mac);
    let flood = std::thread::spawn({
        let path = bad_guest.guest.path_str();
        move || {
            for _ in 0..3 {
                send_raw(&path, hostile(mac));
            }
        }
    });
    let start = Instant::now();
    let lease = udhcpc(&good_guest.guest);
    let took = start.elapsed();
    flood.join().expect("flood");
    assert_eq!(
        lease["ip"],
        format!("198.18.{}.2", good_pod.net),
        "the other guest is served"
    );
    assert!(
        took < Duration::from_secs(5),
        "the other guest waited {took:?}"
    );
    // Past the flood the bucket refills: a well-formed request is answered.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        udhcpc(&bad_guest.guest)["ip"],
        format!("198.18.{}.2", bad_pod.net)
    );
    let rss_after = daemon.rss_kib();
    assert!(
        rss_after <= rss_before + 512,
        "the daemon grew from {rss_before} KiB to {rss_after} KiB"
    );
    for id in [bad_id, good_id] {
        podtap_ok(BIN, &state.0, &["detach", "--id", &id]);
    }
}

fn parse_mac(text: &str) -> [u8; 6] {
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(text.split(':')) {
        *m = u8::from_str_radix(p, 16).expect("hex");
    }
    mac
}
