//! DHCPv4 (RFC 2131/2132, classless routes RFC 3442, rapid commit RFC 4039,
//! client identifier echo RFC 6842, long options RFC 3396).
//!
//! Stateless: every answer derives from the NIC config and the request.

use std::net::Ipv4Addr;

use super::config::{
    check_prefix, in_subnet4, mask4, net4, ConfigError, NicConfig, Responder, Route4, V4,
};
use super::wire::{
    array, be16, byte, v4_at, Udp4, Writer, BROADCAST_MAC, ETH_HDR, IPV4_HDR, PROTO_UDP, UDP_HDR,
};

pub const SERVER_PORT: u16 = 67;
pub const CLIENT_PORT: u16 = 68;
const BOOTP_FIXED: usize = 236;
const COOKIE: [u8; 4] = [99, 130, 83, 99];
/// Where the DHCP message starts in a reply frame.
const PAYLOAD_AT: usize = ETH_HDR + IPV4_HDR + UDP_HDR;
/// The smallest IP datagram every DHCP client accepts (RFC 2131 2).
const MIN_DATAGRAM: usize = 576;

pub const DISCOVER: u8 = 1;
pub const OFFER: u8 = 2;
pub const REQUEST: u8 = 3;
pub const ACK: u8 = 5;
pub const NAK: u8 = 6;
pub const INFORM: u8 = 8;

/// The fields of a client message that an answer depends on. Slices point
/// into the received frame; nothing is copied or allocated.
#[derive(Debug, Default, Clone, Copy)]
pub struct Request<'a> {
    pub xid: [u8; 4],
    pub flags: u16,
    pub ciaddr: Option<Ipv4Addr>,
    pub chaddr: [u8; 16],
    pub msg_type: u8,
    pub requested: Option<Ipv4Addr>,
    pub server_id: Option<Ipv4Addr>,
    pub client_id: Option<&'a [u8]>,
    pub rapid_commit: bool,
    pub max_size: Option<u16>,
    overload: u8,
}

/// Walks one options area. Returns `None` when an option runs past the
/// area: such a message is dropped. Each step advances at least one byte,
/// so the work is bounded by the area's length.
fn scan<'a>(area: &'a [u8], req: &mut Request<'a>, main: bool) -> Option<()> {
    let mut i = 0usize;
    while let Some(code) = byte(area, i) {
        match code {
            0 => i += 1,
            255 => return Some(()),
            _ => {
                let len = usize::from(byte(area, i + 1)?);
                let data = area.get(i + 2..i + 2 + len)?;
                take_option(req, code, data, main);
                i += 2 + len;
            }
        }
    }
    Some(())
}

/// The first occurrence of each option wins; overload (52) counts only in
/// the main options area, so `file`/`sname` cannot loop back.
fn take_option<'a>(req: &mut Request<'a>, code: u8, data: &'a [u8], main: bool) {
    match (code, data.len()) {
        (53, 1) if req.msg_type == 0 => req.msg_type = data[0],
        (50, 4) if req.requested.is_none() => req.requested = v4_at(data, 0),
        (54, 4) if req.server_id.is_none() => req.server_id = v4_at(data, 0),
        (61, 1..) if req.client_id.is_none() => req.client_id = Some(data),
        (80, 0) => req.rapid_commit = true,
        (57, 2) if req.max_size.is_none() => req.max_size = be16(data, 0),
        (52, 1) if main && req.overload == 0 => req.overload = data[0] & 3,
        _ => {}
    }
}

/// Parses a BOOTP/DHCP message (UDP payload).
pub fn parse(msg: &[u8]) -> Option<Request<'_>> {
    if byte(msg, 0)? != 1 || byte(msg, 1)? != 1 || byte(msg, 2)? != 6 {
        return None;
    }
    if array::<4>(msg, BOOTP_FIXED)? != COOKIE || array::<4>(msg, 24)? != [0; 4] {
        return None; // not DHCP, or relayed (giaddr set): not from our guest
    }
    let ciaddr = v4_at(msg, 12)?;
    let mut req = Request {
        xid: array(msg, 4)?,
        flags: be16(msg, 10)?,
        ciaddr: (!ciaddr.is_unspecified()).then_some(ciaddr),
        chaddr: array(msg, 28)?,
        ..Request::default()
    };
    scan(msg.get(BOOTP_FIXED + 4..)?, &mut req, true)?;
    if req.overload & 1 != 0 {
        scan(msg.get(108..236)?, &mut req, false)?;
    }
    if req.overload & 2 != 0 {
        scan(msg.get(44..108)?, &mut req, false)?;
    }
    (req.msg_type != 0).then_some(req)
}

