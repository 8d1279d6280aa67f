//! What to build: podtap's table as a value, with no socket in sight.
//!
//! A [`Table`] is one `inet` table with base chains whose rules are the
//! fixed shapes of [`Rule`]'s constructors; [`Table::podtap`] builds the
//! whole table of one attachment from a [`Spec`]. [`super::msg`] encodes it,
//! [`super::Nft`] sends it.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::expr::Expr;
use super::sys::*;

/// One `inet` table: its name, podtap's marker, its chains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// The table's name (`podtap_<8 hex>` for [`Table::podtap`]).
    pub name: String,
    /// The marker kept in `NFTA_TABLE_USERDATA` (as nft's table comment:
    /// `nft list ruleset` shows it as `comment "<marker>"`).
    pub marker: String,
    /// The base chains, created in this order.
    pub chains: Vec<Chain>,
}

/// A base chain: attached to a hook, with its rules in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// The chain's name.
    pub name: String,
    /// `type nat` or `type filter`.
    pub kind: ChainKind,
    /// The netfilter hook.
    pub hook: Hook,
    /// The priority at the hook (lower runs first).
    pub priority: i32,
    /// What happens to a packet no rule decided.
    pub policy: Policy,
    /// The rules, appended in order.
    pub rules: Vec<Rule>,
}

/// A base chain's type (`NFTA_CHAIN_TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainKind {
    /// `nat`: sees the first packet of each connection only.
    Nat,
    /// `filter`: sees every packet.
    Filter,
}

impl ChainKind {
    /// The kernel's name of the chain type.
    pub fn name(self) -> &'static str {
        match self {
            ChainKind::Nat => "nat",
            ChainKind::Filter => "filter",
        }
    }
}

/// The netfilter hooks podtap's chains attach to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// `prerouting` (`NF_INET_PRE_ROUTING`).
    Prerouting,
    /// `output` (`NF_INET_LOCAL_OUT`).
    Output,
    /// `postrouting` (`NF_INET_POST_ROUTING`).
    Postrouting,
}

impl Hook {
    /// `NFTA_HOOK_HOOKNUM`.
    pub fn number(self) -> u32 {
        match self {
            Hook::Prerouting => NF_INET_PRE_ROUTING,
            Hook::Output => NF_INET_LOCAL_OUT,
            Hook::Postrouting => NF_INET_POST_ROUTING,
        }
    }
}

/// A base chain's policy (`NFTA_CHAIN_POLICY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// `NF_ACCEPT`.
    Accept,
}

impl Policy {
    /// The verdict code.
    pub fn code(self) -> u32 {
        match self {
            Policy::Accept => NF_ACCEPT,
        }
    }
}

/// An interface name that fits the kernel's `IFNAMSIZ` (1 to 15 bytes, no
/// NUL, no '/'), as `iifname`/`oifname` compare it: padded with NULs to
/// 16 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfName(String);

impl IfName {
    /// `name`, or why it is no interface name.
    pub fn new(name: &str) -> Result<Self, Invalid> {
        let ok = !name.is_empty()
            && name.len() < IFNAMSIZ
            && !name
                .bytes()
                .any(|b| b == 0 || b == b'/' || b.is_ascii_whitespace());
        if ok {
            Ok(IfName(name.to_owned()))
        } else {
            Err(Invalid(format!("{name:?} is not an interface name")))
        }
    }

    /// The name padded with NULs to `IFNAMSIZ`, as `meta iifname` loads it.
    fn padded(&self) -> Vec<u8> {
        let mut b = self.0.as_bytes().to_vec();
        b.resize(IFNAMSIZ, 0);
        b
    }
}

/// A value that cannot become a table (named in the message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

/// An IP family, for the rules that exist in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// IPv4 (`meta nfproto ipv4`).
    V4,
    /// IPv6 (`meta nfproto ipv6`).
    V6,
}

/// One rule: a fixed shape with its parameters. The only way to make one is
/// a constructor below, each documented with the nft text it reads back as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    exprs: Vec<Expr>,
}

impl Rule {
    /// The rule's expressions, in order.
    pub fn exprs(&self) -> &[Expr] {
        &self.exprs
    }

