//! A table read back from the kernel, and how it compares with the
//! [`Table`] podtap meant. Pure: messages in, values out.

use super::attr::{attributes, be32, be64, find, string, Frame};
use super::expr::encode_as_dumped;
use super::model::Table;
use super::sys::*;

/// A table as the kernel dumped it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// `NFTA_TABLE_NAME`.
    pub name: String,
    /// `NFTA_TABLE_HANDLE`: unique in the netns for as long as it lives;
    /// a table made again under the same name has another.
    pub handle: u64,
    /// `NFTA_TABLE_FLAGS` (`NFT_TABLE_F_DORMANT`: its chains are detached).
    pub flags: u32,
    /// `NFTA_TABLE_USE`: how many chains, sets, objects and flowtables it holds.
    pub use_count: u32,
    /// `NFTA_TABLE_USERDATA` (empty without one).
    pub userdata: Vec<u8>,
    /// The ruleset generation all of this was read in.
    pub generation: u32,
    /// The `nfgenmsg.res_id` of the table's answer (big-endian bytes):
    /// the low 16 bits of the generation the kernel answered in.
    pub res_id: [u8; 2],
    /// Its chains in the kernel's order (creation order).
    pub chains: Vec<FoundChain>,
}

/// A chain as the kernel dumped it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundChain {
    /// `NFTA_CHAIN_NAME`.
    pub name: String,
    /// `NFTA_CHAIN_HANDLE`.
    pub handle: u64,
    /// `NFTA_CHAIN_TYPE` (base chains).
    pub kind: Option<String>,
    /// `NFTA_HOOK_HOOKNUM` and `NFTA_HOOK_PRIORITY` (base chains).
    pub hook: Option<(u32, i32)>,
    /// `NFTA_CHAIN_POLICY` (base chains).
    pub policy: Option<u32>,
    /// The rules, in order.
    pub rules: Vec<FoundRule>,
}

/// A rule as the kernel dumped it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundRule {
    /// `NFTA_RULE_HANDLE`.
    pub handle: u64,
    /// The value of `NFTA_RULE_EXPRESSIONS`, as dumped.
    pub expressions: Vec<u8>,
    /// Whether it has `NFTA_RULE_USERDATA` (nft's rule comment); podtap's
    /// have none.
    pub userdata: bool,
}

/// The table's attributes from an `NFT_MSG_NEWTABLE` answer.
pub fn parse_table(frame: &Frame<'_>, generation: u32) -> Option<Found> {
    let a = frame.attributes();
    let get = |k| a.clone().find(|(kind, _)| *kind == k).map(|(_, v)| v);
    Some(Found {
        name: String::from_utf8_lossy(string(get(NFTA_TABLE_NAME)?)).into_owned(),
        handle: be64(get(NFTA_TABLE_HANDLE)?)?,
        flags: get(NFTA_TABLE_FLAGS).and_then(be32).unwrap_or(0),
        use_count: get(NFTA_TABLE_USE).and_then(be32).unwrap_or(0),
        userdata: get(NFTA_TABLE_USERDATA).unwrap_or_default().to_vec(),
        generation,
        res_id: frame.res_id()?.to_be_bytes(),
        chains: Vec::new(),
    })
}

/// The table a chain or rule message belongs to.
pub fn table_of<'a>(frame: &Frame<'a>) -> Option<&'a [u8]> {
    // NFTA_CHAIN_TABLE and NFTA_RULE_TABLE are both attribute 1.
    frame
        .attributes()
        .find(|(k, _)| *k == NFTA_CHAIN_TABLE)
        .map(|(_, v)| string(v))
}

/// A chain from an `NFT_MSG_NEWCHAIN` answer.
pub fn parse_chain(frame: &Frame<'_>) -> Option<FoundChain> {
    let a = frame.attributes();
    let get = |k| a.clone().find(|(kind, _)| *kind == k).map(|(_, v)| v);
    let hook = get(NFTA_CHAIN_HOOK).and_then(|h| {
        let num = find(h, NFTA_HOOK_HOOKNUM).and_then(be32)?;
        let prio = find(h, NFTA_HOOK_PRIORITY).and_then(be32)?;
        Some((num, i32::from_be_bytes(prio.to_be_bytes())))
    });
    Some(FoundChain {
        name: String::from_utf8_lossy(string(get(NFTA_CHAIN_NAME)?)).into_owned(),
        handle: be64(get(NFTA_CHAIN_HANDLE)?)?,
        kind: get(NFTA_CHAIN_TYPE).map(|t| String::from_utf8_lossy(string(t)).into_owned()),
        hook,
        policy: get(NFTA_CHAIN_POLICY).and_then(be32),
        rules: Vec::new(),
    })
}

