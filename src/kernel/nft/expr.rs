//! The nf_tables expressions podtap's rules are made of, and their wire form.
//!
//! A rule is a list of expressions run in order over registers: a load
//! (`meta`, `payload`, `fib`, `immediate`) writes register 1, a `cmp`
//! ends the rule when register 1 differs from its data, `bitwise` masks
//! register 1, `nat` reads its address from register 1, and an
//! `immediate` into the verdict register decides. Every podtap rule uses
//! register 1 only, as nft does for such rules.
//!
//! Each expression is encoded as the kernel dumps it back (its attributes in
//! the order of the kernel's `dump` function, with the ones the kernel fills
//! in itself: a NAT's `REG_ADDR_MAX` and `FLAGS`, a bitwise's `OP`), so
//! that what the kernel dumps of a rule is byte for byte what was sent,
//! but for two things: the kernel writes its nests without `NLA_F_NESTED`
//! ([`encode_as_dumped`] writes that form), and counters' values move.

use super::attr::Writer;
use super::sys::*;

/// One expression (all of them use register 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// `meta load <key> => reg 1`.
    Meta(u32),
    /// `payload load <len>b @ network header + <offset> => reg 1`.
    Network {
        /// Byte offset in the network header.
        offset: u32,
        /// Bytes loaded.
        len: u32,
    },
    /// `cmp eq reg 1 <data>`.
    Eq(Vec<u8>),
    /// `bitwise reg 1 = (reg 1 & <mask>) ^ 0`.
    Mask(Vec<u8>),
    /// `immediate reg 1 <data>`.
    Load(Vec<u8>),
    /// `immediate reg 0 <verdict>` (an `NF_*` code).
    Verdict(u32),
    /// `nat snat|dnat <family> addr_min reg 1`.
    Nat {
        /// [`NFT_NAT_SNAT`] or [`NFT_NAT_DNAT`].
        kind: u32,
        /// [`NFPROTO_IPV4`] or [`NFPROTO_IPV6`].
        family: u8,
    },
    /// `counter` (created at zero).
    Counter,
    /// `fib daddr type => reg 1`.
    FibDaddrType,
}

impl Expr {
    /// The expression's name (`NFTA_EXPR_NAME`): the kernel module's.
    pub fn name(&self) -> &'static str {
        match self {
            Expr::Meta(_) => "meta",
            Expr::Network { .. } => "payload",
            Expr::Eq(_) => "cmp",
            Expr::Mask(_) => "bitwise",
            Expr::Load(_) | Expr::Verdict(_) => "immediate",
            Expr::Nat { .. } => "nat",
            Expr::Counter => "counter",
            Expr::FibDaddrType => "fib",
        }
    }

    /// Append this expression as one `NFTA_LIST_ELEM` of a rule's
    /// `NFTA_RULE_EXPRESSIONS`: `NFTA_EXPR_NAME` and `NFTA_EXPR_DATA`.
    pub fn encode(&self, w: &mut Writer) {
        w.nest(NFTA_LIST_ELEM, |w| {
            w.string(NFTA_EXPR_NAME, self.name());
            w.nest(NFTA_EXPR_DATA, |w| self.data(w));
        });
    }

    /// The attributes of `NFTA_EXPR_DATA`.
    fn data(&self, w: &mut Writer) {
        match self {
            Expr::Meta(key) => {
                w.be32(NFTA_META_KEY, *key);
                w.be32(NFTA_META_DREG, NFT_REG_1);
            }
            Expr::Network { offset, len } => {
                w.be32(NFTA_PAYLOAD_DREG, NFT_REG_1);
                w.be32(NFTA_PAYLOAD_BASE, NFT_PAYLOAD_NETWORK_HEADER);
                w.be32(NFTA_PAYLOAD_OFFSET, *offset);
                w.be32(NFTA_PAYLOAD_LEN, *len);
            }
            Expr::Eq(data) => {
                w.be32(NFTA_CMP_SREG, NFT_REG_1);
                w.be32(NFTA_CMP_OP, NFT_CMP_EQ);
                value(w, NFTA_CMP_DATA, data);
            }
            Expr::Mask(mask) => mask_data(w, mask),
            Expr::Load(data) => {
                w.be32(NFTA_IMMEDIATE_DREG, NFT_REG_1);
                value(w, NFTA_IMMEDIATE_DATA, data);
            }
            Expr::Verdict(code) => {
                w.be32(NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
                w.nest(NFTA_IMMEDIATE_DATA, |w| {
                    w.nest(NFTA_DATA_VERDICT, |w| w.be32(NFTA_VERDICT_CODE, *code));
                });
            }
            Expr::Nat { kind, family } => {
                w.be32(NFTA_NAT_TYPE, *kind);
                w.be32(NFTA_NAT_FAMILY, u32::from(*family));
                w.be32(NFTA_NAT_REG_ADDR_MIN, NFT_REG_1);
                w.be32(NFTA_NAT_REG_ADDR_MAX, NFT_REG_1);
                w.be32(NFTA_NAT_FLAGS, NF_NAT_RANGE_MAP_IPS);
            }
            Expr::Counter => {
                w.be64(NFTA_COUNTER_BYTES, 0);
                w.be64(NFTA_COUNTER_PACKETS, 0);
            }
            Expr::FibDaddrType => {
                w.be32(NFTA_FIB_DREG, NFT_REG_1);
                w.be32(NFTA_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE);
                w.be32(NFTA_FIB_FLAGS, NFTA_FIB_F_DADDR);
            }
        }
    }
}