    /// `ip daddr 127.0.0.1 meta l4proto tcp dnat ip to <guest>` or
    /// `ip6 daddr ::1 meta l4proto tcp dnat ip6 to <guest>` (the port is
    /// kept), by `guest`'s family.
    pub fn dnat_loopback(guest: IpAddr) -> Self {
        let loopback = match guest {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        };
        let mut exprs = addr_match(Side::Dst, loopback);
        exprs.push(Expr::Meta(NFT_META_L4PROTO));
        exprs.push(Expr::Eq(vec![IPPROTO_TCP]));
        exprs.extend(nat(NFT_NAT_DNAT, guest));
        Rule { exprs }
    }

    /// `oifname "<oif>" ip saddr 127.0.0.1 snat ip to <to>` or
    /// `oifname "<oif>" ip6 saddr ::1 snat ip6 to <to>`, by `to`'s family.
    pub fn snat_loopback(oif: &IfName, to: IpAddr) -> Self {
        let loopback = match to {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        };
        let mut exprs = vec![Expr::Meta(NFT_META_OIFNAME), Expr::Eq(oif.padded())];
        exprs.extend(addr_match(Side::Src, loopback));
        exprs.extend(nat(NFT_NAT_SNAT, to));
        Rule { exprs }
    }

    /// `meta iifgroup <group> ip saddr <src> accept` or
    /// `meta iifgroup <group> ip6 saddr <src> accept`.
    pub fn accept_source(group: u32, src: IpAddr) -> Self {
        let mut exprs = iif_group(group).to_vec();
        exprs.extend(addr_match(Side::Src, src));
        exprs.push(Expr::Verdict(NF_ACCEPT));
        Rule { exprs }
    }

    /// `meta iifgroup <group> ip6 saddr fe80::/10 accept`.
    pub fn accept_link_local(group: u32) -> Self {
        let mut mask = [0u8; 16];
        mask[0] = 0xff;
        mask[1] = 0xc0;
        let mut fe80 = [0u8; 16];
        fe80[0] = 0xfe;
        fe80[1] = 0x80;
        let [meta, group] = iif_group(group);
        let exprs = vec![
            meta,
            group,
            Expr::Meta(NFT_META_NFPROTO),
            Expr::Eq(vec![NFPROTO_IPV6]),
            Expr::Network {
                offset: IPV6_SADDR,
                len: 16,
            },
            Expr::Mask(mask.to_vec()),
            Expr::Eq(fe80.to_vec()),
            Expr::Verdict(NF_ACCEPT),
        ];
        Rule { exprs }
    }

    /// `meta iifgroup <group> meta nfproto ipv4|ipv6 counter drop`.
    pub fn drop_family(group: u32, family: Family) -> Self {
        let proto = match family {
            Family::V4 => NFPROTO_IPV4,
            Family::V6 => NFPROTO_IPV6,
        };
        let [meta, group] = iif_group(group);
        let exprs = vec![
            meta,
            group,
            Expr::Meta(NFT_META_NFPROTO),
            Expr::Eq(vec![proto]),
            Expr::Counter,
            Expr::Verdict(NF_DROP),
        ];
        Rule { exprs }
    }

    /// This rule with `fib daddr type local` in front: it then matches only
    /// packets whose destination is an address of this netns.
    pub fn if_daddr_local(mut self) -> Self {
        let fib = [
            Expr::FibDaddrType,
            Expr::Eq(RTN_LOCAL.to_ne_bytes().to_vec()),
        ];
        self.exprs.splice(0..0, fib);
        self
    }
}

/// `saddr`'s offset in the IPv4 and IPv6 headers; `daddr` follows it.
const IPV4_SADDR: u32 = 12;
const IPV6_SADDR: u32 = 8;

#[derive(Clone, Copy)]
enum Side {
    Src,
    Dst,
}

/// `ip saddr|daddr <addr>` in an inet table: nft's dependency on the
/// family (`meta nfproto`), the address load and the compare.
fn addr_match(side: Side, addr: IpAddr) -> Vec<Expr> {
    let (proto, offset, bytes) = match addr {
        IpAddr::V4(a) => (NFPROTO_IPV4, IPV4_SADDR, a.octets().to_vec()),
        IpAddr::V6(a) => (NFPROTO_IPV6, IPV6_SADDR, a.octets().to_vec()),
    };
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    let offset = match side {
        Side::Src => offset,
        Side::Dst => offset + len,
    };
    vec![
        Expr::Meta(NFT_META_NFPROTO),
        Expr::Eq(vec![proto]),
        Expr::Network { offset, len },
        Expr::Eq(bytes),
    ]
}

