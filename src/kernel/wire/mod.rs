//! The netlink wire format, read and written in one place: message frames,
//! attributes, and the link, route and next-hop messages podtap reads
//! ([`link`], [`tun`], [`route`], [`nexthop`]).
//!
//! The bottom of the kernel layer: plain bytes in, values out. No socket, no
//! system call, nothing of podtap's above it; every other kernel module that
//! looks inside a netlink datagram does it through these walkers.

pub mod link;
pub mod nexthop;
pub mod route;
pub mod tun;

pub use tun::TunInfo;

use rtnetlink::packet_core::NetlinkMessage;
use rtnetlink::packet_route::RouteNetlinkMessage;

/// `sizeof(struct nlmsghdr)`.
pub const NLMSG_HDRLEN: usize = 16;
/// `NLMSG_ERROR`: an error, or an ack (code 0).
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: the end of a dump.
pub const NLMSG_DONE: u16 = 3;
/// `NLM_F_DUMP_INTR`: the dump changed under the reader (linux/netlink.h).
pub const NLM_F_DUMP_INTR: u16 = 0x10;
/// `RTM_NEWLINK`, the type of every message of a link dump.
pub const RTM_NEWLINK: u16 = 16;
/// `RTM_DELLINK`, the announcement of a link that left.
pub const RTM_DELLINK: u16 = 17;
/// `NLA_TYPE_MASK`: an attribute's type without the nested and byte-order flags.
const NLA_TYPE_MASK: u16 = 0x3FFF;

/// `(type, sequence number, whole message)` of each netlink message in `buf`,
/// up to the first one that does not fit (a message cut short ends it).
/// Allocation-free: the link deleter child reads its acks with it.
pub fn frames(buf: &[u8]) -> impl Iterator<Item = (u16, u32, &[u8])> {
    let mut rest = buf;
    std::iter::from_fn(move || {
        let header = rest.get(..NLMSG_HDRLEN)?;
        let len = u32::from_ne_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let frame = rest.get(..len).filter(|_| len >= NLMSG_HDRLEN)?;
        let kind = u16::from_ne_bytes([header[4], header[5]]);
        let seq = u32::from_ne_bytes([header[8], header[9], header[10], header[11]]);
        rest = rest.get(((len + 3) & !3).min(rest.len())..)?;
        Some((kind, seq, frame))
    })
}

/// The payload of a message (after its header).
pub fn payload(frame: &[u8]) -> &[u8] {
    frame.get(NLMSG_HDRLEN..).unwrap_or_default()
}

