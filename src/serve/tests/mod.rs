//! Unit tests of the protocol engine: frames built by hand, replies taken
//! apart by hand, so the tests do not share the code they check.

// Test frames are built small; their length casts cannot truncate.
#![allow(clippy::cast_possible_truncation)]

use std::net::{Ipv4Addr, Ipv6Addr};

use super::config::eui64;
use super::wire::{checksum6, fold, sum16};
use super::*;

pub(super) const GUEST: [u8; 6] = [2, 0, 0, 0, 0, 0x10];

pub(super) const SERVER: [u8; 6] = [2, 0, 0, 0, 1, 0x10];

pub(super) const GW6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0xecee, 0xeeff, 0xfeee, 0xeeee);

pub(super) const POD6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 5, 0, 0, 0, 5);

pub(super) fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

pub(super) fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// The Calico shape: /32 address, gateway 169.254.1.1 outside it.
pub(crate) fn calico() -> NicConfig {
    let mut c = NicConfig::new(GUEST, SERVER);
    c.ipv4 = Some((v4("198.18.0.5"), 32));
    c.gateway4 = Some(v4("169.254.1.1"));
    c.routes4 = vec![Route4 {
        dest: v4("0.0.0.0"),
        prefix: 0,
        gateway: Some(v4("169.254.1.1")),
    }];
    c.mtu = 1450;
    c.dns4 = vec![v4("198.18.1.53")];
    c.dns6 = vec![v6("2001:db8::53")];
    c.search = vec!["pod.example".into(), "svc.example".into()];
    c.domain = Some("pod.example".into());
    c.ipv6 = vec![(POD6, 128)];
    c.gateway6 = Some(GW6);
    c.holds_default_v6 = true;
    c.routes6 = vec![
        Route6 {
            dest: Ipv6Addr::UNSPECIFIED,
            prefix: 0,
            gateway: Some(GW6),
        },
        Route6 {
            dest: v6("2001:db8:ffff::"),
            prefix: 48,
            gateway: Some(GW6),
        },
    ];
    c
}

pub(super) fn subnet() -> NicConfig {
    let mut c = NicConfig::new(GUEST, SERVER);
    c.ipv4 = Some((v4("198.18.2.5"), 24));
    c.gateway4 = Some(v4("198.18.2.1"));
    c.routes4 = vec![
        Route4 {
            dest: v4("198.18.2.0"),
            prefix: 24,
            gateway: None,
        },
        Route4 {
            dest: v4("198.19.0.0"),
            prefix: 16,
            gateway: Some(v4("198.18.2.254")),
        },
        Route4 {
            dest: v4("0.0.0.0"),
            prefix: 0,
            gateway: Some(v4("198.18.2.1")),
        },
    ];
    c.hostname = Some("guest1".into());
    let net = v6("2001:db8:1::");
    c.ipv6 = vec![(eui64(net, GUEST), 64)];
    c.gateway6 = Some(v6("2001:db8:1::1"));
    c.routes6 = vec![Route6 {
        dest: v6("2001:db8:77::"),
        prefix: 48,
        gateway: Some(v6("2001:db8:1::1")),
    }];
    c
}

pub(super) fn responder(c: NicConfig) -> Responder {
    Responder::new(c).unwrap()
}

pub(super) fn answer(r: &Responder, frame: &[u8]) -> Option<Vec<u8>> {
    let mut out = [0u8; MAX_FRAME];
    r.handle(frame, &mut out).map(|n| out[..n].to_vec())
}

// ---- DHCPv4 frames ------------------------------------------------------

#[derive(Clone)]
pub(super) struct Dhcp4 {
    msg: u8,
    ciaddr: Ipv4Addr,
    flags: u16,
    chaddr: [u8; 6],
    src_mac: [u8; 6],
    opts: Vec<(u8, Vec<u8>)>,
}