/// `meta iifgroup <group>`: the input interface's link group (a `u32` in
/// host byte order, as the kernel loads `dev->group`).
fn iif_group(group: u32) -> [Expr; 2] {
    [
        Expr::Meta(NFT_META_IIFGROUP),
        Expr::Eq(group.to_ne_bytes().to_vec()),
    ]
}

/// `snat|dnat ip|ip6 to <addr>`: the address into register 1, then NAT.
fn nat(kind: u32, addr: IpAddr) -> [Expr; 2] {
    let (family, bytes) = match addr {
        IpAddr::V4(a) => (NFPROTO_IPV4, a.octets().to_vec()),
        IpAddr::V6(a) => (NFPROTO_IPV6, a.octets().to_vec()),
    };
    [Expr::Load(bytes), Expr::Nat { kind, family }]
}

/// One attachment's table, as parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The attachment's id: the table is `podtap_<id as 8 hex digits>`.
    pub id: u32,
    /// The sandbox id: the marker is `podtap:<sandbox>`.
    pub sandbox: String,
    /// Loopback forwarding into one guest, if any.
    pub forward: Option<Forward>,
    /// Anti-spoofing on the attachment's routed TAPs.
    pub guard: Option<Guard>,
    /// Put `fib daddr type local` in front of the DNAT rules.
    pub local_daddr_check: bool,
}

/// Connections to the pod's loopback go to a guest through one TAP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    /// The TAP the guest is behind.
    pub tap: String,
    /// `127.0.0.1` goes to this guest address, from `snat` (an address of
    /// the pod on `tap`'s side).
    pub v4: Option<NatPair<Ipv4Addr>>,
    /// `::1` goes to this guest address, from `snat`.
    pub v6: Option<NatPair<Ipv6Addr>>,
}

/// Where a loopback connection goes and the source it then has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NatPair<A> {
    /// The guest's address (DNAT target).
    pub guest: A,
    /// The source address the guest sees (SNAT target).
    pub snat: A,
}

/// The routed TAPs of one attachment (every TAP of its link group) and
/// the guest addresses their packets may come from: any of them on any
/// TAP, since a reply may leave by another NIC than its flow came in on.
/// Matching the group, not each TAP's name, keeps the chain's length
/// linear in the NICs (addresses + 4 rules), where one rule per TAP and
/// address grew with their product past what one netlink message holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    /// The attachment's link group.
    pub group: u32,
    /// The guests' IPv4 addresses.
    pub v4: Vec<Ipv4Addr>,
    /// The guests' IPv6 addresses (link-local and `::` are always allowed).
    pub v6: Vec<Ipv6Addr>,
}

/// The most bytes of a marker: nft shows a table comment of up to 127.
pub const MARKER_MAX: usize = 127;

impl Table {
    /// The name of attachment `id`'s table.
    pub fn name_of(id: u32) -> String {
        format!("podtap_{id:08x}")
    }

    /// The marker of sandbox `sandbox`'s tables.
    pub fn marker_of(sandbox: &str) -> String {
        format!("podtap:{sandbox}")
    }

    /// The table of one attachment: the `output` and `postrouting` nat
    /// chains when it forwards, the `prerouting` filter chain when it
    /// guards a TAP.
    pub fn podtap(spec: &Spec) -> Result<Table, Invalid> {
        let marker = Self::marker_of(&spec.sandbox);
        if marker.len() > MARKER_MAX || marker.contains('\0') {
            return Err(Invalid(format!(
                "the marker {marker:?} is longer than {MARKER_MAX} bytes or holds a NUL"
            )));
        }
        let mut chains = Vec::new();
        if let Some(f) = &spec.forward {
            chains.extend(forward_chains(f, spec.local_daddr_check)?);
        }
        if let Some(g) = &spec.guard {
            chains.push(guard_chain(g));
        }
        Ok(Table {
            name: Self::name_of(spec.id),
            marker,
            chains,
        })
    }

    /// The marker as stored in `NFTA_TABLE_USERDATA`: one TLV of type
    /// `NFTNL_UDATA_TABLE_COMMENT` holding the NUL-terminated marker.
    pub fn userdata(&self) -> Option<Vec<u8>> {
        let len = u8::try_from(self.marker.len() + 1).ok()?;
        let mut u = vec![NFTNL_UDATA_TABLE_COMMENT, len];
        u.extend_from_slice(self.marker.as_bytes());
        u.push(0);
        (u.len() <= NFT_USERDATA_MAXLEN).then_some(u)
    }
}

