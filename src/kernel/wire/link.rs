//! Link messages (`RTM_NEWLINK`, `RTM_DELLINK`): the one parser of their
//! attributes podtap has.
//!
//! A dump is read raw ([`parse`]): a typed parse of every attribute of every
//! link (devconf arrays, IPv6 statistics, link info) took 3 ms for 129 links,
//! ten times the kernel's dump, for the dozen attributes podtap reads. Every
//! link dump podtap reads goes through this one walker: scan's (which
//! attach's survey reuses) and `kernel::links::list` (teardown, check,
//! attach's build step).

use rtnetlink::packet_route::link::InfoKind;

use super::{attributes, u32_at};
use crate::kernel::mac::MacAddr;

/// What scan, teardown and check need to know about a live link.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkState {
    /// The kernel's interface index.
    pub ifindex: u32,
    /// `ifi_type`: the link-layer type (`ARPHRD_*`, e.g. [`ARPHRD_ETHER`]).
    pub link_type: u16,
    /// The interface name now.
    pub name: String,
    /// The `IFLA_INFO_KIND` string ("tun", "bridge", "veth", ...); `None` for physical links.
    pub kind: Option<String>,
    /// `IFLA_GROUP` (0, the default group, when the message has none).
    pub group: u32,
    /// Whether the message carried `IFLA_GROUP` (the kernel always sends it).
    pub has_group: bool,
    /// The bridge (or other controller) the link is a port of.
    pub controller: Option<u32>,
    /// `IFLA_LINK` in this netns: the lower of a macvtap/macvlan/vlan (a
    /// veth's peer too, when it is in the same netns).
    pub lower: Option<u32>,
    /// `IFLA_LINK_NETNSID`: when set, [`lower`](Self::lower) is a link of
    /// the netns with this id, not of this one.
    pub link_netnsid: Option<i32>,
    /// The hardware address, when it is an Ethernet one.
    pub mac: Option<MacAddr>,
    /// MTU in bytes.
    pub mtu: u32,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// A loopback device (`IFF_LOOPBACK`).
    pub loopback: bool,
    /// `ifi_flags`: every `IFF_*` flag of the link.
    pub flags: u32,
    /// `IFLA_OPERSTATE` (RFC 2863, `IF_OPER_*`), when sent.
    pub oper_state: Option<u8>,
    /// Transmit queue length.
    pub txqlen: Option<u32>,
    /// `IFLA_IFALIAS`.
    pub alias: Option<String>,
    /// The tun flags, for a link of kind "tun".
    pub tun: Option<super::TunInfo>,
}

impl LinkState {
    /// Whether the link is a TAP (kind "tun"), a bridge or a macvtap: the kinds podtap creates.
    pub fn is_podtap_kind(&self) -> bool {
        self.is_kind(InfoKind::Tun)
            || self.is_kind(InfoKind::Bridge)
            || self.is_kind(InfoKind::MacVtap)
    }

    /// Whether the link's kind is `kind`.
    pub fn is_kind(&self, kind: InfoKind) -> bool {
        self.kind.as_deref() == Some(kind.to_string().as_str())
    }
}

/// `ARPHRD_ETHER`: an Ethernet link layer (linux/if_arp.h).
pub const ARPHRD_ETHER: u16 = 1;
/// `ARPHRD_LOOPBACK`.
pub const ARPHRD_LOOPBACK: u16 = 772;

// Attribute types of an RTM_NEWLINK (linux/if_link.h).
const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_LINK: u16 = 5;
const IFLA_MASTER: u16 = 10;
const IFLA_TXQLEN: u16 = 13;
const IFLA_OPERSTATE: u16 = 16;
const IFLA_LINKINFO: u16 = 18;
const IFLA_IFALIAS: u16 = 20;
const IFLA_GROUP: u16 = 27;
const IFLA_LINK_NETNSID: u16 = 37;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_INFO_DATA: u16 = 2;
/// `IFLA_AF_SPEC`: each address family's per-link configuration.
const IFLA_AF_SPEC: u16 = 26;
/// `sizeof(struct ifinfomsg)`.
const IFINFOMSG_LEN: usize = 16;
const IFF_UP: u32 = 1;
const IFF_LOOPBACK: u32 = 8;

