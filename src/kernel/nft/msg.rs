//! The nfnetlink messages: a [`Table`] as one batch, the deletion batch,
//! and the requests that read a table back. Pure: bytes out, no socket.
//!
//! A batch is `NFNL_MSG_BATCH_BEGIN`, the nf_tables messages, and
//! `NFNL_MSG_BATCH_END`, in one `sendmsg`. The kernel applies all of its
//! messages or none. Every message between begin and end asks for an ack
//! (`NLM_F_ACK`); begin and end do not (kernels before 6.10 ignore the flag
//! there, so it could not be waited for).

use rtnetlink::packet_core::{
    NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REQUEST,
};

use super::attr::{Header, Writer};
use super::expr::encode_all;
use super::model::{Chain, Invalid, Table};
use super::sys::*;

/// What one message of a batch does, to name it in an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// The batch as a whole (an error on `NFNL_MSG_BATCH_BEGIN`'s sequence
    /// number: the batch was refused or its commit failed).
    Batch,
    /// `NFT_MSG_NEWTABLE` of this table.
    NewTable(String),
    /// `NFT_MSG_NEWCHAIN` of this chain.
    NewChain(String),
    /// `NFT_MSG_NEWRULE`: rule `index` (from 0) of `chain`.
    NewRule {
        /// The chain.
        chain: String,
        /// The rule's place in it.
        index: usize,
    },
    /// `NFT_MSG_DELTABLE` of the table with this handle.
    DelTable(u64),
    /// A request outside a batch (a get or a dump), by its message type.
    Get(&'static str),
}

/// An encoded batch: its bytes and the sequence number of each message.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The datagram: begin, the messages, end.
    pub bytes: Vec<u8>,
    /// The sequence number of `NFNL_MSG_BATCH_BEGIN`; the kernel reports a
    /// failure of the whole batch under it.
    pub begin: u32,
    /// Each message that asks for an ack, with what it does.
    pub acked: Vec<(u32, Op)>,
}

/// Sequence numbers a batch uses: `first`, `first + 1`, ...
struct Seqs(u32);

impl Seqs {
    fn next(&mut self) -> u32 {
        let s = self.0;
        self.0 = self.0.wrapping_add(1);
        s
    }
}

