//! Bounded byte access and the Ethernet/IPv4/IPv6/UDP/ICMPv6 framing shared
//! by the three protocols. Every read goes through `slice::get`, every write
//! through [`Writer`], so no input and no buffer size can cause a panic.

use std::net::{Ipv4Addr, Ipv6Addr};

pub const ETH_HDR: usize = 14;
pub const IPV4_HDR: usize = 20;
pub const IPV6_HDR: usize = 40;
pub const UDP_HDR: usize = 8;
pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_ICMPV6: u8 = 58;
pub const BROADCAST_MAC: [u8; 6] = [0xff; 6];

/// How many IPv6 extension headers the parser walks before it gives up.
pub const MAX_EXT_HEADERS: usize = 4;

pub fn be16(b: &[u8], off: usize) -> Option<u16> {
    let s = b.get(off..off.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

pub fn byte(b: &[u8], off: usize) -> Option<u8> {
    b.get(off).copied()
}

pub fn array<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    let s = b.get(off..off.checked_add(N)?)?;
    let mut a = [0u8; N];
    a.copy_from_slice(s);
    Some(a)
}

pub fn v4_at(b: &[u8], off: usize) -> Option<Ipv4Addr> {
    array::<4>(b, off).map(Ipv4Addr::from)
}

pub fn v6_at(b: &[u8], off: usize) -> Option<Ipv6Addr> {
    array::<16>(b, off).map(Ipv6Addr::from)
}

/// A writer over a caller's fixed buffer. A write that does not fit marks
/// the writer failed and every later write is a no-op; `finish` then
/// returns `None`. Nothing ever grows.
pub struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
    ok: bool,
}

impl<'a> Writer<'a> {
    pub fn new(buf: &'a mut [u8], start: usize) -> Self {
        let ok = start <= buf.len();
        Writer {
            buf,
            pos: start,
            ok,
        }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn put(&mut self, bytes: &[u8]) {
        if !self.ok {
            return;
        }
        let end = self.pos.saturating_add(bytes.len());
        match self.buf.get_mut(self.pos..end) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.pos = end;
            }
            None => self.ok = false,
        }
    }

    pub fn u8(&mut self, v: u8) {
        self.put(&[v]);
    }

    pub fn u16(&mut self, v: u16) {
        self.put(&v.to_be_bytes());
    }

    pub fn u32(&mut self, v: u32) {
        self.put(&v.to_be_bytes());
    }

    pub fn zeros(&mut self, n: usize) {
        if !self.ok {
            return;
        }
        let end = self.pos.saturating_add(n);
        match self.buf.get_mut(self.pos..end) {
            Some(dst) => {
                dst.fill(0);
                self.pos = end;
            }
            None => self.ok = false,
        }
    }

    /// Overwrites two bytes already written (a length filled in later).
    pub fn patch_u16(&mut self, at: usize, v: u16) {
        match self.buf.get_mut(at..at.saturating_add(2)) {
            Some(dst) if at.saturating_add(2) <= self.pos => dst.copy_from_slice(&v.to_be_bytes()),
            _ => self.ok = false,
        }
    }

    pub fn finish(self) -> Option<usize> {
        self.ok.then_some(self.pos)
    }
}

/// One's-complement sum of 16-bit words, folded later by [`fold`].
pub fn sum16(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc = acc.wrapping_add(u32::from(u16::from_be_bytes([c[0], c[1]])));
    }
    if let [last] = chunks.remainder() {
        acc = acc.wrapping_add(u32::from(*last) << 8);
    }
    acc
}

pub fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    let [_, _, hi, lo] = acc.to_be_bytes();
    !u16::from_be_bytes([hi, lo])
}

