//! VMs: the test guest (tests/guest/README.md) and reaching into it from outside.

use std::sync::OnceLock;

use crate::netns::Netns;
use crate::run::{sh, sh_ok};

/// The QEMU the VM tests boot (TCG).
pub const QEMU: &str = "qemu-system-x86_64";

/// Kernel and initramfs of the test guest, built once per test binary
/// (build-guest.sh caches them across runs; PODTAP_GUEST_KERNEL and
/// PODTAP_GUEST_INITRD name others).
pub fn guest() -> &'static (String, String) {
    static GUEST: OnceLock<(String, String)> = OnceLock::new();
    GUEST.get_or_init(|| {
        if let (Ok(k), Ok(i)) = (
            std::env::var("PODTAP_GUEST_KERNEL"),
            std::env::var("PODTAP_GUEST_INITRD"),
        ) {
            return (k, i);
        }
        let out = sh(&format!(
            "{}/tests/guest/build-guest.sh",
            crate::repo().display()
        ));
        let value = |key: &str| {
            out.lines()
                .rev()
                .find_map(|l| l.strip_prefix(key))
                .unwrap_or_else(|| panic!("build-guest.sh printed no {key}: {out}"))
                .to_string()
        };
        (value("KERNEL="), value("INITRD="))
    })
}

/// From `node`, reach `ip` (in the guest) `rounds` times over, each time
/// resolving it afresh: every answer must come from the guest's MAC. (In
/// bridge mode the pod netns once answered ARP first, with the bridge's MAC.)
pub fn reach_in(node: &Netns, ip: &str, guest_mac: &str, rounds: u32) {
    let ping = if ip.contains(':') { "ping -6" } else { "ping" };
    for round in 0..rounds {
        node.ip(&format!("neigh flush to {ip}"));
        let ok = (0..3).any(|_| sh_ok(&format!("ip netns exec {} {ping} -c1 -W2 {ip}", node.name)));
        assert!(
            ok,
            "round {round}: {ip} is not reachable from the pod's peer"
        );
        let neigh = node.ip(&format!("neigh show {ip}"));
        assert!(
            neigh.to_lowercase().contains(&guest_mac.to_lowercase()),
            "round {round}: the peer resolved {ip} to {neigh:?}, not the guest's {guest_mac}"
        );
    }
}
