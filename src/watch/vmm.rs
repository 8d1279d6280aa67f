//! What the watcher asks of a VMM that takes NICs while it runs: the one
//! interface ([`VmmClient`]) each client (QEMU's QMP in `qmp.rs`, Cloud
//! Hypervisor's REST API in `ch_api.rs`) implements, and the NIC it is
//! given. A leaf: the clients import it, it imports neither them nor the
//! watcher (`choose`, in `mod.rs`, picks the client).

use std::collections::BTreeSet;
use std::io;
use std::os::fd::OwnedFd;

/// What a VMM needs to plug one NIC, taken from the description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotNic {
    /// The device id podtap gives the NIC in the VMM: `podtap-<tap>`.
    pub device: String,
    /// The guest MAC (the pod interface's).
    pub mac: String,
    /// The pod interface's MTU.
    pub mtu: u32,
    /// TAP queues (one fd each).
    pub queues: u32,
}

/// The id podtap's hotplugged NIC for TAP `tap` has in the VMM. QEMU ids
/// take letters, digits, '-', '.', '_' and start with a letter; TAP names are
/// already in that alphabet.
pub fn device_id(tap: &str) -> String {
    format!("podtap-{tap}")
}

/// The TAP name behind a device id podtap gave, if it is one of podtap's.
pub fn tap_of(device: &str) -> Option<&str> {
    device.strip_prefix("podtap-")
}

/// A VMM that takes NICs while it runs. Every call opens its own
/// connection and is bounded in size and time (`bounded.rs`); fds travel
/// only by `handover::send_with_fds`.
pub trait VmmClient {
    /// The ids of the NICs the VMM has now.
    fn devices(&self) -> io::Result<BTreeSet<String>>;

    /// Clear what an earlier plug of `nic` that failed or was killed left
    /// behind (a backend without its device, handed-over fds), before its
    /// queues are opened again. Nothing to clear by default.
    fn prepare(&self, _nic: &HotNic) -> io::Result<()> {
        Ok(())
    }

    /// Plug `nic`, handing over its queue fds (the VMM keeps its own copies).
    fn plug(&self, nic: &HotNic, fds: &[OwnedFd]) -> io::Result<()>;

    /// Unplug the NIC `device`; one that is not there counts as done.
    fn unplug(&self, device: &str) -> io::Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_ids_name_the_tap_and_are_recognised() {
        assert_eq!(device_id("tap_eth1"), "podtap-tap_eth1");
        assert_eq!(tap_of("podtap-tap_eth1"), Some("tap_eth1"));
        assert_eq!(tap_of("net0"), None);
    }
}
