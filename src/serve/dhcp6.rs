//! DHCPv6 (RFC 8415): IA_NA with the pod's addresses, DNS (RFC 3646) and
//! the domain search list. Stateless: the binding of every IA is the
//! config, so any IAID the guest picks is served the same addresses.

use std::net::Ipv6Addr;

use super::config::{Responder, V6};
use super::wire::{
    be16, byte, v6_at, Ip6, Ip6Packet, Writer, ETH_HDR, IPV6_HDR, PROTO_UDP, UDP_HDR,
};

pub const SERVER_PORT: u16 = 547;
const PAYLOAD_AT: usize = ETH_HDR + IPV6_HDR + UDP_HDR;
/// IA_NA options looked at per message; more are left unanswered.
pub const MAX_IA: usize = 4;

pub const SOLICIT: u8 = 1;
pub const ADVERTISE: u8 = 2;
pub const REQUEST: u8 = 3;
pub const CONFIRM: u8 = 4;
pub const RENEW: u8 = 5;
pub const REBIND: u8 = 6;
pub const REPLY: u8 = 7;
pub const RELEASE: u8 = 8;
pub const DECLINE: u8 = 9;
pub const INFORMATION_REQUEST: u8 = 11;

const OPT_CLIENTID: u16 = 1;
const OPT_SERVERID: u16 = 2;
const OPT_IA_NA: u16 = 3;
const OPT_IAADDR: u16 = 5;
const OPT_PREFERENCE: u16 = 7;
const OPT_STATUS: u16 = 13;
const OPT_RAPID_COMMIT: u16 = 14;
const OPT_DNS: u16 = 23;
const OPT_DOMAINS: u16 = 24;
const OPT_INFO_REFRESH: u16 = 32;

pub const STATUS_SUCCESS: u16 = 0;
pub const STATUS_NOBINDING: u16 = 3;
pub const STATUS_NOTONLINK: u16 = 4;

/// A client message; slices point into the frame.
#[derive(Debug, Default, Clone, Copy)]
pub struct Request<'a> {
    pub msg_type: u8,
    pub xid: [u8; 3],
    pub client_id: Option<&'a [u8]>,
    pub server_id: Option<&'a [u8]>,
    pub rapid_commit: bool,
    /// (IAID, the IA's own options) for the first [`MAX_IA`] IA_NAs.
    pub ias: [Option<([u8; 4], &'a [u8])>; MAX_IA],
}

/// Iterates options `code, len, data` in a bounded area; stops at the first
/// option that overruns (the iterator then reports `truncated`).
pub struct Options<'a> {
    rest: &'a [u8],
    pub truncated: bool,
}

impl<'a> Options<'a> {
    pub fn new(area: &'a [u8]) -> Self {
        Options {
            rest: area,
            truncated: false,
        }
    }
}

impl<'a> Iterator for Options<'a> {
    type Item = (u16, &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let parsed = (|| {
            let code = be16(self.rest, 0)?;
            let len = usize::from(be16(self.rest, 2)?);
            let data = self.rest.get(4..4 + len)?;
            Some((code, data, 4 + len))
        })();
        match parsed {
            Some((code, data, used)) => {
                self.rest = self.rest.get(used..).unwrap_or(&[]);
                Some((code, data))
            }
            None => {
                self.truncated = true;
                self.rest = &[];
                None
            }
        }
    }
}

/// Parses a DHCPv6 client message (UDP payload). Relay messages and
/// malformed option areas yield `None`.
pub fn parse(msg: &[u8]) -> Option<Request<'_>> {
    let mut req = Request {
        msg_type: byte(msg, 0)?,
        ..Request::default()
    };
    req.xid.copy_from_slice(msg.get(1..4)?);
    let mut n_ia = 0;
    let mut opts = Options::new(msg.get(4..)?);
    for (code, data) in &mut opts {
        match code {
            OPT_CLIENTID if req.client_id.is_none() && !data.is_empty() => {
                req.client_id = Some(data)
            }
            OPT_SERVERID if req.server_id.is_none() => req.server_id = Some(data),
            OPT_RAPID_COMMIT => req.rapid_commit = true,
            OPT_IA_NA if data.len() >= 12 && n_ia < MAX_IA => {
                let mut iaid = [0u8; 4];
                iaid.copy_from_slice(data.get(..4)?);
                req.ias[n_ia] = Some((iaid, data.get(12..)?));
                n_ia += 1;
            }
            _ => {}
        }
    }
    (!opts.truncated).then_some(req)
}

/// The addresses a client names inside one IA (bounded by the IA's size).
fn ia_addrs(ia_opts: &[u8]) -> impl Iterator<Item = Ipv6Addr> + '_ {
    Options::new(ia_opts)
        .filter(|(c, d)| *c == OPT_IAADDR && d.len() >= 24)
        .filter_map(|(_, d)| v6_at(d, 0))
}

