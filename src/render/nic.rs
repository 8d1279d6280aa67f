//! The VM NICs of a description: attached interfaces, validated once.

use std::net::IpAddr;

use ipnetwork::IpNetwork;

use super::RenderError;
use crate::model::ifname::is_safe_ifname;
use crate::model::{Description, Interface, TapInfo};

const MIN_MTU: u32 = 68;
const MAX_MTU: u32 = 65535;
/// The kernel's MAX_TAP_QUEUES.
const MAX_TAP_QUEUES: u32 = 256;

/// One VM NIC: an interface with a TAP, in description order.
#[derive(Debug, Clone)]
pub(crate) struct Nic<'a> {
    /// `net{n}`: the id every VMM format uses for NIC n.
    pub id: String,
    /// The pod interface this NIC mirrors.
    pub interface: &'a Interface,
    /// The TAP that backs it.
    pub tap: &'a TapInfo,
    /// The guest MAC, checked and lowercased.
    pub mac: String,
}

impl Nic<'_> {
    /// Multiqueue TAP exactly when it has more than one queue; VMMs that open
    /// the TAP by name fail with EINVAL otherwise.
    pub fn check_multi_queue_agreement(&self) -> Result<(), RenderError> {
        if self.tap.multi_queue == (self.tap.queues > 1) {
            return Ok(());
        }
        Err(RenderError::MultiQueueMismatch {
            interface: self.interface.name.clone(),
            tap: self.tap.name.clone(),
            queues: self.tap.queues,
            multi_queue: self.tap.multi_queue,
        })
    }

    /// Refuse a macvtap for `format`, which opens its backend by TAP name;
    /// `remedy` says what works instead.
    pub fn opened_by_name(
        &self,
        format: &'static str,
        remedy: &'static str,
    ) -> Result<(), RenderError> {
        if self.tap.device.is_none() {
            return Ok(());
        }
        Err(RenderError::MacvtapByName {
            interface: self.interface.name.clone(),
            tap: self.tap.name.clone(),
            format,
            remedy,
        })
    }

    /// Addresses the guest should carry, in kernel order: every address but
    /// IPv6 link-local ones (the guest makes its own).
    pub fn guest_addresses(&self) -> Result<Vec<IpNetwork>, RenderError> {
        let mut addresses = Vec::new();
        for cidr in &self.interface.addresses {
            let network: IpNetwork = cidr.parse().map_err(|_| RenderError::InvalidAddress {
                interface: self.interface.name.clone(),
                value: cidr.clone(),
            })?;
            if !self.is_link_local(cidr, network.ip()) {
                addresses.push(network);
            }
        }
        Ok(addresses)
    }

    fn is_link_local(&self, cidr: &str, ip: IpAddr) -> bool {
        let flagged = self
            .interface
            .address_details
            .iter()
            .any(|detail| detail.cidr == cidr && detail.link_local);
        flagged || is_ipv6_link_local(ip)
    }
}

/// Whether `ip` is in fe80::/10.
pub(crate) fn is_ipv6_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
        IpAddr::V4(_) => false,
    }
}

/// The VM NICs, in description order; an error if there are none or one is
/// unusable (no MAC, bad TAP name, MTU or queue count out of range).
pub(crate) fn attached_nics(desc: &Description) -> Result<Vec<Nic<'_>>, RenderError> {
    let nics = desc
        .attached()
        .enumerate()
        .map(|(index, (interface, tap))| build_nic(index, interface, tap))
        .collect::<Result<Vec<_>, _>>()?;
    if nics.is_empty() {
        return Err(RenderError::NoAttachedInterfaces);
    }
    Ok(nics)
}