/// The [`LinkState`] of one whole `RTM_NEWLINK` message (netlink header
/// included, as a dump hands it over); `None` for any other message.
pub fn parse_new(frame: &[u8]) -> Option<LinkState> {
    (super::kind(frame) == super::RTM_NEWLINK)
        .then(|| parse(super::payload(frame)))
        .flatten()
}

/// The [`LinkState`] of one RTM_NEWLINK payload (`struct ifinfomsg` and its
/// attributes); `None` when it is too short to be one.
pub fn parse(body: &[u8]) -> Option<LinkState> {
    let header = body.get(..IFINFOMSG_LEN)?;
    let flags = u32_at(header, 8)?;
    let mut s = LinkState {
        ifindex: u32_at(header, 4)?,
        link_type: u16::from_ne_bytes([header[2], header[3]]),
        up: flags & IFF_UP != 0,
        loopback: flags & IFF_LOOPBACK != 0,
        flags,
        ..LinkState::default()
    };
    for (kind, value, _) in attributes(&body[IFINFOMSG_LEN..]) {
        match kind {
            IFLA_ADDRESS => s.mac = MacAddr::from_bytes(value),
            IFLA_IFNAME => s.name = text(value),
            IFLA_MTU => s.mtu = u32_at(value, 0).unwrap_or_default(),
            IFLA_LINK => s.lower = u32_at(value, 0),
            IFLA_MASTER => s.controller = u32_at(value, 0),
            IFLA_TXQLEN => s.txqlen = u32_at(value, 0),
            IFLA_IFALIAS => s.alias = Some(text(value)),
            IFLA_GROUP => {
                s.group = u32_at(value, 0).unwrap_or_default();
                s.has_group = true;
            }
            IFLA_OPERSTATE => s.oper_state = value.first().copied(),
            IFLA_LINK_NETNSID => s.link_netnsid = i32_at(value),
            IFLA_LINKINFO => link_info(value, &mut s),
            _ => {}
        }
    }
    Some(s)
}

/// The kind (and for a tun, its flags) from an `IFLA_LINKINFO` value.
fn link_info(value: &[u8], s: &mut LinkState) {
    s.kind = attributes(value)
        .find(|(k, _, _)| *k == IFLA_INFO_KIND)
        .map(|(_, v, _)| text(v));
    if s.kind.as_deref() == Some("tun") {
        s.tun = attributes(value)
            .find(|(k, _, _)| *k == IFLA_INFO_DATA)
            .map(|(_, v, _)| super::tun::parse(attributes(v).map(|(k, v, _)| (k, v))));
    }
}

/// The native-endian `i32` a value starts with.
fn i32_at(v: &[u8]) -> Option<i32> {
    Some(i32::from_ne_bytes(v.get(..4)?.try_into().ok()?))
}

/// A NUL-terminated string attribute.
fn text(v: &[u8]) -> String {
    let end = v.iter().position(|b| *b == 0).unwrap_or(v.len());
    String::from_utf8_lossy(&v[..end]).into_owned()
}

/// The ifindex of a link that left its netns, from the payload of an
/// `RTM_DELLINK` announcement; `None` for anything else. A port leaving a
/// bridge is also announced as `RTM_DELLINK`, with family `AF_BRIDGE`: only
/// `AF_UNSPEC` means the link itself is gone.
pub fn deleted_ifindex(body: &[u8]) -> Option<u32> {
    // struct ifinfomsg: family(1) pad(1) type(2) index(4) ...
    (*body.first()? == 0).then(|| u32_at(body, 4)).flatten()
}

/// An RTM_NEWLINK message (netlink header included) without its
/// `IFLA_AF_SPEC`, or `None` when it has none or does not parse. That
/// attribute (IPv4 and IPv6 devconf arrays, IPv6 and ICMPv6 statistics) is
/// most of a link message; podtap reads nothing in it, and a typed parse
/// builds one value per entry.
pub fn without_af_spec(frame: &[u8]) -> Option<Vec<u8>> {
    super::without_attribute(frame, IFINFOMSG_LEN, IFLA_AF_SPEC)
}

#[cfg(test)]
#[path = "link_tests.rs"]
mod tests;