/// The checksum of an upper-layer packet over IPv6 (RFC 8200 8.1).
pub fn checksum6(src: &Ipv6Addr, dst: &Ipv6Addr, proto: u8, payload: &[u8]) -> u16 {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let mut acc = sum16(0, &src.octets());
    acc = sum16(acc, &dst.octets());
    acc = sum16(acc, &len.to_be_bytes());
    acc = sum16(acc, &[0, 0, 0, proto]);
    fold(sum16(acc, payload))
}

/// The UDP checksum over IPv4; 0 is sent as 0xffff (RFC 768).
pub fn udp_checksum4(src: Ipv4Addr, dst: Ipv4Addr, udp: &[u8]) -> u16 {
    let len = u16::try_from(udp.len()).unwrap_or(u16::MAX);
    let mut acc = sum16(0, &src.octets());
    acc = sum16(acc, &dst.octets());
    acc = sum16(acc, &[0, PROTO_UDP]);
    acc = sum16(acc, &len.to_be_bytes());
    match fold(sum16(acc, udp)) {
        0 => 0xffff,
        c => c,
    }
}

pub fn write_eth(buf: &mut [u8], dst: [u8; 6], src: [u8; 6], ethertype: u16) -> Option<()> {
    let h = buf.get_mut(..ETH_HDR)?;
    h[..6].copy_from_slice(&dst);
    h[6..12].copy_from_slice(&src);
    h[12..14].copy_from_slice(&ethertype.to_be_bytes());
    Some(())
}

/// Fills Ethernet, IPv4 and UDP headers in front of a UDP payload that is
/// already at `ETH_HDR + IPV4_HDR + UDP_HDR..end`. Returns the frame length.
pub struct Udp4 {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub sport: u16,
    pub dport: u16,
}

impl Udp4 {
    pub fn frame(&self, buf: &mut [u8], end: usize) -> Option<usize> {
        let frame = buf.get_mut(..end)?;
        write_eth(frame, self.dst_mac, self.src_mac, ETHERTYPE_IPV4)?;
        let ip_len = u16::try_from(end.checked_sub(ETH_HDR)?).ok()?;
        let udp_len = ip_len.checked_sub(20)?;
        let ip = frame.get_mut(ETH_HDR..ETH_HDR + IPV4_HDR)?;
        ip[..12].copy_from_slice(&[0x45, 0, 0, 0, 0, 0, 0, 0, 64, PROTO_UDP, 0, 0]);
        ip[12..16].copy_from_slice(&self.src.octets());
        ip[16..20].copy_from_slice(&self.dst.octets());
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        let csum = fold(sum16(0, ip));
        ip[10..12].copy_from_slice(&csum.to_be_bytes());
        let udp = frame.get_mut(ETH_HDR + IPV4_HDR..)?;
        udp.get_mut(..2)?.copy_from_slice(&self.sport.to_be_bytes());
        udp.get_mut(2..4)?
            .copy_from_slice(&self.dport.to_be_bytes());
        udp.get_mut(4..6)?.copy_from_slice(&udp_len.to_be_bytes());
        udp.get_mut(6..8)?.fill(0);
        let c = udp_checksum4(self.src, self.dst, udp);
        udp.get_mut(6..8)?.copy_from_slice(&c.to_be_bytes());
        Some(end)
    }
}

/// Fills Ethernet and IPv6 headers in front of an upper-layer payload at
/// `ETH_HDR + IPV6_HDR..end`, and the payload's checksum at `csum_at`
/// (offset inside the payload).
pub struct Ip6 {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub next: u8,
    pub hop_limit: u8,
}