fn build_nic<'a>(
    index: usize,
    interface: &'a Interface,
    tap: &'a TapInfo,
) -> Result<Nic<'a>, RenderError> {
    let raw_mac = interface
        .guest_mac
        .as_deref()
        .or(interface.mac.as_deref())
        .ok_or_else(|| RenderError::MissingMac {
            interface: interface.name.clone(),
        })?;
    let mac = normalize_unicast_mac(raw_mac).ok_or_else(|| RenderError::InvalidMac {
        interface: interface.name.clone(),
        mac: raw_mac.to_string(),
    })?;
    if !is_safe_ifname(&tap.name) {
        return Err(RenderError::InvalidTapName {
            interface: interface.name.clone(),
            name: tap.name.clone(),
        });
    }
    if !(MIN_MTU..=MAX_MTU).contains(&interface.mtu) {
        return Err(RenderError::InvalidMtu {
            interface: interface.name.clone(),
            mtu: interface.mtu,
        });
    }
    if !(1..=MAX_TAP_QUEUES).contains(&tap.queues) {
        return Err(RenderError::InvalidQueueCount {
            interface: interface.name.clone(),
            tap: tap.name.clone(),
            queues: tap.queues,
            maximum: MAX_TAP_QUEUES,
        });
    }
    Ok(Nic {
        id: format!("net{index}"),
        interface,
        tap,
        mac,
    })
}

/// `aa:bb:cc:dd:ee:ff` in lowercase, or None if `mac` is not six hex octets.
pub(crate) fn normalize_mac(mac: &str) -> Option<String> {
    let octets: Vec<&str> = mac.split(':').collect();
    let well_formed = octets.len() == 6
        && octets
            .iter()
            .all(|octet| octet.len() == 2 && octet.chars().all(|c| c.is_ascii_hexdigit()));
    well_formed.then(|| mac.to_ascii_lowercase())
}

/// Like `normalize_mac`, but also refuses multicast and all-zero addresses,
/// which no NIC can carry.
fn normalize_unicast_mac(mac: &str) -> Option<String> {
    let normalized = normalize_mac(mac)?;
    let first_octet = u8::from_str_radix(&normalized[..2], 16).ok()?;
    let multicast = first_octet & 1 == 1;
    let all_zero = normalized == "00:00:00:00:00:00";
    (!multicast && !all_zero).then_some(normalized)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::samples;

    #[test]
    fn only_interfaces_with_a_tap_become_nics_in_order() {
        let desc = samples::pod();
        let nics = attached_nics(&desc).unwrap();
        let summary: Vec<(&str, &str)> = nics
            .iter()
            .map(|nic| (nic.id.as_str(), nic.interface.name.as_str()))
            .collect();
        assert_eq!(summary, [("net0", "eth0"), ("net1", "net1")]);
    }

    #[test]
    fn guest_mac_wins_and_is_lowercased_else_mac_is_used() {
        let desc = samples::pod();
        let nics = attached_nics(&desc).unwrap();
        assert_eq!(nics[0].mac, "0a:58:0a:f4:01:05");
        assert_eq!(nics[1].mac, "52:54:00:12:34:04");
    }

    #[test]
    fn no_attached_interface_is_an_error() {
        let mut desc = samples::pod();
        desc.interfaces.iter_mut().for_each(|i| i.tap = None);
        assert_eq!(
            attached_nics(&desc).unwrap_err(),
            RenderError::NoAttachedInterfaces
        );
    }

    #[test]
    fn missing_and_bad_macs_are_errors() {
        let mut desc = samples::pod();
        samples::interface_mut(&mut desc, "net1").guest_mac = Some("01:00:5e:00:00:01".into());
        assert!(matches!(
            attached_nics(&desc),
            Err(RenderError::InvalidMac { .. })
        ));
        let net1 = samples::interface_mut(&mut desc, "net1");
        net1.guest_mac = None;
        net1.mac = None;
        assert!(matches!(
            attached_nics(&desc),
            Err(RenderError::MissingMac { .. })
        ));
    }

    #[test]
    fn tap_names_that_would_break_a_format_are_refused() {
        for bad in [
            "",
            "tap,0",
            "tap 0",
            "tap=0",
            "a-very-long-tap-name",
            "tap'0",
        ] {
            let mut desc = samples::pod();
            samples::tap_mut(&mut desc, "net1").name = bad.to_string();
            assert!(
                matches!(
                    attached_nics(&desc),
                    Err(RenderError::InvalidTapName { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn link_local_addresses_are_left_to_the_guest() {
        let desc = samples::pod();
        let nics = attached_nics(&desc).unwrap();
        let addresses: Vec<String> = nics[0]
            .guest_addresses()
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(addresses, ["10.244.1.5/24", "fd00:10:244:1::5/64"]);
    }
}