impl Dhcp4 {
    fn new(msg: u8) -> Self {
        Dhcp4 {
            msg,
            ciaddr: Ipv4Addr::UNSPECIFIED,
            flags: 0,
            chaddr: GUEST,
            src_mac: GUEST,
            opts: vec![],
        }
    }
    fn opt(mut self, code: u8, data: &[u8]) -> Self {
        self.opts.push((code, data.to_vec()));
        self
    }
    fn bootp(&self) -> Vec<u8> {
        let mut m = vec![1, 1, 6, 0, 0xde, 0xad, 0xbe, 0xef, 0, 0];
        m.extend_from_slice(&self.flags.to_be_bytes());
        m.extend_from_slice(&self.ciaddr.octets());
        m.extend_from_slice(&[0; 12]);
        m.extend_from_slice(&self.chaddr);
        m.extend_from_slice(&[0; 10 + 64 + 128]);
        m.extend_from_slice(&[99, 130, 83, 99, 53, 1, self.msg]);
        for (c, d) in &self.opts {
            m.push(*c);
            m.push(d.len() as u8);
            m.extend_from_slice(d);
        }
        m.push(255);
        m
    }
    fn frame(&self) -> Vec<u8> {
        udp4_frame(self.src_mac, &self.bootp())
    }
}

pub(super) fn udp4_frame(src_mac: [u8; 6], payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + 8 + payload.len()) as u16;
    let mut ip = vec![
        0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255,
    ];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0, 68, 0, 67]);
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// DHCP options of a reply frame (concatenating repeated codes, RFC 3396).
pub(super) fn opts4(frame: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let msg = &frame[42..];
    assert_eq!(&msg[236..240], &[99, 130, 83, 99]);
    let mut out: Vec<(u8, Vec<u8>)> = vec![];
    let mut i = 240;
    while msg[i] != 255 {
        let (c, l) = (msg[i], msg[i + 1] as usize);
        let d = msg[i + 2..i + 2 + l].to_vec();
        match out.iter_mut().find(|(k, _)| *k == c) {
            Some((_, v)) => v.extend_from_slice(&d),
            None => out.push((c, d)),
        }
        i += 2 + l;
    }
    out
}

pub(super) fn opt4(frame: &[u8], code: u8) -> Option<Vec<u8>> {
    opts4(frame)
        .into_iter()
        .find(|(c, _)| *c == code)
        .map(|(_, d)| d)
}

pub(super) fn msg_type(frame: &[u8]) -> u8 {
    opt4(frame, 53).unwrap()[0]
}

pub(super) fn yiaddr(frame: &[u8]) -> Ipv4Addr {
    Ipv4Addr::from(<[u8; 4]>::try_from(&frame[42 + 16..42 + 20]).unwrap())
}

pub(super) fn ip4_dst(frame: &[u8]) -> Ipv4Addr {
    Ipv4Addr::from(<[u8; 4]>::try_from(&frame[30..34]).unwrap())
}

pub(super) fn check_ipv4_sums(frame: &[u8]) {
    assert_eq!(fold(sum16(0, &frame[14..34])), 0, "IPv4 header checksum");
    let udp = &frame[34..];
    let mut acc = sum16(0, &frame[26..34]);
    acc = sum16(acc, &[0, 17]);
    acc = sum16(acc, &(udp.len() as u16).to_be_bytes());
    assert_eq!(fold(sum16(acc, udp)), 0, "UDP checksum");
    assert_eq!(
        u16::from_be_bytes([frame[16], frame[17]]) as usize,
        frame.len() - 14
    );
}

// ---- NDP ----------------------------------------------------------------

pub(super) fn icmp6_frame(src: Ipv6Addr, dst: Ipv6Addr, hop: u8, body: &[u8]) -> Vec<u8> {
    let mut f = vec![0x33, 0x33, 0, 0, 0, 2];
    f.extend_from_slice(&GUEST);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&(body.len() as u16).to_be_bytes());
    f.extend_from_slice(&[58, hop]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    let mut b = body.to_vec();
    let c = checksum6(&src, &dst, 58, &b);
    b[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&b);
    f
}

