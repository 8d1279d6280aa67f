//! Router advertisements (RFC 4861, route information RFC 4191, RDNSS and
//! DNSSL RFC 8106) and the one neighbor advertisement we may owe: for the
//! link-local address the RAs come from, when it is ours and not the pod's
//! real gateway.

use std::net::Ipv6Addr;

use super::config::{
    check_prefix, eui64, is_link_local6, net6, ConfigError, NicConfig, Responder, V6,
};
use super::wire::{
    byte, multicast_mac, v6_at, Ip6, Ip6Packet, Writer, ETH_HDR, IPV6_HDR, PROTO_ICMPV6,
};

pub const RS: u8 = 133;
pub const RA: u8 = 134;
pub const NS: u8 = 135;
pub const NA: u8 = 136;
/// RFC 4861 MaxRtrAdvInterval (the default and our maximum).
pub const MAX_RTR_ADV_INTERVAL_SECS: u64 = 600;
/// Router, route and DNS lifetimes: 3 x MaxRtrAdvInterval (RFC 4861
/// AdvDefaultLifetime, RFC 8106 6.1 recommends at least this).
pub const LIFETIME_SECS: u32 = 1800;
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
const PAYLOAD_AT: usize = ETH_HDR + IPV6_HDR;

fn usable6(a: &Ipv6Addr) -> bool {
    !is_link_local6(a) && !a.is_multicast() && !a.is_unspecified() && !a.is_loopback()
}

/// Validates the IPv6 part of a config and encodes the RA once.
pub(crate) fn prepare(cfg: &NicConfig, search: &[u8]) -> Result<Option<V6>, ConfigError> {
    for (_, p) in &cfg.ipv6 {
        check_prefix(*p, 128)?;
    }
    for r in &cfg.routes6 {
        check_prefix(r.prefix, 128)?;
    }
    let leased: Vec<Ipv6Addr> = cfg.ipv6.iter().map(|(a, _)| *a).filter(usable6).collect();
    if leased.is_empty() {
        return Ok(None);
    }
    let gw_ll = cfg.gateway6.filter(is_link_local6);
    let fallback = eui64(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), cfg.server_mac);
    let source = gw_ll
        .or(cfg.router_ll.filter(is_link_local6))
        .unwrap_or(fallback);
    let mut domains = search.to_vec();
    if domains.is_empty() {
        if let Some(d) = &cfg.domain {
            super::wire::encode_names(std::slice::from_ref(d), &mut domains)
                .ok_or_else(|| ConfigError::BadName(d.clone()))?;
        }
    }
    let mut duid = [0u8; 10];
    duid[..4].copy_from_slice(&[0, 3, 0, 1]);
    duid[4..].copy_from_slice(&cfg.server_mac);
    let ra = encode_ra(cfg, source, &domains);
    Ok(Some(V6 {
        source,
        answer_ns: Some(source) != cfg.gateway6,
        leased,
        ra,
        duid,
        domains,
    }))
}

/// The RA message: header, SLLAO, MTU, PIOs, RIOs, RDNSS, DNSSL.
fn encode_ra(cfg: &NicConfig, source: Ipv6Addr, domains: &[u8]) -> Vec<u8> {
    let mut ra = vec![RA, 0, 0, 0, 64, 0xc0];
    let lifetime = if cfg.holds_default_v6 {
        LIFETIME_SECS
    } else {
        0
    };
    ra.extend_from_slice(&u16::try_from(lifetime).unwrap_or(u16::MAX).to_be_bytes());
    ra.extend_from_slice(&[0; 8]); // reachable time, retrans timer: unspecified
    ra.extend_from_slice(&[1, 1]);
    ra.extend_from_slice(&cfg.server_mac);
    if cfg.mtu >= 1280 {
        ra.extend_from_slice(&[5, 1, 0, 0]);
        ra.extend_from_slice(&cfg.mtu.to_be_bytes());
    }
    for (prefix, len, auto) in prefixes(cfg) {
        ra.extend_from_slice(&[3, 4, len, if auto { 0xc0 } else { 0x80 }]);
        ra.extend_from_slice(&cfg.lease_secs.to_be_bytes());
        ra.extend_from_slice(&cfg.lease_secs.to_be_bytes());
        ra.extend_from_slice(&[0; 4]);
        ra.extend_from_slice(&prefix.octets());
    }
    for (dest, len) in route_infos(cfg, source) {
        let words = match len {
            0 => 1u8,
            1..=64 => 2,
            _ => 3,
        };
        ra.extend_from_slice(&[24, words, len, 0]);
        ra.extend_from_slice(&LIFETIME_SECS.to_be_bytes());
        ra.extend_from_slice(&dest.octets()[..usize::from(words - 1) * 8]);
    }
    rdnss_dnssl(&mut ra, &cfg.dns6, domains);
    ra
}

