//! Link requests: list links with their groups, configure a TAP, delete by group.

use std::collections::BTreeMap;

use rtnetlink::packet_route::link::{
    InfoKind, LinkAttribute, LinkExtentMask, LinkFlags, LinkInfo, LinkMessage,
};
use rtnetlink::{Handle, LinkUnspec};

use super::batch::Batch;
use super::mac::MacAddr;
use super::unlist::NLMSG_HDRLEN;
use crate::error::KernelError;
use rtnetlink::packet_route::RouteNetlinkMessage;

/// What teardown and check need to know about a live link.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkState {
    /// The kernel's interface index.
    pub ifindex: u32,
    /// The interface name now.
    pub name: String,
    /// The `IFLA_INFO_KIND` string ("tun", "bridge", "veth", ...); `None` for physical links.
    pub kind: Option<String>,
    /// `IFLA_GROUP`.
    pub group: u32,
    /// The bridge (or other controller) the link is a port of.
    pub controller: Option<u32>,
    /// `IFLA_LINK` in this netns: the lower of a macvtap/macvlan/vlan (a
    /// veth's peer too, when it is in the same netns).
    pub lower: Option<u32>,
    /// The hardware address, when it is an Ethernet one.
    pub mac: Option<MacAddr>,
    /// MTU in bytes.
    pub mtu: u32,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// Transmit queue length.
    pub txqlen: Option<u32>,
    /// `IFLA_IFALIAS`.
    pub alias: Option<String>,
    /// The tun flags, for a link of kind "tun".
    pub tun: Option<super::tun_info::TunInfo>,
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

/// All links of the netns by ifindex.
///
/// Dumped on the batch socket and read raw: a typed parse of every
/// attribute of every link (devconf arrays, IPv6 statistics, link info)
/// took 3 ms for 129 links, ten times the kernel's dump, for the ten
/// attributes podtap reads.
pub fn list(batch: &Batch) -> Result<BTreeMap<u32, LinkState>, KernelError> {
    let mut out = BTreeMap::new();
    batch
        .dump_raw(dump_request(), |frame| {
            // The payload follows the 16-byte netlink header.
            if let Some(s) = frame.get(16..).and_then(parse_link) {
                out.insert(s.ifindex, s);
            }
        })
        .map_err(|e| super::netlink::kernel_error(&e))?
        .map_err(KernelError::from)?;
    Ok(out)
}

/// The request that dumps every link of the netns, without per-link
/// statistics: nothing in podtap reads them, and they are most of a dump.
pub fn dump_request() -> RouteNetlinkMessage {
    let mut msg = LinkMessage::default();
    msg.attributes
        .push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
    RouteNetlinkMessage::GetLink(msg)
}

// Attribute types of an RTM_NEWLINK (linux/if_link.h).
const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_LINK: u16 = 5;
const IFLA_MASTER: u16 = 10;
const IFLA_TXQLEN: u16 = 13;
const IFLA_LINKINFO: u16 = 18;
const IFLA_IFALIAS: u16 = 20;
const IFLA_GROUP: u16 = 27;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_INFO_DATA: u16 = 2;
/// `NLA_TYPE_MASK`: the type without the nested and byte-order flags.
const NLA_TYPE_MASK: u16 = 0x3FFF;
/// `sizeof(struct ifinfomsg)`.
const IFINFOMSG_LEN: usize = 16;
const IFF_UP: u32 = 1;

/// `IFLA_AF_SPEC`: each address family's per-link configuration.
const IFLA_AF_SPEC: u16 = 26;
/// `RTM_NEWLINK`, the type of every message of a link dump.
pub const RTM_NEWLINK: u16 = 16;

/// An RTM_NEWLINK message (netlink header included) without its
/// `IFLA_AF_SPEC`, or `None` when it has none or does not parse. That
/// attribute (IPv4 and IPv6 devconf arrays, IPv6 and ICMPv6 statistics) is
/// most of a link message; podtap reads nothing in it, and a typed parse
/// builds one value per entry.
pub fn without_af_spec(frame: &[u8]) -> Option<Vec<u8>> {
    let start = NLMSG_HDRLEN + IFINFOMSG_LEN;
    let head = frame.get(..start)?;
    let attrs = frame.get(start..)?;
    let mut out = head.to_vec();
    let (mut found, mut read) = (false, 0);
    for (kind, _, whole) in attributes(attrs) {
        read += whole.len();
        if kind == IFLA_AF_SPEC {
            found = true;
        } else {
            out.extend_from_slice(whole);
            out.resize((out.len() + 3) & !3, 0);
        }
    }
    // An attribute that does not fit: leave the message whole to its parser.
    if !found || attrs.len() - read >= 4 {
        return None;
    }
    let len = u32::try_from(out.len()).ok()?;
    out[..4].copy_from_slice(&len.to_ne_bytes());
    Some(out)
}