pub(super) fn rs(src: Ipv6Addr) -> Vec<u8> {
    let mut body = vec![133, 0, 0, 0, 0, 0, 0, 0];
    if !src.is_unspecified() {
        body.extend_from_slice(&[1, 1]);
        body.extend_from_slice(&GUEST);
    }
    icmp6_frame(src, v6("ff02::2"), 255, &body)
}

pub(super) fn guest_ll() -> Ipv6Addr {
    eui64(v6("fe80::"), GUEST)
}

/// RA options as (type, body after type and length).
pub(super) fn ra_opts(frame: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = vec![];
    let mut i = 54 + 16;
    while i < frame.len() {
        let (t, l) = (frame[i], frame[i + 1] as usize * 8);
        out.push((t, frame[i + 2..i + l].to_vec()));
        i += l;
    }
    out
}

pub(super) fn check_icmp6(frame: &[u8]) {
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(&frame[22..38]).unwrap());
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&frame[38..54]).unwrap());
    assert_eq!(frame[21], 255, "hop limit");
    assert_eq!(
        u16::from_be_bytes([frame[18], frame[19]]) as usize,
        frame.len() - 54
    );
    assert_eq!(
        checksum6(&src, &dst, frame[20], &frame[54..]),
        0,
        "checksum"
    );
}

pub(super) fn ns(target: Ipv6Addr, src: Ipv6Addr) -> Vec<u8> {
    let mut body = vec![135, 0, 0, 0, 0, 0, 0, 0];
    body.extend_from_slice(&target.octets());
    if !src.is_unspecified() {
        body.extend_from_slice(&[1, 1]);
        body.extend_from_slice(&GUEST);
    }
    icmp6_frame(src, v6("ff02::1:ff00:110"), 255, &body)
}

// ---- DHCPv6 -------------------------------------------------------------

pub(super) fn d6opt(code: u16, data: &[u8]) -> Vec<u8> {
    let mut v = code.to_be_bytes().to_vec();
    v.extend_from_slice(&(data.len() as u16).to_be_bytes());
    v.extend_from_slice(data);
    v
}

pub(super) const CLIENT_DUID: [u8; 10] = [0, 3, 0, 1, 2, 0, 0, 0, 0, 0x10];

pub(super) fn server_duid() -> Vec<u8> {
    let mut d = vec![0, 3, 0, 1];
    d.extend_from_slice(&SERVER);
    d
}

pub(super) fn ia_na(iaid: u32, addrs: &[Ipv6Addr]) -> Vec<u8> {
    let mut v = iaid.to_be_bytes().to_vec();
    v.extend_from_slice(&[0; 8]);
    for a in addrs {
        let mut ad = a.octets().to_vec();
        ad.extend_from_slice(&[0; 8]);
        v.extend(d6opt(5, &ad));
    }
    d6opt(3, &v)
}

pub(super) fn dhcp6_frame(msg: u8, opts: &[Vec<u8>]) -> Vec<u8> {
    let mut m = vec![msg, 0x12, 0x34, 0x56];
    for o in opts {
        m.extend_from_slice(o);
    }
    let src = guest_ll();
    let dst = v6("ff02::1:2");
    let mut udp = vec![0x02, 0x22, 0x02, 0x23];
    udp.extend_from_slice(&((8 + m.len()) as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(&m);
    let mut f = vec![0x33, 0x33, 0, 1, 0, 2];
    f.extend_from_slice(&GUEST);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&(udp.len() as u16).to_be_bytes());
    f.extend_from_slice(&[17, 1]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&udp);
    f
}

/// Top-level DHCPv6 options of a reply.
pub(super) fn opts6(frame: &[u8]) -> Vec<(u16, Vec<u8>)> {
    dhcp6::Options::new(&frame[62 + 4..])
        .map(|(c, d)| (c, d.to_vec()))
        .collect()
}

pub(super) fn opt6(frame: &[u8], code: u16) -> Option<Vec<u8>> {
    opts6(frame).into_iter().find(|o| o.0 == code).map(|o| o.1)
}

pub(super) fn check_udp6(frame: &[u8]) {
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(&frame[22..38]).unwrap());
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&frame[38..54]).unwrap());
    assert_eq!(checksum6(&src, &dst, 17, &frame[54..]), 0);
    assert_eq!(
        u16::from_be_bytes([frame[58], frame[59]]) as usize,
        frame.len() - 54
    );
    assert_eq!(&frame[54..58], &[2, 0x23, 2, 0x22], "547 -> 546");
}

