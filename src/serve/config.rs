//! What one NIC serves, and its validation into a [`Responder`] whose
//! constant parts (routes, names, the whole RA) are encoded once.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::wire::encode_names;

/// An IPv4 route of the pod, as the guest should have it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route4 {
    /// The destination network's address.
    pub dest: Ipv4Addr,
    /// Its prefix length.
    pub prefix: u8,
    /// `None`: on-link (a device route).
    pub gateway: Option<Ipv4Addr>,
}

/// An IPv6 route of the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route6 {
    /// The destination network's address.
    pub dest: Ipv6Addr,
    /// Its prefix length.
    pub prefix: u8,
    /// The next hop; `None`: on-link.
    pub gateway: Option<Ipv6Addr>,
}

/// What the guest behind one TAP should end up with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NicConfig {
    /// The only MAC served (Ethernet source and DHCPv4 chaddr).
    pub guest_mac: [u8; 6],
    /// Source MAC of every reply, and the RA's source link-layer address:
    /// the MAC the guest should use for the router.
    pub server_mac: [u8; 6],
    /// The pod's address and prefix length (e.g. Calico's /32).
    pub ipv4: Option<(Ipv4Addr, u8)>,
    /// The pod's default gateway (may lie outside the subnet: 169.254.1.1).
    pub gateway4: Option<Ipv4Addr>,
    /// The pod's routes, default included; a default via `gateway4` is
    /// added when absent.
    pub routes4: Vec<Route4>,
    /// DHCP server identifier and source address; `gateway4` when `None`
    /// (so unicast renewals reach a MAC the guest can resolve).
    pub server_id4: Option<Ipv4Addr>,
    /// The pod's IPv6 addresses; link-local ones are not leased.
    pub ipv6: Vec<(Ipv6Addr, u8)>,
    /// The pod's IPv6 default gateway, often link-local (fe80::…).
    pub gateway6: Option<Ipv6Addr>,
    /// The pod's other IPv6 routes (router advertisement route information).
    pub routes6: Vec<Route6>,
    /// Whether this NIC holds the pod's IPv6 default route: the RA's router
    /// lifetime is non-zero only then.
    pub holds_default_v6: bool,
    /// The RA/DHCPv6 source when `gateway6` is not link-local; derived
    /// from `server_mac` (EUI-64) when `None`.
    pub router_ll: Option<Ipv6Addr>,
    /// The MTU the guest should use (DHCPv4 option 26, the RA's MTU option).
    pub mtu: u32,
    /// IPv4 name servers (option 6).
    pub dns4: Vec<Ipv4Addr>,
    /// IPv6 name servers (DHCPv6 option 23, RDNSS).
    pub dns6: Vec<Ipv6Addr>,
    /// Search domains (option 119, DHCPv6 24, DNSSL).
    pub search: Vec<String>,
    /// The local domain (option 15).
    pub domain: Option<String>,
    /// The guest's host name (option 12).
    pub hostname: Option<String>,
    /// DHCPv4 lease and DHCPv6 valid/preferred lifetime, in seconds.
    pub lease_secs: u32,
    /// Allow A=1 in the PIO when the pod's address is the guest's EUI-64
    /// address. Off: the guest gets its address from DHCPv6 only.
    pub slaac: bool,
}

impl NicConfig {
    /// A config with nothing to serve but the two MACs; fill in the rest.
    pub fn new(guest_mac: [u8; 6], server_mac: [u8; 6]) -> Self {
        NicConfig {
            guest_mac,
            server_mac,
            ipv4: None,
            gateway4: None,
            routes4: Vec::new(),
            server_id4: None,
            ipv6: Vec::new(),
            gateway6: None,
            routes6: Vec::new(),
            holds_default_v6: false,
            router_ll: None,
            mtu: 1500,
            dns4: Vec::new(),
            dns6: Vec::new(),
            search: Vec::new(),
            domain: None,
            hostname: None,
            lease_secs: DEFAULT_LEASE_SECS,
            slaac: true,
        }
    }
}

/// One day: the address is the pod's and never moves while the pod lives,
/// but a finite lease makes a guest that was moved to another pod (or kept
/// a stale address) renew, get a NAK and converge within half a day.
pub const DEFAULT_LEASE_SECS: u32 = 86_400;