/// What to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Offer,
    Ack { rapid: bool },
    InformAck,
    Nak,
}

/// The answer to a message, or `None` for silence (DECLINE, RELEASE, a
/// REQUEST for another server, anything unknown).
pub fn decide(v4: &V4, req: &Request<'_>) -> Option<Answer> {
    let ok = |a: Ipv4Addr| {
        if a == v4.addr {
            Answer::Ack { rapid: false }
        } else {
            Answer::Nak
        }
    };
    match req.msg_type {
        DISCOVER if req.rapid_commit => Some(Answer::Ack { rapid: true }),
        DISCOVER => Some(Answer::Offer),
        INFORM => Some(Answer::InformAck),
        REQUEST => match (req.server_id, req.requested, req.ciaddr) {
            (Some(sid), _, _) if sid != v4.server_id => None,
            // SELECTING (server id) or INIT-REBOOT (no server id).
            (_, Some(want), _) => Some(ok(want)),
            // RENEWING / REBINDING: the address is in ciaddr.
            (_, None, Some(have)) => Some(ok(have)),
            (_, None, None) => Some(Answer::Nak),
        },
        _ => None,
    }
}

/// Handles a frame already known to come from the guest MAC; `ip` starts at
/// the IPv4 header.
pub fn handle(r: &Responder, ip: &[u8], out: &mut [u8]) -> Option<usize> {
    let v4 = r.v4.as_ref()?;
    let udp = udp_payload(ip)?;
    let req = parse(udp)?;
    if req.chaddr[..6] != r.cfg.guest_mac {
        return None;
    }
    let answer = decide(v4, &req)?;
    build(r, v4, &req, answer, out)
}

/// The UDP payload of an unfragmented IPv4/UDP datagram to port 67, bounded
/// by the IP total length and the UDP length (not the frame's padding).
/// The UDP checksum is not verified: offloaded senders leave it partial.
fn udp_payload(ip: &[u8]) -> Option<&[u8]> {
    let vihl = byte(ip, 0)?;
    let ihl = usize::from(vihl & 0x0f) * 4;
    if vihl >> 4 != 4 || ihl < IPV4_HDR || byte(ip, 9)? != PROTO_UDP {
        return None;
    }
    if be16(ip, 6)? & 0x3fff != 0 {
        return None; // a fragment
    }
    let total = usize::from(be16(ip, 2)?);
    let dgram = ip.get(..total)?.get(ihl..)?;
    if be16(dgram, 2)? != SERVER_PORT {
        return None;
    }
    let ulen = usize::from(be16(dgram, 4)?);
    dgram.get(UDP_HDR..ulen)
}

/// Writes one option, split into 255-byte pieces when longer (RFC 3396).
fn put_opt(w: &mut Writer<'_>, code: u8, data: &[u8]) {
    if data.is_empty() {
        w.put(&[code, 0]);
        return;
    }
    for piece in data.chunks(255) {
        w.u8(code);
        w.u8(u8::try_from(piece.len()).unwrap_or(255));
        w.put(piece);
    }
}

fn opt_size(len: usize) -> usize {
    len + 2 * len.div_ceil(255).max(1)
}

/// Writes an option that may be left out, only if it and END still fit.
fn put_optional(w: &mut Writer<'_>, limit: usize, code: u8, data: &[u8]) {
    if !data.is_empty() && w.pos() + opt_size(data.len()) < limit {
        put_opt(w, code, data);
    }
}

fn v4_list(addrs: &[Ipv4Addr], out: &mut [u8; 252]) -> usize {
    let mut n = 0;
    for (a, slot) in addrs.iter().zip(out.chunks_exact_mut(4)) {
        slot.copy_from_slice(&a.octets());
        n += 4;
    }
    n
}