/// The [`LinkState`] of one RTM_NEWLINK payload (`struct ifinfomsg` and its
/// attributes); `None` when it is too short to be one.
fn parse_link(body: &[u8]) -> Option<LinkState> {
    let header = body.get(..IFINFOMSG_LEN)?;
    let u32_at = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let flags = u32_at(header, 8)?;
    let mut s = LinkState {
        ifindex: u32_at(header, 4)?,
        up: flags & IFF_UP != 0,
        ..LinkState::default()
    };
    let text = |v: &[u8]| {
        let end = v.iter().position(|b| *b == 0).unwrap_or(v.len());
        String::from_utf8_lossy(&v[..end]).into_owned()
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
            IFLA_GROUP => s.group = u32_at(value, 0).unwrap_or_default(),
            IFLA_LINKINFO => {
                s.kind = attributes(value)
                    .find(|(k, _, _)| *k == IFLA_INFO_KIND)
                    .map(|(_, v, _)| text(v));
                if s.kind.as_deref() == Some("tun") {
                    s.tun = attributes(value)
                        .find(|(k, _, _)| *k == IFLA_INFO_DATA)
                        .map(|(_, v, _)| {
                            super::tun_info::parse(attributes(v).map(|(k, v, _)| (k, v)))
                        });
                }
            }
            _ => {}
        }
    }
    Some(s)
}

/// `(type, value, whole attribute with its padding)` of each netlink
/// attribute in `buf`, up to the first one that does not fit.
fn attributes(buf: &[u8]) -> impl Iterator<Item = (u16, &[u8], &[u8])> {
    let mut rest = buf;
    std::iter::from_fn(move || {
        let len = usize::from(u16::from_ne_bytes([*rest.first()?, *rest.get(1)?]));
        let kind = u16::from_ne_bytes([*rest.get(2)?, *rest.get(3)?]) & NLA_TYPE_MASK;
        let value = rest.get(4..len)?;
        let (whole, tail) = rest.split_at(((len + 3) & !3).min(rest.len()));
        rest = tail;
        Some((kind, value, whole))
    })
}

/// The parts of a link message podtap reads.
pub fn link_state(msg: &LinkMessage) -> LinkState {
    let mut s = LinkState {
        ifindex: msg.header.index,
        up: msg.header.flags.contains(LinkFlags::Up),
        ..LinkState::default()
    };
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::IfName(n) => s.name = n.clone(),
            LinkAttribute::Group(g) => s.group = *g,
            LinkAttribute::Controller(c) => s.controller = Some(*c),
            LinkAttribute::Link(l) => s.lower = Some(*l),
            LinkAttribute::Mtu(m) => s.mtu = *m,
            LinkAttribute::TxQueueLen(q) => s.txqlen = Some(*q),
            LinkAttribute::IfAlias(a) => s.alias = Some(a.clone()),
            LinkAttribute::Address(a) => s.mac = MacAddr::from_bytes(a),
            LinkAttribute::LinkInfo(infos) => {
                s.kind = infos.iter().find_map(|i| match i {
                    LinkInfo::Kind(k) => Some(k.to_string()),
                    _ => None,
                });
                s.tun = super::tun_info::from_typed(infos);
            }
            _ => {}
        }
    }
    s
}

/// MTU, group and marker for a freshly made TAP, plus its bridge when
/// bridged, and up when `up`.
pub async fn configure_tap(
    handle: &Handle,
    ifindex: u32,
    mtu: u32,
    group: u32,
    alias: &str,
    controller: Option<u32>,
    up: bool,
) -> Result<(), KernelError> {
    let msg = tap_settings(ifindex, mtu, group, alias, controller, up);
    Ok(handle.link().set(msg).execute().await?)
}

/// The message [`configure_tap`] sends (an `RTM_SETLINK`).
pub fn tap_settings(
    ifindex: u32,
    mtu: u32,
    group: u32,
    alias: &str,
    controller: Option<u32>,
    up: bool,
) -> LinkMessage {
    let mut b = LinkUnspec::new_with_index(ifindex)
        .mtu(mtu)
        .link_group(group)
        .alias(alias);
    if up {
        b = b.up();
    }
    if let Some(c) = controller {
        b = b.controller(c);
    }
    b.build()
}

/// The message [`set_up`] sends (an `RTM_SETLINK`).
pub fn up_settings(ifindex: u32) -> LinkMessage {
    LinkUnspec::new_with_index(ifindex).up().build()
}

/// Bring a link up.
pub async fn set_up(handle: &Handle, ifindex: u32) -> Result<(), KernelError> {
    let msg = up_settings(ifindex);
    Ok(handle.link().set(msg).execute().await?)
}

/// The request that sets a link's transmit queue length.
pub fn set_txqlen(ifindex: u32, txqlen: u32) -> RouteNetlinkMessage {
    let msg = LinkUnspec::new_with_index(ifindex)
        .txqueuelen(txqlen)
        .build();
    RouteNetlinkMessage::SetLink(msg)
}