fn rdnss_dnssl(ra: &mut Vec<u8>, dns: &[Ipv6Addr], domains: &[u8]) {
    if !dns.is_empty() {
        let words = u8::try_from(1 + 2 * dns.len()).unwrap_or(u8::MAX);
        ra.extend_from_slice(&[25, words, 0, 0]);
        ra.extend_from_slice(&LIFETIME_SECS.to_be_bytes());
        for a in dns {
            ra.extend_from_slice(&a.octets());
        }
    }
    if !domains.is_empty() {
        let padded = (8 + domains.len()).div_ceil(8) * 8;
        ra.extend_from_slice(&[31, u8::try_from(padded / 8).unwrap_or(u8::MAX), 0, 0]);
        ra.extend_from_slice(&LIFETIME_SECS.to_be_bytes());
        ra.extend_from_slice(domains);
        ra.resize(ra.len() + padded - 8 - domains.len(), 0);
    }
}

/// On-link prefixes: the pod's address prefixes (not /128) and device
/// routes. A=1 only for a /64 whose address is the guest's EUI-64 one, so
/// SLAAC forms exactly the pod's address; otherwise L only, and the address
/// comes from DHCPv6.
pub fn prefixes(cfg: &NicConfig) -> Vec<(Ipv6Addr, u8, bool)> {
    let mut out: Vec<(Ipv6Addr, u8, bool)> = Vec::new();
    let addrs = cfg.ipv6.iter().filter(|(a, p)| usable6(a) && *p < 128);
    let devs = cfg
        .routes6
        .iter()
        .filter(|r| r.gateway.is_none() && r.prefix > 0 && usable6(&r.dest));
    for (a, p) in addrs.copied().chain(devs.map(|r| (r.dest, r.prefix))) {
        let net = net6(a, p);
        let auto = cfg.slaac && p == 64 && eui64(net, cfg.guest_mac) == a;
        match out.iter_mut().find(|(n, l, _)| *n == net && *l == p) {
            Some(e) => e.2 |= auto,
            None => out.push((net, p, auto)),
        }
    }
    out
}

/// Routes the RA can carry: through the router it speaks for (the pod's
/// gateway or the RA source), not the default (that is the router
/// lifetime), not link-local destinations.
pub fn route_infos(cfg: &NicConfig, source: Ipv6Addr) -> Vec<(Ipv6Addr, u8)> {
    let mut out: Vec<(Ipv6Addr, u8)> = Vec::new();
    for r in &cfg.routes6 {
        let Some(gw) = r.gateway else { continue };
        if (Some(gw) != cfg.gateway6 && gw != source) || r.prefix == 0 || !usable6(&r.dest) {
            continue;
        }
        let dest = net6(r.dest, r.prefix);
        if !out.contains(&(dest, r.prefix)) {
            out.push((dest, r.prefix));
        }
    }
    out
}