fn build(
    r: &Responder,
    v4: &V4,
    req: &Request<'_>,
    answer: Answer,
    out: &mut [u8],
) -> Option<usize> {
    let limit = datagram_limit(r, req, out.len());
    let mut w = Writer::new(out, PAYLOAD_AT);
    header(&mut w, v4, req, answer);
    let kind = match answer {
        Answer::Offer => OFFER,
        Answer::Nak => NAK,
        _ => ACK,
    };
    put_opt(&mut w, 53, &[kind]);
    put_opt(&mut w, 54, &v4.server_id.octets());
    if let Some(id) = req.client_id {
        put_opt(&mut w, 61, id);
    }
    if answer == Answer::Nak {
        put_opt(&mut w, 56, b"requested address is not this guest's");
    } else {
        config_options(&mut w, r, v4, answer, limit);
    }
    w.u8(255);
    let end = w.finish()?;
    let (dst_mac, dst) = destination(v4, req, answer);
    let udp = Udp4 {
        dst_mac,
        src_mac: r.cfg.server_mac,
        src: v4.server_id,
        dst,
        sport: SERVER_PORT,
        dport: CLIENT_PORT,
    };
    udp.frame(out, end)
}

/// The frame end the reply must stay under: the client's maximum message
/// size (57, an IP datagram size), at least 576, at most MTU and buffer.
fn datagram_limit(r: &Responder, req: &Request<'_>, buf: usize) -> usize {
    let client = usize::from(req.max_size.unwrap_or(0)).max(MIN_DATAGRAM);
    let mtu = usize::try_from(r.cfg.mtu).unwrap_or(usize::MAX);
    ETH_HDR + client.min(mtu).min(buf.saturating_sub(ETH_HDR))
}

fn header(w: &mut Writer<'_>, v4: &V4, req: &Request<'_>, answer: Answer) {
    w.put(&[2, 1, 6, 0]);
    w.put(&req.xid);
    w.u16(0);
    w.u16(req.flags);
    let unspecified = Ipv4Addr::UNSPECIFIED;
    let (ciaddr, yiaddr) = match answer {
        Answer::Nak => (unspecified, unspecified),
        Answer::InformAck => (req.ciaddr.unwrap_or(unspecified), unspecified),
        _ => (req.ciaddr.unwrap_or(unspecified), v4.addr),
    };
    w.put(&ciaddr.octets());
    w.put(&yiaddr.octets());
    w.zeros(8); // siaddr, giaddr
    w.put(&req.chaddr);
    w.zeros(64 + 128); // sname, file
    w.put(&COOKIE);
}

fn config_options(w: &mut Writer<'_>, r: &Responder, v4: &V4, answer: Answer, limit: usize) {
    let cfg = &r.cfg;
    if answer != Answer::InformAck {
        let lease = cfg.lease_secs;
        put_opt(w, 51, &lease.to_be_bytes());
        put_opt(w, 58, &(lease / 2).to_be_bytes());
        put_opt(w, 59, &(lease / 8 * 7).to_be_bytes());
    }
    put_opt(w, 1, &mask4(v4.prefix).to_be_bytes());
    if let Some(gw) = v4.router {
        put_opt(w, 3, &gw.octets());
    }
    put_opt(w, 121, &v4.classless);
    let mut dns = [0u8; 252];
    let n = v4_list(&cfg.dns4, &mut dns);
    if n > 0 {
        put_opt(w, 6, &dns[..n]);
    }
    let mtu = u16::try_from(cfg.mtu).unwrap_or(u16::MAX);
    put_opt(w, 26, &mtu.to_be_bytes());
    if answer == (Answer::Ack { rapid: true }) {
        put_opt(w, 80, &[]);
    }
    put_optional(w, limit, 119, &r.search);
    put_optional(w, limit, 249, &v4.classless);
    if let Some(d) = &cfg.domain {
        put_optional(w, limit, 15, d.trim_end_matches('.').as_bytes());
    }
    if let Some(h) = &cfg.hostname {
        put_optional(w, limit, 12, h.as_bytes());
    }
}

/// RFC 2131 4.1 with giaddr zero: NAK is broadcast; a client that has an
/// address (ciaddr) gets unicast; the broadcast flag asks for broadcast;
/// otherwise unicast to yiaddr at chaddr (the guest accepts a frame for an
/// address it does not have yet: that is what the flag is for).
fn destination(v4: &V4, req: &Request<'_>, answer: Answer) -> ([u8; 6], Ipv4Addr) {
    let mut chaddr = [0u8; 6];
    chaddr.copy_from_slice(&req.chaddr[..6]);
    let bcast = (BROADCAST_MAC, Ipv4Addr::BROADCAST);
    match (answer, req.ciaddr) {
        (Answer::Nak, _) => bcast,
        (_, Some(c)) => (chaddr, c),
        _ if req.flags & 0x8000 != 0 => bcast,
        (Answer::InformAck, None) => bcast,
        _ => (chaddr, v4.addr),
    }
}