#[derive(Debug, Clone, PartialEq, Eq)]
/// Why a NIC configuration cannot be served.
pub enum ConfigError {
    /// A prefix length past the family's bits.
    PrefixTooLong(u8),
    /// An MTU outside 576..=65535.
    MtuOutOfRange(u32),
    /// A domain name that cannot be encoded.
    BadName(String),
    /// An IPv4 address without a server identifier to answer from.
    NoServerId,
    /// A multicast MAC.
    MulticastMac,
    /// A lease under a minute.
    ZeroLease,
    /// This part does not fit one reply.
    TooLarge(&'static str),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::PrefixTooLong(p) => write!(f, "prefix length {p} is too long"),
            ConfigError::MtuOutOfRange(m) => write!(f, "MTU {m} is outside 576..=65535"),
            ConfigError::BadName(n) => write!(f, "{n:?} is not a valid domain name"),
            ConfigError::NoServerId => {
                write!(
                    f,
                    "an IPv4 address needs gateway4 or server_id4 as server identifier"
                )
            }
            ConfigError::MulticastMac => write!(f, "a MAC address is multicast"),
            ConfigError::ZeroLease => write!(f, "lease_secs must be at least 60"),
            ConfigError::TooLarge(what) => write!(f, "{what} does not fit one reply"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The DHCPv4 part, validated and encoded.
#[derive(Debug, Clone)]
pub struct V4 {
    pub addr: Ipv4Addr,
    pub prefix: u8,
    pub server_id: Ipv4Addr,
    /// Option 3, only when the gateway is inside the subnet.
    pub router: Option<Ipv4Addr>,
    /// RFC 3442 encoding, shared by options 121 and 249.
    pub classless: Vec<u8>,
}

/// The IPv6 part, validated and encoded.
#[derive(Debug, Clone)]
pub struct V6 {
    /// Source of RAs and DHCPv6 replies.
    pub source: Ipv6Addr,
    /// Answer NS for `source` (it is ours, not the pod's real gateway).
    pub answer_ns: bool,
    /// Addresses leased through IA_NA (global and ULA).
    pub leased: Vec<Ipv6Addr>,
    /// The ICMPv6 RA message (type 134, checksum zero) with every option.
    pub ra: Vec<u8>,
    /// DUID-LL of the server.
    pub duid: [u8; 10],
    /// RFC 1035-encoded domain list for option 24.
    pub domains: Vec<u8>,
}

/// A validated NIC: what the protocol engine answers from.
#[derive(Debug, Clone)]
pub struct Responder {
    pub(crate) cfg: NicConfig,
    pub(crate) v4: Option<V4>,
    pub(crate) v6: Option<V6>,
    /// Search list in RFC 1035 form (option 119 / DNSSL payload).
    pub(crate) search: Vec<u8>,
}

pub fn mask4(prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p.min(32))),
    }
}

pub fn net4(a: Ipv4Addr, prefix: u8) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(a) & mask4(prefix))
}

pub fn in_subnet4(a: Ipv4Addr, net: Ipv4Addr, prefix: u8) -> bool {
    net4(a, prefix) == net4(net, prefix)
}

pub fn net6(a: Ipv6Addr, prefix: u8) -> Ipv6Addr {
    let m = match prefix {
        0 => 0,
        p => u128::MAX << (128 - u32::from(p.min(128))),
    };
    Ipv6Addr::from(u128::from(a) & m)
}

pub fn is_link_local6(a: &Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// The modified EUI-64 interface identifier of a MAC (RFC 4291 2.5.1).
pub fn eui64(prefix: Ipv6Addr, mac: [u8; 6]) -> Ipv6Addr {
    let mut o = prefix.octets();
    o[8..16].copy_from_slice(&[
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]);
    Ipv6Addr::from(o)
}

fn check_names(names: &[String]) -> Result<Vec<u8>, ConfigError> {
    let mut out = Vec::new();
    for n in names {
        encode_names(std::slice::from_ref(n), &mut out)
            .ok_or_else(|| ConfigError::BadName(n.clone()))?;
    }
    Ok(out)
}

impl Responder {
    /// Validate `cfg` and encode what every reply shares.
    pub fn new(cfg: NicConfig) -> Result<Responder, ConfigError> {
        if cfg.guest_mac[0] & 1 == 1 || cfg.server_mac[0] & 1 == 1 {
            return Err(ConfigError::MulticastMac);
        }
        if !(576..=65_535).contains(&cfg.mtu) {
            return Err(ConfigError::MtuOutOfRange(cfg.mtu));
        }
        if cfg.lease_secs < 60 {
            return Err(ConfigError::ZeroLease);
        }
        for n in cfg.domain.iter().chain(cfg.hostname.iter()) {
            check_names(std::slice::from_ref(n))?;
        }
        let search = check_names(&cfg.search)?;
        if search.len() > 1024 {
            return Err(ConfigError::TooLarge("the search list"));
        }
        let v4 = super::dhcp4::prepare(&cfg)?;
        let v6 = super::ndp::prepare(&cfg, &search)?;
        let r = Responder {
            cfg,
            v4,
            v6,
            search,
        };
        r.check_sizes()?;
        Ok(r)
    }

    /// The configuration it answers from.
    pub fn config(&self) -> &NicConfig {
        &self.cfg
    }

    /// Whether periodic RAs should be sent on this NIC at all.
    pub fn serves_v6(&self) -> bool {
        self.v6.is_some()
    }

    /// Builds the largest replies once, so a config that cannot be answered
    /// in one frame is refused here, not silently truncated later.
    fn check_sizes(&self) -> Result<(), ConfigError> {
        let mut buf = [0u8; super::MAX_FRAME];
        if self.v4.is_some() && !super::dhcp4::essentials_fit(self) {
            return Err(ConfigError::TooLarge("DHCPv4 routes, DNS and MTU"));
        }
        if self.v6.is_some() {
            if self.unsolicited_ra(&mut buf).is_none() {
                return Err(ConfigError::TooLarge("the router advertisement"));
            }
            if !super::dhcp6::largest_fits(self) {
                return Err(ConfigError::TooLarge("the DHCPv6 reply"));
            }
        }
        Ok(())
    }
}

pub(crate) fn check_prefix(p: u8, max: u8) -> Result<(), ConfigError> {
    if p > max {
        return Err(ConfigError::PrefixTooLong(p));
    }
    Ok(())
}