/// Options of an NDP message: every option at least 8 bytes, all inside
/// the message (RFC 4861 6.1.1, 7.1.1). Returns whether a source
/// link-layer address option is present.
fn options_valid(opts: &[u8]) -> Option<bool> {
    let mut i = 0usize;
    let mut sllao = false;
    while i < opts.len() {
        let len = usize::from(byte(opts, i + 1)?) * 8;
        if len == 0 || i + len > opts.len() {
            return None;
        }
        sllao |= byte(opts, i)? == 1;
        i += len;
    }
    Some(sllao)
}

/// Handles ICMPv6 from the guest: RS gets an RA, NS for our address an NA.
pub fn handle(
    r: &Responder,
    src_mac: [u8; 6],
    pkt: &Ip6Packet<'_>,
    out: &mut [u8],
) -> Option<usize> {
    let v6 = r.v6.as_ref()?;
    let msg = pkt.payload;
    if pkt.hop_limit != 255 || byte(msg, 1)? != 0 {
        return None;
    }
    match byte(msg, 0)? {
        RS => {
            let sllao = options_valid(msg.get(8..)?)?;
            if pkt.src.is_unspecified() && sllao {
                return None;
            }
            let (dst, mac) = match pkt.src.is_unspecified() {
                true => (ALL_NODES, multicast_mac(&ALL_NODES)),
                false => (pkt.src, src_mac),
            };
            ra_frame(r, v6, dst, mac, out)
        }
        NS if v6.answer_ns => {
            options_valid(msg.get(24..)?)?;
            if v6_at(msg, 8)? != v6.source || v6_at(msg, 8)?.is_multicast() {
                return None;
            }
            na_frame(r, v6, pkt.src, src_mac, out)
        }
        _ => None,
    }
}

fn ra_frame(
    r: &Responder,
    v6: &V6,
    dst: Ipv6Addr,
    dst_mac: [u8; 6],
    out: &mut [u8],
) -> Option<usize> {
    let mut w = Writer::new(out, PAYLOAD_AT);
    w.put(&v6.ra);
    let end = w.finish()?;
    icmp_from_router(r, v6, (dst, dst_mac), out, end)
}

/// NA for our router address: solicited (unicast back) or, for a DAD probe
/// (unspecified source), defended to all-nodes.
fn na_frame(
    r: &Responder,
    v6: &V6,
    ns_src: Ipv6Addr,
    src_mac: [u8; 6],
    out: &mut [u8],
) -> Option<usize> {
    let dad = ns_src.is_unspecified();
    let (dst, dst_mac) = if dad {
        (ALL_NODES, multicast_mac(&ALL_NODES))
    } else {
        (ns_src, src_mac)
    };
    let flags = if dad { 0xa0 } else { 0xe0 }; // R, S (solicited only), O
    let mut w = Writer::new(out, PAYLOAD_AT);
    w.put(&[NA, 0, 0, 0, flags, 0, 0, 0]);
    w.put(&v6.source.octets());
    w.put(&[2, 1]);
    w.put(&r.cfg.server_mac);
    let end = w.finish()?;
    icmp_from_router(r, v6, (dst, dst_mac), out, end)
}

/// The ICMPv6 message in `out` (up to `end`) framed from the router's
/// address and MAC to `dst`, its checksum filled in.
fn icmp_from_router(
    r: &Responder,
    v6: &V6,
    (dst, dst_mac): (Ipv6Addr, [u8; 6]),
    out: &mut [u8],
    end: usize,
) -> Option<usize> {
    let ip = Ip6 {
        dst_mac,
        src_mac: r.cfg.server_mac,
        src: v6.source,
        dst,
        next: PROTO_ICMPV6,
        hop_limit: 255,
    };
    ip.frame(out, end, 2)
}

impl Responder {
    /// An unsolicited RA to all-nodes, or `None` when the NIC has no IPv6
    /// (or `out` is too small).
    pub fn unsolicited_ra(&self, out: &mut [u8]) -> Option<usize> {
        let v6 = self.v6.as_ref()?;
        ra_frame(self, v6, ALL_NODES, multicast_mac(&ALL_NODES), out)
    }
}