fn ias<'r, 'a>(req: &'r Request<'a>) -> impl Iterator<Item = ([u8; 4], &'a [u8])> + 'r {
    req.ias.iter().flatten().copied()
}

/// How each IA of the request is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IaMode {
    /// No IA_NA in the reply (Information-Request, Confirm).
    None,
    /// The pod's addresses.
    Assign,
    /// The pod's addresses; addresses the client holds that are not the
    /// pod's are returned with lifetimes 0 (RFC 8415 18.3.4/18.3.5).
    Extend,
    /// NotOnLink in an IA that names an address not the pod's (Request).
    AssignOrNotOnLink,
    /// NoBinding for an IA naming an address not the pod's (Release,
    /// Decline); nothing for the others.
    Release,
}

/// What to send: message type, how IAs are handled, a top-level status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub msg_type: u8,
    pub ia: IaMode,
    pub status: Option<u16>,
    pub rapid: bool,
}

/// RFC 8415 18.3: which messages get which reply. `None` is silence: a
/// message for another server, without client id where one is required,
/// or a Confirm naming no address.
pub fn decide(v6: &V6, req: &Request<'_>) -> Option<Answer> {
    let ours = req.server_id.map(|s| s == v6.duid);
    let reply = |ia, status| {
        Some(Answer {
            msg_type: REPLY,
            ia,
            status,
            rapid: false,
        })
    };
    if req.client_id.is_none() && req.msg_type != INFORMATION_REQUEST {
        return None;
    }
    match (req.msg_type, ours) {
        (SOLICIT, None) if req.rapid_commit => Some(Answer {
            msg_type: REPLY,
            ia: IaMode::Assign,
            status: None,
            rapid: true,
        }),
        (SOLICIT, None) => Some(Answer {
            msg_type: ADVERTISE,
            ia: IaMode::Assign,
            status: None,
            rapid: false,
        }),
        (REQUEST, Some(true)) => reply(IaMode::AssignOrNotOnLink, None),
        (RENEW, Some(true)) | (REBIND, None) => reply(IaMode::Extend, None),
        (CONFIRM, None) => {
            let mut named = ias(req).flat_map(|(_, o)| ia_addrs(o)).peekable();
            named.peek()?;
            let foreign = named.any(|a| !v6.leased.contains(&a));
            reply(
                IaMode::None,
                Some(if foreign {
                    STATUS_NOTONLINK
                } else {
                    STATUS_SUCCESS
                }),
            )
        }
        (RELEASE | DECLINE, Some(true)) => reply(IaMode::Release, Some(STATUS_SUCCESS)),
        (INFORMATION_REQUEST, None | Some(true)) => reply(IaMode::None, None),
        _ => None,
    }
}

/// Handles DHCPv6 from the guest (already checked to be its MAC).
pub fn handle(
    r: &Responder,
    src_mac: [u8; 6],
    pkt: &Ip6Packet<'_>,
    out: &mut [u8],
) -> Option<usize> {
    let v6 = r.v6.as_ref()?;
    let udp = pkt.payload;
    if be16(udp, 2)? != SERVER_PORT {
        return None;
    }
    let ulen = usize::from(be16(udp, 4)?);
    let req = parse(udp.get(UDP_HDR..ulen)?)?;
    let answer = decide(v6, &req)?;
    let end = build(r, v6, &req, answer, out)?;
    let ip = Ip6 {
        dst_mac: src_mac,
        src_mac: r.cfg.server_mac,
        src: v6.source,
        dst: pkt.src,
        next: PROTO_UDP,
        hop_limit: 255,
    };
    let sport = be16(udp, 0)?;
    write_udp_ports(out, sport)?;
    ip.frame(out, end, 6)
}

fn write_udp_ports(out: &mut [u8], dport: u16) -> Option<()> {
    let udp = out.get_mut(ETH_HDR + IPV6_HDR..ETH_HDR + IPV6_HDR + 4)?;
    udp[..2].copy_from_slice(&SERVER_PORT.to_be_bytes());
    udp[2..4].copy_from_slice(&dport.to_be_bytes());
    Some(())
}

/// Starts an option; returns where its length goes.
fn open(w: &mut Writer<'_>, code: u16) -> usize {
    w.u16(code);
    let at = w.pos();
    w.u16(0);
    at
}

fn close(w: &mut Writer<'_>, at: usize) {
    let len = w.pos().saturating_sub(at + 2);
    w.patch_u16(at, u16::try_from(len).unwrap_or(u16::MAX));
}

fn put(w: &mut Writer<'_>, code: u16, data: &[u8]) {
    let at = open(w, code);
    w.put(data);
    close(w, at);
}