/// How many sequence numbers [`create`] uses for `table`.
pub fn create_len(table: &Table) -> u32 {
    let n = 3 + table.chains.len() + table.chains.iter().map(|c| c.rules.len()).sum::<usize>();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `table` as one batch whose messages take sequence numbers from `first`
/// on: the table (`NLM_F_CREATE | NLM_F_EXCL`: fails with `EEXIST` if a
/// table of that name exists), each chain (the same flags), each rule
/// (`NLM_F_CREATE | NLM_F_APPEND`, in order).
pub fn create(table: &Table, first: u32) -> Result<Batch, Invalid> {
    build(table, first, None)
}

/// [`create`], preceded in the same batch by the deletion of the table
/// with `handle` (the one of that name, read in `generation`: the kernel
/// refuses the batch with `ERESTART` if the ruleset moved since). The
/// table is replaced at once: no packet sees the netns without it.
pub fn replace(table: &Table, handle: u64, generation: u32, first: u32) -> Result<Batch, Invalid> {
    build(table, first, Some((handle, generation)))
}

fn build(table: &Table, first: u32, replacing: Option<(u64, u32)>) -> Result<Batch, Invalid> {
    let too_long = || {
        Invalid(format!(
            "the table {} does not fit a netlink message",
            table.name
        ))
    };
    let userdata = table.userdata().ok_or_else(too_long)?;
    let mut seqs = Seqs(first);
    let mut w = Writer::new();
    let begin = batch_edge(
        &mut w,
        NFNL_MSG_BATCH_BEGIN,
        seqs.next(),
        replacing.map(|r| r.1),
    );
    let mut acked = Vec::new();
    if let Some((handle, _)) = replacing {
        let seq = seqs.next();
        del_table(&mut w, handle, seq);
        acked.push((seq, Op::DelTable(handle)));
    }
    let create = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    let seq = seqs.next();
    w.message(inet(NFT_MSG_NEWTABLE, create, seq), NFPROTO_INET, 0, |w| {
        w.string(NFTA_TABLE_NAME, &table.name);
        w.be32(NFTA_TABLE_FLAGS, 0);
        w.bytes(NFTA_TABLE_USERDATA, &userdata);
    });
    acked.push((seq, Op::NewTable(table.name.clone())));
    for chain in &table.chains {
        let seq = seqs.next();
        new_chain(&mut w, &table.name, chain, seq);
        acked.push((seq, Op::NewChain(chain.name.clone())));
    }
    let append = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_APPEND;
    for chain in &table.chains {
        for (index, rule) in chain.rules.iter().enumerate() {
            let exprs = encode_all(rule.exprs()).ok_or_else(too_long)?;
            let seq = seqs.next();
            w.message(inet(NFT_MSG_NEWRULE, append, seq), NFPROTO_INET, 0, |w| {
                w.string(NFTA_RULE_TABLE, &table.name);
                w.string(NFTA_RULE_CHAIN, &chain.name);
                w.nest(NFTA_RULE_EXPRESSIONS, |w| w.raw(&exprs));
            });
            let chain = chain.name.clone();
            acked.push((seq, Op::NewRule { chain, index }));
        }
    }
    batch_edge(&mut w, NFNL_MSG_BATCH_END, seqs.next(), None);
    let bytes = w.finish().ok_or_else(too_long)?;
    Ok(Batch {
        bytes,
        begin,
        acked,
    })
}

/// `NFT_MSG_NEWCHAIN` of a base chain: table, name, type, policy, hook.
fn new_chain(w: &mut Writer, table: &str, chain: &Chain, seq: u32) {
    let flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    w.message(inet(NFT_MSG_NEWCHAIN, flags, seq), NFPROTO_INET, 0, |w| {
        w.string(NFTA_CHAIN_TABLE, table);
        w.string(NFTA_CHAIN_NAME, &chain.name);
        w.string(NFTA_CHAIN_TYPE, chain.kind.name());
        w.be32(NFTA_CHAIN_POLICY, chain.policy.code());
        w.nest(NFTA_CHAIN_HOOK, |w| {
            w.be32(NFTA_HOOK_HOOKNUM, chain.hook.number());
            w.be32(
                NFTA_HOOK_PRIORITY,
                u32::from_be_bytes(chain.priority.to_be_bytes()),
            );
        });
    });
}

/// The batch that deletes the inet table with `handle` (`NFT_MSG_DELTABLE`
/// with `NFTA_TABLE_HANDLE`: its chains and rules go with it). With
/// `generation`, the kernel refuses the batch (`ERESTART`) unless the
/// ruleset is still at that generation.
pub fn delete(handle: u64, generation: Option<u32>, first: u32) -> Batch {
    let mut seqs = Seqs(first);
    let mut w = Writer::new();
    let begin = batch_edge(&mut w, NFNL_MSG_BATCH_BEGIN, seqs.next(), generation);
    let seq = seqs.next();
    del_table(&mut w, handle, seq);
    batch_edge(&mut w, NFNL_MSG_BATCH_END, seqs.next(), None);
    Batch {
        // Three fixed-size messages always fit.
        bytes: w.finish().unwrap_or_default(),
        begin,
        acked: vec![(seq, Op::DelTable(handle))],
    }
}

/// `NFT_MSG_DELTABLE` of the inet table with `handle`.
fn del_table(w: &mut Writer, handle: u64, seq: u32) {
    let flags = NLM_F_REQUEST | NLM_F_ACK;
    w.message(inet(NFT_MSG_DELTABLE, flags, seq), NFPROTO_INET, 0, |w| {
        w.be64(NFTA_TABLE_HANDLE, handle);
    });
}

/// `NFNL_MSG_BATCH_BEGIN` or `_END`: family `AF_UNSPEC`, `res_id`
/// `NFNL_SUBSYS_NFTABLES` (big-endian), and for a begin, optionally
/// `NFNL_BATCH_GENID`. Returns `seq`.
fn batch_edge(w: &mut Writer, kind: u16, seq: u32, generation: Option<u32>) -> u32 {
    let header = Header {
        kind,
        flags: NLM_F_REQUEST,
        seq,
    };
    w.message(header, NFPROTO_UNSPEC, NFNL_SUBSYS_NFTABLES, |w| {
        if let Some(g) = generation {
            w.be32(NFNL_BATCH_GENID, g);
        }
    });
    seq
}

fn inet(msg: u8, flags: u16, seq: u32) -> Header {
    Header {
        kind: nft_type(msg),
        flags,
        seq,
    }
}

/// `NFT_MSG_GETGEN`: the kernel answers `NFT_MSG_NEWGEN` with
/// `NFTA_GEN_ID`, then the ack.
pub fn get_generation(seq: u32) -> Vec<u8> {
    let mut w = Writer::new();
    let flags = NLM_F_REQUEST | NLM_F_ACK;
    w.message(inet(NFT_MSG_GETGEN, flags, seq), NFPROTO_UNSPEC, 0, |_| {});
    w.finish().unwrap_or_default()
}

/// `NFT_MSG_GETTABLE` of the inet table `name`: one `NFT_MSG_NEWTABLE`
/// and the ack, or `ENOENT`.
pub fn get_table(name: &str, seq: u32) -> Result<Vec<u8>, Invalid> {
    let mut w = Writer::new();
    let flags = NLM_F_REQUEST | NLM_F_ACK;
    w.message(inet(NFT_MSG_GETTABLE, flags, seq), NFPROTO_INET, 0, |w| {
        w.string(NFTA_TABLE_NAME, name);
    });
    w.finish()
        .ok_or_else(|| Invalid(format!("{name:?} is too long")))
}

/// A dump of every inet table.
pub fn dump_tables(seq: u32) -> Vec<u8> {
    let mut w = Writer::new();
    w.message(
        inet(NFT_MSG_GETTABLE, NLM_F_REQUEST | NLM_F_DUMP, seq),
        NFPROTO_INET,
        0,
        |_| {},
    );
    w.finish().unwrap_or_default()
}

/// A dump of the inet family's chains (the kernel dumps every table's;
/// the reader keeps `table`'s) or rules (`NFTA_RULE_TABLE` makes the
/// kernel dump only `table`'s).
pub fn dump(what: Dump, table: &str, seq: u32) -> Result<Vec<u8>, Invalid> {
    let mut w = Writer::new();
    let flags = NLM_F_REQUEST | NLM_F_DUMP;
    let (msg, attr) = match what {
        Dump::Chains => (NFT_MSG_GETCHAIN, NFTA_CHAIN_TABLE),
        Dump::Rules => (NFT_MSG_GETRULE, NFTA_RULE_TABLE),
    };
    w.message(inet(msg, flags, seq), NFPROTO_INET, 0, |w| {
        w.string(attr, table);
    });
    w.finish()
        .ok_or_else(|| Invalid(format!("{table:?} is too long")))
}

/// What [`dump`] dumps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dump {
    /// `NFT_MSG_GETCHAIN`.
    Chains,
    /// `NFT_MSG_GETRULE`.
    Rules,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::nft::attr::{be32, find, frames};
    use crate::kernel::nft::model::{Forward, Guard, NatPair, Spec};
    use std::net::Ipv4Addr;

    fn table() -> Table {
        Table::podtap(&Spec {
            id: 1,
            sandbox: "s".into(),
            forward: Some(Forward {
                tap: "t0".into(),
                v4: Some(NatPair {
                    guest: Ipv4Addr::new(10, 0, 0, 2),
                    snat: Ipv4Addr::new(10, 0, 0, 1),
                }),
                v6: None,
            }),
            guard: Some(Guard {
                group: 7,
                v4: vec![],
                v6: vec![],
            }),
            local_daddr_check: false,
        })
        .unwrap()
    }

    #[test]
    fn a_batch_is_begin_table_chains_rules_end_with_consecutive_seqs() {
        let t = table();
        let b = create(&t, 100).unwrap();
        let kinds: Vec<(u16, u32, u16)> =
            frames(&b.bytes).map(|f| (f.kind, f.seq, f.flags)).collect();
        let n = usize::try_from(create_len(&t)).unwrap();
        assert_eq!(kinds.len(), n);
        assert_eq!(kinds[0], (NFNL_MSG_BATCH_BEGIN, 100, NLM_F_REQUEST));
        assert_eq!(kinds[n - 1].0, NFNL_MSG_BATCH_END);
        assert_eq!(kinds[1].0, nft_type(NFT_MSG_NEWTABLE));
        assert_eq!(
            kinds[1].2,
            NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
        );
        assert!(kinds.windows(2).all(|w| w[1].1 == w[0].1 + 1));
        assert_eq!(b.begin, 100);
        assert_eq!(b.acked.len(), n - 2);
        assert_eq!(b.acked[0], (101, Op::NewTable(t.name.clone())));
        // The begin's res_id is the subsystem, big-endian.
        let begin = frames(&b.bytes).next().unwrap();
        assert_eq!(begin.res_id(), Some(NFNL_SUBSYS_NFTABLES));
    }

    #[test]
    fn a_chain_carries_its_hook_and_a_negative_priority() {
        let t = table();
        let b = create(&t, 1).unwrap();
        let chain = frames(&b.bytes).nth(2).unwrap();
        let hook = chain
            .attributes()
            .find(|(k, _)| *k == NFTA_CHAIN_HOOK)
            .map(|(_, v)| v)
            .unwrap();
        assert_eq!(
            find(hook, NFTA_HOOK_HOOKNUM).and_then(be32),
            Some(NF_INET_LOCAL_OUT)
        );
        assert_eq!(
            find(hook, NFTA_HOOK_PRIORITY).and_then(be32),
            Some(u32::from_be_bytes((-100i32).to_be_bytes()))
        );
    }

    #[test]
    fn a_deletion_names_the_handle_and_the_generation() {
        let b = delete(0x1234, Some(77), 5);
        let f: Vec<_> = frames(&b.bytes).collect();
        assert_eq!(f.len(), 3);
        assert_eq!(find_attr(&f[0], NFNL_BATCH_GENID), Some(77));
        let handle = f[1]
            .attributes()
            .find(|(k, _)| *k == NFTA_TABLE_HANDLE)
            .unwrap()
            .1;
        assert_eq!(handle, 0x1234u64.to_be_bytes());
    }

    fn find_attr(f: &crate::kernel::nft::attr::Frame<'_>, kind: u16) -> Option<u32> {
        f.attributes()
            .find(|(k, _)| *k == kind)
            .and_then(|(_, v)| be32(v))
    }
}