/// The error code a control message (`NLMSG_DONE`, `NLMSG_ERROR`) carries:
/// 0, or a negative errno (which `kernel::errno::reply` reads).
pub fn code(frame: &[u8]) -> i32 {
    frame
        .get(NLMSG_HDRLEN..NLMSG_HDRLEN + 4)
        .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

/// The `nlmsg_type` of a message (0 when it is too short to have one).
pub fn kind(frame: &[u8]) -> u16 {
    frame
        .get(4..6)
        .map_or(0, |b| u16::from_ne_bytes([b[0], b[1]]))
}

/// The `nlmsg_flags` of a message.
pub fn flags(frame: &[u8]) -> u16 {
    frame
        .get(6..8)
        .map_or(0, |b| u16::from_ne_bytes([b[0], b[1]]))
}

/// Serialise `message` with `flags` and `seq` at the end of `buf`.
pub fn push(buf: &mut Vec<u8>, message: RouteNetlinkMessage, flags: u16, seq: u32) {
    let mut msg = NetlinkMessage::from(message);
    msg.header.flags = flags;
    msg.header.sequence_number = seq;
    msg.finalize();
    let at = buf.len();
    buf.resize(at + msg.buffer_len(), 0);
    msg.serialize(&mut buf[at..]);
}

/// A message of type `kind` with `flags`, `seq` and `body` (its family
/// header and attributes, already laid out) at the end of `buf`.
pub fn push_raw(buf: &mut Vec<u8>, kind: u16, flags: u16, seq: u32, body: &[u8]) {
    let len = u32::try_from(NLMSG_HDRLEN + body.len()).unwrap_or(u32::MAX);
    buf.extend_from_slice(&len.to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(&flags.to_ne_bytes());
    buf.extend_from_slice(&seq.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes());
    buf.extend_from_slice(body);
    buf.resize((buf.len() + 3) & !3, 0);
}

/// `RTM_NEWADDR`, the type of every message of an address dump.
pub const RTM_NEWADDR: u16 = 20;
/// `sizeof(struct ifaddrmsg)`.
const IFADDRMSG_LEN: usize = 8;
/// `IFA_LABEL`: an IPv4 address's label, by default its interface's name.
const IFA_LABEL: u16 = 3;

/// An RTM_NEWADDR message (netlink header included) without its
/// `IFA_LABEL`, or `None` when it has none or does not parse. podtap reads
/// no label; the kernel takes any bytes for one (an interface name need not
/// be UTF-8, and a label starts as that name), and rtnetlink's parser
/// refuses a message whose label is not UTF-8: one such interface with an
/// IPv4 address failed every scan of its pod.
pub fn address_without_label(frame: &[u8]) -> Option<Vec<u8>> {
    without_attribute(frame, IFADDRMSG_LEN, IFA_LABEL)
}

/// `RTM_NEWRULE` and `sizeof(struct fib_rule_hdr)`.
const RTM_NEWRULE: u16 = 32;
const FIB_RULE_HDR_LEN: usize = 12;
/// `FRA_IIFNAME`, `FRA_OIFNAME`: the interface names a rule matches.
const FRA_IIFNAME: u16 = 3;
const FRA_OIFNAME: u16 = 17;
/// `RTM_NEWTFILTER`, `sizeof(struct tcmsg)` and `TCA_OPTIONS`.
const RTM_NEWTFILTER: u16 = 44;
const TCMSG_LEN: usize = 20;
const TCA_OPTIONS: u16 = 2;

/// A message rtnetlink's parser refused, made readable, or `None`. The
/// kernel takes any bytes but '/', ':' and whitespace in an interface name,
/// and the parser refuses a name that is not UTF-8:
/// - a rule's `iif` or `oif` is written as UTF-8 (each bad sequence as
///   U+FFFD, as podtap shows such an interface's name);
/// - a tc filter loses its options (a flower filter's `indev` is such a
///   name): it then carries no redirect, so podtap reads it as a
///   stranger's filter, which it is, and teardown leaves it and its qdisc.
pub fn made_readable(kind: u16, frame: &[u8]) -> Option<Vec<u8>> {
    match kind {
        RTM_NEWRULE => with_utf8_names(frame, FIB_RULE_HDR_LEN, &[FRA_IIFNAME, FRA_OIFNAME]),
        RTM_NEWTFILTER => without_attribute(frame, TCMSG_LEN, TCA_OPTIONS),
        _ => None,
    }
}

/// `frame` with each attribute of `kinds` (a NUL-terminated string) that
/// is not UTF-8 written as UTF-8; `None` when none needed it or one does
/// not fit.
fn with_utf8_names(frame: &[u8], header: usize, kinds: &[u16]) -> Option<Vec<u8>> {
    rewritten(frame, header, |kind, value, whole, out| {
        let text = value.strip_suffix(&[0]).unwrap_or(value);
        let name = match kinds.contains(&kind).then(|| String::from_utf8_lossy(text)) {
            Some(std::borrow::Cow::Owned(name)) => name,
            _ => return kept(whole, out),
        };
        let Ok(len) = u16::try_from(4 + name.len() + 1) else {
            return kept(whole, out);
        };
        out.extend_from_slice(&len.to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        true
    })
}

/// `frame` (a message whose own header of `header` bytes follows the
/// netlink one) without its attributes of type `kind`, or `None` when it has
/// none or one that does not fit (the message is then left whole to its
/// parser).
fn without_attribute(frame: &[u8], header: usize, kind: u16) -> Option<Vec<u8>> {
    rewritten(frame, header, |k, _, whole, out| {
        k == kind || kept(whole, out)
    })
}

/// `whole` (an attribute) appended to `out` unchanged: false, "not changed".
fn kept(whole: &[u8], out: &mut Vec<u8>) -> bool {
    out.extend_from_slice(whole);
    false
}

/// `frame` (a message whose own header of `header` bytes follows the
/// netlink one) with each attribute passed through `each`, which appends
/// what stands for it to the message being built and says whether it
/// changed it; `None` when nothing changed or an attribute does not fit.
fn rewritten(
    frame: &[u8],
    header: usize,
    mut each: impl FnMut(u16, &[u8], &[u8], &mut Vec<u8>) -> bool,
) -> Option<Vec<u8>> {
    let start = NLMSG_HDRLEN + header;
    let attrs = frame.get(start..)?;
    let mut out = frame.get(..start)?.to_vec();
    let (mut changed, mut read) = (false, 0);
    for (kind, value, whole) in attributes(attrs) {
        read += whole.len();
        changed |= each(kind, value, whole, &mut out);
        out.resize((out.len() + 3) & !3, 0);
    }
    if !changed || attrs.len() - read >= 4 {
        return None;
    }
    let len = u32::try_from(out.len()).ok()?;
    out[..4].copy_from_slice(&len.to_ne_bytes());
    Some(out)
}

/// `(type, value, whole attribute with its padding)` of each netlink
/// attribute in `buf`, up to the first one that does not fit.
pub fn attributes(buf: &[u8]) -> impl Iterator<Item = (u16, &[u8], &[u8])> {
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

/// The native-endian `u32` at `at` in `b`.
pub fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