fn status(w: &mut Writer<'_>, code: u16) {
    let at = open(w, OPT_STATUS);
    w.u16(code);
    w.put(match code {
        STATUS_SUCCESS => b"ok".as_slice(),
        STATUS_NOBINDING => b"address is not this guest's",
        _ => b"address is not on this link",
    });
    close(w, at);
}

fn build(r: &Responder, v6: &V6, req: &Request<'_>, a: Answer, out: &mut [u8]) -> Option<usize> {
    let mut w = Writer::new(out, PAYLOAD_AT);
    w.u8(a.msg_type);
    w.put(&req.xid);
    if let Some(id) = req.client_id {
        put(&mut w, OPT_CLIENTID, id);
    }
    put(&mut w, OPT_SERVERID, &v6.duid);
    if a.msg_type == ADVERTISE {
        put(&mut w, OPT_PREFERENCE, &[255]); // take this one now (RFC 8415 18.2.1)
    }
    if a.rapid {
        put(&mut w, OPT_RAPID_COMMIT, &[]);
    }
    for (iaid, opts) in ias(req) {
        ia_na(&mut w, r, v6, a.ia, iaid, opts);
    }
    if let Some(code) = a.status {
        status(&mut w, code);
    }
    config_options(&mut w, r, v6, req.msg_type);
    let end = w.finish()?;
    let udp_len = u16::try_from(end - (ETH_HDR + IPV6_HDR)).ok()?;
    out.get_mut(ETH_HDR + IPV6_HDR + 4..ETH_HDR + IPV6_HDR + 6)?
        .copy_from_slice(&udp_len.to_be_bytes());
    Some(end)
}

fn config_options(w: &mut Writer<'_>, r: &Responder, v6: &V6, msg_type: u8) {
    if !r.cfg.dns6.is_empty() {
        let at = open(w, OPT_DNS);
        for d in &r.cfg.dns6 {
            w.put(&d.octets());
        }
        close(w, at);
    }
    if !v6.domains.is_empty() {
        put(w, OPT_DOMAINS, &v6.domains);
    }
    if msg_type == INFORMATION_REQUEST {
        put(w, OPT_INFO_REFRESH, &(r.cfg.lease_secs / 2).to_be_bytes());
    }
}

fn ia_na(w: &mut Writer<'_>, r: &Responder, v6: &V6, mode: IaMode, iaid: [u8; 4], opts: &[u8]) {
    let foreign = ia_addrs(opts).any(|a| !v6.leased.contains(&a));
    let assign = match mode {
        IaMode::None => return,
        IaMode::Release if !foreign => return,
        IaMode::Release | IaMode::AssignOrNotOnLink => !foreign,
        IaMode::Assign | IaMode::Extend => true,
    };
    let lease = r.cfg.lease_secs;
    let at = open(w, OPT_IA_NA);
    w.put(&iaid);
    let (t1, t2) = if assign {
        (lease / 2, lease / 5 * 4)
    } else {
        (0, 0)
    };
    w.u32(t1);
    w.u32(t2);
    if assign {
        for a in &v6.leased {
            iaaddr(w, a, lease);
        }
    }
    if mode == IaMode::Extend {
        for a in ia_addrs(opts).filter(|a| !v6.leased.contains(a)) {
            iaaddr(w, &a, 0);
        }
    }
    match mode {
        IaMode::Release => status(w, STATUS_NOBINDING),
        IaMode::AssignOrNotOnLink if foreign => status(w, STATUS_NOTONLINK),
        _ => {}
    }
    close(w, at);
}

fn iaaddr(w: &mut Writer<'_>, a: &Ipv6Addr, lifetime: u32) {
    let at = open(w, OPT_IAADDR);
    w.put(&a.octets());
    w.u32(lifetime);
    w.u32(lifetime);
    close(w, at);
}

/// Whether the largest reply (four IAs, every address and option) fits
/// the minimum IPv6 MTU.
pub(crate) fn largest_fits(r: &Responder) -> bool {
    let Some(v6) = r.v6.as_ref() else { return true };
    let id = [0u8; 32];
    let mut req = Request {
        msg_type: INFORMATION_REQUEST,
        client_id: Some(&id),
        ..Request::default()
    };
    req.ias = [Some(([0; 4], &[][..])); MAX_IA];
    let a = Answer {
        msg_type: REPLY,
        ia: IaMode::Assign,
        status: Some(0),
        rapid: true,
    };
    let mut buf = [0u8; super::MAX_FRAME];
    matches!(build(r, v6, &req, a, &mut buf), Some(n) if n <= ETH_HDR + 1280)
}

/// Lifetimes read back from an IAADDR option (tests and diagnostics).
#[cfg(test)]
pub fn iaaddr_lifetimes(data: &[u8]) -> Option<(Ipv6Addr, u32, u32)> {
    let word = |at: usize| Some(u32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?));
    Some((v6_at(data, 0)?, word(16)?, word(20)?))
}