/// `bitwise`: register 1 = (register 1 & mask) ^ 0, over the mask's length.
fn mask_data(w: &mut Writer, mask: &[u8]) {
    w.be32(NFTA_BITWISE_SREG, NFT_REG_1);
    w.be32(NFTA_BITWISE_DREG, NFT_REG_1);
    w.be32(
        NFTA_BITWISE_LEN,
        u32::try_from(mask.len()).unwrap_or(u32::MAX),
    );
    w.be32(NFTA_BITWISE_OP, NFT_BITWISE_BOOL);
    value(w, NFTA_BITWISE_MASK, mask);
    value(w, NFTA_BITWISE_XOR, &vec![0; mask.len()]);
}

/// `kind` holding `NFTA_DATA_VALUE` with `data` (an `nft_data` value).
fn value(w: &mut Writer, kind: u16, data: &[u8]) {
    w.nest(kind, |w| w.bytes(NFTA_DATA_VALUE, data));
}

/// The bytes of `NFTA_RULE_EXPRESSIONS` for `exprs` (without the outer
/// attribute header), or `None` when one does not fit.
pub fn encode_all(exprs: &[Expr]) -> Option<Vec<u8>> {
    encode_into(Writer::new(), exprs)
}

/// What the kernel dumps of `NFTA_RULE_EXPRESSIONS` after [`encode_all`]
/// sent `exprs`: the same bytes without `NLA_F_NESTED` (found on 6.18:
/// every other byte is equal, counters at zero included).
pub fn encode_as_dumped(exprs: &[Expr]) -> Option<Vec<u8>> {
    encode_into(Writer::as_dumped(), exprs)
}

fn encode_into(mut w: Writer, exprs: &[Expr]) -> Option<Vec<u8>> {
    for e in exprs {
        e.encode(&mut w);
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::nft::attr::{attributes, be32, find, string};

    #[test]
    fn an_expression_is_a_list_element_with_its_name_and_data() {
        let bytes = encode_all(&[Expr::Meta(NFT_META_NFPROTO), Expr::Counter]).unwrap();
        let elems: Vec<_> = attributes(&bytes).collect();
        assert_eq!(elems.len(), 2);
        assert!(elems.iter().all(|(k, _)| *k == NFTA_LIST_ELEM));
        let meta = elems[0].1;
        assert_eq!(find(meta, NFTA_EXPR_NAME).map(string), Some(&b"meta"[..]));
        let data = find(meta, NFTA_EXPR_DATA).unwrap();
        // The kernel's order: key, then the destination register.
        let attrs: Vec<_> = attributes(data).map(|(k, v)| (k, be32(v))).collect();
        assert_eq!(
            attrs,
            vec![
                (NFTA_META_KEY, Some(NFT_META_NFPROTO)),
                (NFTA_META_DREG, Some(NFT_REG_1))
            ]
        );
    }

    #[test]
    fn a_verdict_is_nested_twice() {
        let bytes = encode_all(&[Expr::Verdict(NF_DROP)]).unwrap();
        let (_, elem) = attributes(&bytes).next().unwrap();
        let data = find(elem, NFTA_EXPR_DATA).unwrap();
        let imm = find(data, NFTA_IMMEDIATE_DATA).unwrap();
        let verdict = find(imm, NFTA_DATA_VERDICT).unwrap();
        assert_eq!(
            find(verdict, NFTA_VERDICT_CODE).and_then(be32),
            Some(NF_DROP)
        );
        assert_eq!(find(data, NFTA_IMMEDIATE_DREG).and_then(be32), Some(0));
    }
}
