//! A guest without a VM: `tests/runtimes/guest_standin.py` holds the pod's
//! TAP as a VMM does and copies frames to a TAP `gtap0` in a netns of its
//! own, which plays the guest's NIC (with the guest's MAC). Clients that
//! run in that netns (udhcpc, the kernel's router advertisement handling)
//! see what a guest would.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use crate::netns::Netns;

/// The guest's NIC in the stand-in's netns.
pub const GUEST_IF: &str = "gtap0";

/// A running stand-in and its guest netns; both go on drop.
pub struct GuestStandin {
    /// The guest's netns.
    pub guest: Netns,
    child: Child,
}

impl GuestStandin {
    /// Hold `tap` of the pod netns at `pod` and give the guest NIC `mac`,
    /// up, without duplicate address detection, taking router advertisements.
    pub fn start(pod: &str, tap: &str, mac: &str) -> Self {
        let guest = Netns::new("gst");
        let script = format!(
            "{}/tests/runtimes/guest_standin.py",
            crate::repo().display()
        );
        let mut child = Command::new("python3")
            .args([&script, pod, &guest.path_str(), tap, GUEST_IF])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run guest_standin.py");
        let mut ready = String::new();
        let stdout = child.stdout.take().expect("stdout");
        BufReader::new(stdout)
            .read_line(&mut ready)
            .expect("read READY");
        assert_eq!(ready.trim(), "READY", "the stand-in did not start");
        guest.exec(&format!(
            "sysctl -qw net.ipv6.conf.{GUEST_IF}.accept_dad=0 net.ipv6.conf.{GUEST_IF}.accept_ra=2 \
             net.ipv6.conf.{GUEST_IF}.accept_ra_rt_info_max_plen=128"
        ));
        guest.ip(&format!("link set {GUEST_IF} address {mac}"));
        guest.ip(&format!("link set {GUEST_IF} up"));
        GuestStandin { guest, child }
    }
}

impl Drop for GuestStandin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