/// Whether the always-sent options of an ACK fit 576 bytes.
pub(crate) fn essentials_fit(r: &Responder) -> bool {
    let Some(v4) = r.v4.as_ref() else { return true };
    let id = [0u8; 20];
    let req = Request {
        msg_type: REQUEST,
        client_id: Some(&id),
        chaddr: [0; 16],
        ..Request::default()
    };
    let mut buf = [0u8; super::MAX_FRAME];
    matches!(build(r, v4, &req, Answer::Ack { rapid: true }, &mut buf), Some(n) if n <= ETH_HDR + MIN_DATAGRAM)
}

/// Validates the IPv4 part of a config.
pub(crate) fn prepare(cfg: &NicConfig) -> Result<Option<V4>, ConfigError> {
    let Some((addr, prefix)) = cfg.ipv4 else {
        return Ok(None);
    };
    check_prefix(prefix, 32)?;
    for r in &cfg.routes4 {
        check_prefix(r.prefix, 32)?;
    }
    let server_id = cfg
        .server_id4
        .or(cfg.gateway4)
        .ok_or(ConfigError::NoServerId)?;
    let router = cfg
        .gateway4
        .filter(|g| prefix < 32 && in_subnet4(*g, addr, prefix) && *g != addr);
    let routes = classless_routes(addr, prefix, cfg.gateway4, &cfg.routes4);
    let classless = encode_classless(&routes);
    if classless.len() > 1020 {
        return Err(ConfigError::TooLarge("option 121"));
    }
    Ok(Some(V4 {
        addr,
        prefix,
        server_id,
        router,
        classless,
    }))
}

/// The routes for option 121, in the order a client can install them: a
/// host route to every gateway outside the subnet (Calico: 169.254.1.1/32
/// via 0.0.0.0), other device routes, gateway routes most specific first,
/// the default last. The subnet route itself comes from option 1.
pub fn classless_routes(
    addr: Ipv4Addr,
    prefix: u8,
    gateway: Option<Ipv4Addr>,
    routes: &[Route4],
) -> Vec<(Ipv4Addr, u8, Ipv4Addr)> {
    let mut all: Vec<Route4> = Vec::new();
    let mut add = |r: Route4| {
        let r = Route4 {
            dest: net4(r.dest, r.prefix),
            ..r
        };
        let dup = all.iter().any(|o| o.dest == r.dest && o.prefix == r.prefix);
        let connected = r.gateway.is_none() && r.prefix == prefix && r.dest == net4(addr, prefix);
        if !dup && !connected {
            all.push(r);
        }
    };
    routes
        .iter()
        .copied()
        .filter(|r| r.gateway != Some(Ipv4Addr::UNSPECIFIED))
        .for_each(&mut add);
    if let Some(gw) = gateway {
        add(Route4 {
            dest: Ipv4Addr::UNSPECIFIED,
            prefix: 0,
            gateway: Some(gw),
        });
    }
    let onlink = |g: Ipv4Addr, all: &[Route4]| {
        (prefix < 32 && in_subnet4(g, addr, prefix))
            || all
                .iter()
                .any(|o| o.gateway.is_none() && in_subnet4(g, o.dest, o.prefix))
    };
    let mut hosts: Vec<Route4> = Vec::new();
    for g in all.iter().filter_map(|r| r.gateway) {
        if !onlink(g, &all) && !hosts.iter().any(|h| h.dest == g) {
            hosts.push(Route4 {
                dest: g,
                prefix: 32,
                gateway: None,
            });
        }
    }
    let mut device: Vec<Route4> = all
        .iter()
        .copied()
        .filter(|r| r.gateway.is_none())
        .collect();
    let mut via: Vec<Route4> = all
        .iter()
        .copied()
        .filter(|r| r.gateway.is_some())
        .collect();
    device.sort_by_key(|r| std::cmp::Reverse(r.prefix));
    via.sort_by_key(|r| std::cmp::Reverse(r.prefix));
    hosts
        .into_iter()
        .chain(device)
        .chain(via)
        .map(|r| (r.dest, r.prefix, r.gateway.unwrap_or(Ipv4Addr::UNSPECIFIED)))
        .collect()
}

/// RFC 3442 encoding: width, the significant octets, the router.
pub fn encode_classless(routes: &[(Ipv4Addr, u8, Ipv4Addr)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (dest, prefix, gw) in routes {
        out.push(*prefix);
        let n = usize::from(prefix.div_ceil(8));
        out.extend_from_slice(&dest.octets()[..n.min(4)]);
        out.extend_from_slice(&gw.octets());
    }
    out
}