impl Ip6 {
    pub fn frame(&self, buf: &mut [u8], end: usize, csum_at: usize) -> Option<usize> {
        let frame = buf.get_mut(..end)?;
        write_eth(frame, self.dst_mac, self.src_mac, ETHERTYPE_IPV6)?;
        let plen = u16::try_from(end.checked_sub(ETH_HDR + IPV6_HDR)?).ok()?;
        let ip = frame.get_mut(ETH_HDR..ETH_HDR + IPV6_HDR)?;
        ip[..4].copy_from_slice(&[0x60, 0, 0, 0]);
        ip[4..6].copy_from_slice(&plen.to_be_bytes());
        ip[6] = self.next;
        ip[7] = self.hop_limit;
        ip[8..24].copy_from_slice(&self.src.octets());
        ip[24..40].copy_from_slice(&self.dst.octets());
        let payload = frame.get_mut(ETH_HDR + IPV6_HDR..)?;
        payload.get_mut(csum_at..csum_at + 2)?.fill(0);
        let c = checksum6(&self.src, &self.dst, self.next, payload);
        let c = if self.next == PROTO_UDP && c == 0 {
            0xffff
        } else {
            c
        };
        payload
            .get_mut(csum_at..csum_at + 2)?
            .copy_from_slice(&c.to_be_bytes());
        Some(end)
    }
}

/// The multicast MAC for an IPv6 multicast address (RFC 2464 7).
pub fn multicast_mac(dst: &Ipv6Addr) -> [u8; 6] {
    let o = dst.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

/// A parsed IPv6 packet: addresses, the final next-header and its payload
/// (bounded by the payload length, not by the frame's padding).
pub struct Ip6Packet<'a> {
    pub src: Ipv6Addr,
    pub hop_limit: u8,
    pub next: u8,
    pub payload: &'a [u8],
}

/// Parses an IPv6 header after Ethernet, walking at most
/// [`MAX_EXT_HEADERS`] hop-by-hop / routing / destination-options headers.
/// Fragments are refused: a DHCPv6 or NDP message we answer fits one frame.
pub fn parse_ip6(ip: &[u8]) -> Option<Ip6Packet<'_>> {
    if byte(ip, 0)? >> 4 != 6 {
        return None;
    }
    let plen = usize::from(be16(ip, 4)?);
    let body = ip.get(IPV6_HDR..IPV6_HDR.checked_add(plen)?)?;
    let mut next = byte(ip, 6)?;
    let mut off = 0usize;
    for _ in 0..=MAX_EXT_HEADERS {
        match next {
            0 | 43 | 60 => {
                let len = (usize::from(byte(body, off + 1)?) + 1) * 8;
                next = byte(body, off)?;
                off = off.checked_add(len)?;
            }
            44 => return None,
            _ => {
                return Some(Ip6Packet {
                    src: v6_at(ip, 8)?,
                    hop_limit: byte(ip, 7)?,
                    next,
                    payload: body.get(off..)?,
                })
            }
        }
    }
    None
}

/// An Ethernet header and what follows it.
pub struct EthFrame<'a> {
    pub src: [u8; 6],
    pub ethertype: u16,
    pub payload: &'a [u8],
}

/// Reads an Ethernet header. 802.1Q / 802.1ad tagged frames are not for
/// us and yield `None`.
pub fn parse_eth(frame: &[u8]) -> Option<EthFrame<'_>> {
    let ethertype = be16(frame, 12)?;
    if matches!(ethertype, 0x8100 | 0x88a8 | 0x9100) {
        return None;
    }
    Some(EthFrame {
        src: array(frame, 6)?,
        ethertype,
        payload: frame.get(ETH_HDR..)?,
    })
}

/// Encodes domain names in RFC 1035 wire form (no compression), appending to
/// `out`. Returns `None` for a label over 63 bytes, an empty label inside a
/// name, or a name over 255 bytes.
pub fn encode_names(names: &[String], out: &mut Vec<u8>) -> Option<()> {
    for name in names {
        let start = out.len();
        for label in name.trim_end_matches('.').split('.') {
            if label.is_empty() || label.len() > 63 {
                return None;
            }
            out.push(u8::try_from(label.len()).ok()?);
            out.extend_from_slice(label.as_bytes());
        }
        out.push(0);
        if out.len() - start > 255 {
            return None;
        }
    }
    Some(())
}