/// Move a link into link group `group` (0: the default group).
pub async fn set_group(handle: &Handle, ifindex: u32, group: u32) -> Result<(), KernelError> {
    let msg = LinkUnspec::new_with_index(ifindex)
        .link_group(group)
        .build();
    Ok(handle.link().set(msg).execute().await?)
}

/// Delete every link in `group` with one request: one RCU grace period for all of them.
pub async fn delete_group(handle: &Handle, group: u32) -> Result<(), KernelError> {
    let mut msg = LinkMessage::default();
    msg.attributes.push(LinkAttribute::Group(group));
    Ok(handle.link().del_with_message(msg).execute().await?)
}

/// Delete one link.
pub async fn delete(handle: &Handle, ifindex: u32) -> Result<(), KernelError> {
    Ok(handle.link().del(ifindex).execute().await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_core::NetlinkMessage;

    fn message(index: u32, up: bool, attributes: Vec<LinkAttribute>) -> LinkMessage {
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        if up {
            msg.header.flags = LinkFlags::Up | LinkFlags::Broadcast;
        }
        msg.attributes = attributes;
        msg
    }

    /// The payload of `msg` as the kernel sends it (after the netlink header).
    fn wire(msg: LinkMessage) -> Vec<u8> {
        let mut nl = NetlinkMessage::from(RouteNetlinkMessage::NewLink(msg));
        nl.finalize();
        let mut buf = vec![0u8; nl.buffer_len()];
        nl.serialize(&mut buf);
        buf[16..].to_vec()
    }

    #[test]
    fn the_raw_reader_agrees_with_the_typed_parse() {
        let msg = message(
            7,
            true,
            vec![
                LinkAttribute::IfName("tap_eth0".into()),
                LinkAttribute::Mtu(9000),
                LinkAttribute::TxQueueLen(1000),
                LinkAttribute::Group(1_885_613_138),
                LinkAttribute::Controller(4),
                LinkAttribute::Link(2),
                LinkAttribute::IfAlias("podtap:pod-1".into()),
                LinkAttribute::Address(vec![2, 0xaa, 0xbb, 0xcc, 0xdd, 0xee]),
                LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Tun)]),
            ],
        );
        let typed = link_state(&msg);
        assert_eq!(parse_link(&wire(msg)), Some(typed.clone()));
        assert_eq!(typed.kind.as_deref(), Some("tun"));
        assert!(typed.up);

        let bare = message(1, false, vec![LinkAttribute::IfName("lo".into())]);
        let parsed = parse_link(&wire(bare.clone()));
        assert_eq!(parsed, Some(link_state(&bare)));
        assert_eq!(parsed.map(|l| l.up), Some(false));
    }

    #[test]
    fn a_short_or_cut_payload_reads_as_far_as_it_goes() {
        assert_eq!(parse_link(&[0u8; 8]), None);
        let msg = message(
            3,
            false,
            vec![
                LinkAttribute::IfName("eth0".into()),
                LinkAttribute::Mtu(1500),
            ],
        );
        let full = wire(msg);
        // The last attribute cut off: the ones before it still count.
        let cut = parse_link(&full[..full.len() - 2]).expect("a header");
        assert_eq!((cut.ifindex, cut.name.as_str(), cut.mtu), (3, "eth0", 0));
    }

    #[test]
    fn a_dumped_link_loses_only_its_af_spec() {
        use rtnetlink::packet_route::link::{AfSpecInet6, AfSpecUnspec, In6AddrGenMode};
        let kept = vec![
            LinkAttribute::IfName("eth0".into()),
            LinkAttribute::Mtu(1500),
            LinkAttribute::Address(vec![2, 0xaa, 0xbb, 0xcc, 0xdd, 0xee]),
        ];
        let mut all = kept.clone();
        all.insert(
            1,
            LinkAttribute::AfSpecUnspec(vec![AfSpecUnspec::Inet6(vec![AfSpecInet6::AddrGenMode(
                In6AddrGenMode::None,
            )])]),
        );
        let mut nl = NetlinkMessage::from(RouteNetlinkMessage::NewLink(message(3, true, all)));
        nl.finalize();
        let mut frame = vec![0u8; nl.buffer_len()];
        nl.serialize(&mut frame);

        let slim = without_af_spec(&frame).expect("it had an AF_SPEC");
        let parsed = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&slim).unwrap();
        let rtnetlink::packet_core::NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(got)) =
            parsed.payload
        else {
            panic!("not a link message");
        };
        assert_eq!(got, message(3, true, kept));
        assert_eq!(without_af_spec(&slim), None, "nothing left to take out");
        assert_eq!(without_af_spec(&frame[..20]), None);
        // The last attribute cut short: the message is left to its parser.
        assert_eq!(without_af_spec(&frame[..frame.len() - 6]), None);
    }
}