fn forward_chains(f: &Forward, local_check: bool) -> Result<[Chain; 2], Invalid> {
    let tap = IfName::new(&f.tap)?;
    let (mut dnat, mut snat) = (Vec::new(), Vec::new());
    let pairs = [
        f.v4.map(|p| (IpAddr::V4(p.guest), IpAddr::V4(p.snat))),
        f.v6.map(|p| (IpAddr::V6(p.guest), IpAddr::V6(p.snat))),
    ];
    for (guest, from) in pairs.into_iter().flatten() {
        let rule = Rule::dnat_loopback(guest);
        dnat.push(if local_check {
            rule.if_daddr_local()
        } else {
            rule
        });
        snat.push(Rule::snat_loopback(&tap, from));
    }
    if dnat.is_empty() {
        return Err(Invalid(format!(
            "the forward through {} has no address",
            f.tap
        )));
    }
    let chain = |name: &str, hook, priority, rules| Chain {
        name: name.into(),
        kind: ChainKind::Nat,
        hook,
        priority,
        policy: Policy::Accept,
        rules,
    };
    Ok([
        chain("output", Hook::Output, -100, dnat),
        chain("postrouting", Hook::Postrouting, 100, snat),
    ])
}

fn guard_chain(g: &Guard) -> Chain {
    let mut rules: Vec<Rule> =
        g.v4.iter()
            .map(|a| IpAddr::V4(*a))
            .chain(g.v6.iter().map(|a| IpAddr::V6(*a)))
            .map(|a| Rule::accept_source(g.group, a))
            .collect();
    rules.push(Rule::accept_link_local(g.group));
    rules.push(Rule::accept_source(
        g.group,
        IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    ));
    rules.push(Rule::drop_family(g.group, Family::V4));
    rules.push(Rule::drop_family(g.group, Family::V6));
    Chain {
        name: "prerouting".into(),
        kind: ChainKind::Filter,
        hook: Hook::Prerouting,
        priority: -300,
        policy: Policy::Accept,
        rules,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn spec() -> Spec {
        Spec {
            id: 0x0a1b_2c3d,
            sandbox: "sb1".into(),
            forward: Some(Forward {
                tap: "tap0".into(),
                v4: Some(NatPair {
                    guest: Ipv4Addr::new(10, 0, 0, 2),
                    snat: Ipv4Addr::new(10, 0, 0, 1),
                }),
                v6: None,
            }),
            guard: Some(Guard {
                group: 0x7000_0001,
                v4: vec![Ipv4Addr::new(10, 0, 0, 2)],
                v6: vec![],
            }),
            local_daddr_check: false,
        }
    }

    #[test]
    fn an_attachment_has_its_named_table_and_chains() {
        let t = Table::podtap(&spec()).unwrap();
        assert_eq!(t.name, "podtap_0a1b2c3d");
        assert_eq!(t.marker, "podtap:sb1");
        let names: Vec<_> = t.chains.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["output", "postrouting", "prerouting"]);
        // One v4 source, link-local, ::, two drops.
        assert_eq!(t.chains[2].rules.len(), 5);
        assert_eq!(t.userdata().unwrap(), b"\x00\x0bpodtap:sb1\x00");
    }

    #[test]
    fn a_dnat_rule_matches_loopback_and_tcp_then_translates() {
        let r = Rule::dnat_loopback(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
        assert_eq!(
            r.exprs(),
            &[
                Expr::Meta(NFT_META_NFPROTO),
                Expr::Eq(vec![2]),
                Expr::Network { offset: 16, len: 4 },
                Expr::Eq(vec![127, 0, 0, 1]),
                Expr::Meta(NFT_META_L4PROTO),
                Expr::Eq(vec![6]),
                Expr::Load(vec![10, 0, 0, 2]),
                Expr::Nat {
                    kind: NFT_NAT_DNAT,
                    family: NFPROTO_IPV4
                },
            ]
        );
    }

    #[test]
    fn bad_names_and_markers_are_refused() {
        assert!(IfName::new("").is_err());
        assert!(IfName::new("sixteen_bytes_xx").is_err());
        assert!(IfName::new("a/b").is_err());
        assert!(IfName::new("fifteen_bytes_x").is_ok());
        let mut s = spec();
        s.sandbox = "x".repeat(200);
        assert!(Table::podtap(&s).is_err());
        let mut s = spec();
        s.forward.as_mut().unwrap().v4 = None;
        assert!(Table::podtap(&s).is_err());
    }
}