/// (address, preferred, valid) of each IAADDR and the status inside an IA_NA.
pub(super) fn ia_content(ia: &[u8]) -> (Vec<(Ipv6Addr, u32, u32)>, Option<u16>) {
    let mut addrs = vec![];
    let mut status = None;
    for (c, d) in dhcp6::Options::new(&ia[12..]) {
        match c {
            5 => addrs.push(dhcp6::iaaddr_lifetimes(d).unwrap()),
            13 => status = Some(u16::from_be_bytes([d[0], d[1]])),
            _ => {}
        }
    }
    (addrs, status)
}

// ---- config, timing -----------------------------------------------------

#[test]
pub(super) fn config_validation() {
    let mut c = calico();
    c.guest_mac = [1, 0, 0, 0, 0, 0];
    assert_eq!(Responder::new(c).unwrap_err(), ConfigError::MulticastMac);
    let mut c = calico();
    c.mtu = 100;
    assert!(matches!(
        Responder::new(c),
        Err(ConfigError::MtuOutOfRange(100))
    ));
    let mut c = calico();
    c.search = vec!["a..b".into()];
    assert!(matches!(Responder::new(c), Err(ConfigError::BadName(_))));
    let mut c = calico();
    c.gateway4 = None;
    assert_eq!(Responder::new(c).unwrap_err(), ConfigError::NoServerId);
    let mut c = calico();
    c.ipv4 = Some((v4("198.18.0.5"), 33));
    assert_eq!(
        Responder::new(c).unwrap_err(),
        ConfigError::PrefixTooLong(33)
    );
    let mut c = calico();
    c.dns4 = vec![v4("198.18.1.1"); 60];
    assert!(matches!(Responder::new(c), Err(ConfigError::TooLarge(_))));
    let mut c = calico();
    c.dns6 = vec![v6("2001:db8::1"); 80];
    assert!(matches!(Responder::new(c), Err(ConfigError::TooLarge(_))));
}

#[test]
pub(super) fn token_bucket() {
    let mut b = TokenBucket::new(20, 40, 1000);
    assert_eq!((0..100).filter(|_| b.take(1000)).count(), 40);
    assert!(!b.take(1000));
    assert_eq!(
        (0..100).filter(|_| b.take(1500)).count(),
        10,
        "20/s for 0.5 s"
    );
    assert_eq!(
        (0..100).filter(|_| b.take(1_000_000)).count(),
        40,
        "refill capped at burst"
    );
    assert!(!b.take(500), "time going backwards adds nothing");
}

#[test]
pub(super) fn ra_schedule() {
    let mut s = RaSchedule::new(0);
    assert!(s.due(0));
    for i in 0..timing::INITIAL_RAS {
        s.sent(u64::from(i), u32::MAX);
        assert!(s.next_ms() - u64::from(i) <= 16_000);
    }
    for rnd in [0, 1, 12345, u32::MAX] {
        let now = s.next_ms();
        s.sent(now, rnd);
        let d = s.next_ms() - now;
        assert!((200_000..=600_000).contains(&d), "{d}");
    }
}

mod bpf;
mod dhcp4_tests;
mod dhcp6_tests;
mod fuzz;
mod ndp_tests;