/// A rule and its chain's name from an `NFT_MSG_NEWRULE` answer.
pub fn parse_rule(frame: &Frame<'_>) -> Option<(String, FoundRule)> {
    let a = frame.attributes();
    let get = |k| a.clone().find(|(kind, _)| *kind == k).map(|(_, v)| v);
    let chain = String::from_utf8_lossy(string(get(NFTA_RULE_CHAIN)?)).into_owned();
    let rule = FoundRule {
        handle: be64(get(NFTA_RULE_HANDLE)?)?,
        expressions: get(NFTA_RULE_EXPRESSIONS)?.to_vec(),
        userdata: get(NFTA_RULE_USERDATA).is_some(),
    };
    Some((chain, rule))
}

/// `(name, data)` of each expression of an `NFTA_RULE_EXPRESSIONS` value,
/// with a counter's data left out (its values move with traffic; on
/// machines that align 64-bit attributes it also holds a pad attribute).
pub fn canonical(expressions: &[u8]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    attributes(expressions)
        .map(|(_, elem)| {
            let name = find(elem, NFTA_EXPR_NAME).map(string).unwrap_or_default();
            let data = find(elem, NFTA_EXPR_DATA).unwrap_or_default();
            let data = (name != b"counter").then(|| data.to_vec());
            (name.to_vec(), data)
        })
        .collect()
}

/// How `found` differs from `table`, one line per difference: nothing when
/// it is the table podtap made and nobody changed it since.
pub fn differences(table: &Table, found: &Found) -> Vec<String> {
    let mut out = Vec::new();
    if table.userdata().as_deref() != Some(&found.userdata[..]) {
        out.push("its marker differs".to_owned());
    }
    if found.flags != 0 {
        out.push(format!("its flags are {:#x} (dormant?)", found.flags));
    }
    let chains = u32::try_from(table.chains.len()).unwrap_or(u32::MAX);
    if found.use_count != chains {
        out.push(format!(
            "it holds {} objects, not {chains} chains",
            found.use_count
        ));
    }
    let names = |c: &mut dyn Iterator<Item = &str>| c.collect::<Vec<_>>().join(",");
    let ours = names(&mut table.chains.iter().map(|c| c.name.as_str()));
    let theirs = names(&mut found.chains.iter().map(|c| c.name.as_str()));
    if ours != theirs {
        out.push(format!("its chains are [{theirs}], not [{ours}]"));
        return out;
    }
    for (c, f) in table.chains.iter().zip(&found.chains) {
        chain_differences(c, f, &mut out);
    }
    out
}

fn chain_differences(c: &super::model::Chain, f: &FoundChain, out: &mut Vec<String>) {
    let base = (
        Some(c.kind.name()),
        Some((c.hook.number(), c.priority)),
        Some(c.policy.code()),
    );
    if (f.kind.as_deref(), f.hook, f.policy) != base {
        out.push(format!(
            "chain {}: its type, hook, priority or policy changed",
            c.name
        ));
    }
    if c.rules.len() != f.rules.len() {
        let (n, m) = (f.rules.len(), c.rules.len());
        out.push(format!("chain {}: {n} rules, not {m}", c.name));
        return;
    }
    for (i, (r, fr)) in c.rules.iter().zip(&f.rules).enumerate() {
        let ours = encode_as_dumped(r.exprs()).map(|b| canonical(&b));
        if ours.as_ref() != Some(&canonical(&fr.expressions)) || fr.userdata {
            out.push(format!(
                "chain {}: rule {i} (handle {}) changed",
                c.name, fr.handle
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::nft::expr::Expr;

    #[test]
    fn a_counter_compares_by_name_only() {
        let a =
            crate::kernel::nft::expr::encode_all(&[Expr::Counter, Expr::Verdict(NF_DROP)]).unwrap();
        let mut w = crate::kernel::nft::attr::Writer::new();
        w.nest(NFTA_LIST_ELEM, |w| {
            w.string(NFTA_EXPR_NAME, "counter");
            w.nest(NFTA_EXPR_DATA, |w| {
                w.be64(NFTA_COUNTER_BYTES, 1500);
                w.be64(NFTA_COUNTER_PACKETS, 1);
            });
        });
        Expr::Verdict(NF_DROP).encode(&mut w);
        let b = w.finish().unwrap();
        assert_ne!(a, b);
        assert_eq!(canonical(&a), canonical(&b));
        let c = crate::kernel::nft::expr::encode_all(&[Expr::Counter, Expr::Verdict(NF_ACCEPT)])
            .unwrap();
        assert_ne!(canonical(&a), canonical(&c));
    }
}
