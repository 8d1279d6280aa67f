//! The kernel's numbers, from `linux/netfilter/nfnetlink.h`,
//! `linux/netfilter/nf_tables.h`, `linux/netfilter/nf_nat.h` and
//! `linux/netfilter.h` (checked against linux-libc-dev's copies). Each
//! group says what it is for; the README lists every attribute and its
//! payload.

// The header constants keep the kernel's names, so that they can be
// grepped for in the kernel and in these headers.
#![allow(missing_docs)]

/// `NETLINK_NETFILTER`, the netlink protocol of nfnetlink.
pub const NETLINK_NETFILTER: isize = 12;

/// `NLMSG_ERROR`: an error, or an ack (code 0).
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: the end of a dump.
pub const NLMSG_DONE: u16 = 3;
/// `sizeof(struct nlmsghdr)`.
pub const NLMSG_HDRLEN: usize = 16;
/// `sizeof(struct nfgenmsg)`: `{ u8 nfgen_family; u8 version; __be16 res_id }`.
pub const NFGENMSG_LEN: usize = 4;
/// `NFNETLINK_V0`, the only `nfgenmsg.version`.
pub const NFNETLINK_V0: u8 = 0;

/// `NFNL_SUBSYS_NFTABLES`: the high byte of every nf_tables message type,
/// and the `res_id` (big-endian) of a batch's begin and end messages.
pub const NFNL_SUBSYS_NFTABLES: u16 = 10;
/// `NFNL_MSG_BATCH_BEGIN` (`NLMSG_MIN_TYPE`) and `NFNL_MSG_BATCH_END`.
pub const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
pub const NFNL_MSG_BATCH_END: u16 = 0x11;
/// `NFNL_BATCH_GENID` (NLA_U32, big-endian): in a batch-begin message, the
/// generation the batch was computed against; the kernel refuses the whole
/// batch with `ERESTART` when the ruleset's generation is another.
pub const NFNL_BATCH_GENID: u16 = 1;

/// `enum nf_tables_msg_types` (the low byte of a message type).
pub const NFT_MSG_NEWTABLE: u8 = 0;
pub const NFT_MSG_GETTABLE: u8 = 1;
pub const NFT_MSG_DELTABLE: u8 = 2;
pub const NFT_MSG_NEWCHAIN: u8 = 3;
pub const NFT_MSG_GETCHAIN: u8 = 4;
pub const NFT_MSG_NEWRULE: u8 = 6;
pub const NFT_MSG_GETRULE: u8 = 7;
pub const NFT_MSG_NEWGEN: u8 = 15;
pub const NFT_MSG_GETGEN: u8 = 16;

/// The netlink message type of nf_tables message `msg`.
pub const fn nft_type(msg: u8) -> u16 {
    (NFNL_SUBSYS_NFTABLES << 8) | msg as u16
}

/// `NFPROTO_*`: the `nfgen_family` of a table, and a NAT expression's family.
pub const NFPROTO_UNSPEC: u8 = 0;
pub const NFPROTO_INET: u8 = 1;
pub const NFPROTO_IPV4: u8 = 2;
pub const NFPROTO_IPV6: u8 = 10;

/// `enum nft_table_attributes`.
pub const NFTA_TABLE_NAME: u16 = 1;
pub const NFTA_TABLE_FLAGS: u16 = 2;
pub const NFTA_TABLE_USE: u16 = 3;
pub const NFTA_TABLE_HANDLE: u16 = 4;
pub const NFTA_TABLE_USERDATA: u16 = 6;

/// `enum nft_chain_attributes`.
pub const NFTA_CHAIN_TABLE: u16 = 1;
pub const NFTA_CHAIN_HANDLE: u16 = 2;
pub const NFTA_CHAIN_NAME: u16 = 3;
pub const NFTA_CHAIN_HOOK: u16 = 4;
pub const NFTA_CHAIN_POLICY: u16 = 5;
pub const NFTA_CHAIN_TYPE: u16 = 7;
/// `enum nft_hook_attributes` (nested in `NFTA_CHAIN_HOOK`).
pub const NFTA_HOOK_HOOKNUM: u16 = 1;
pub const NFTA_HOOK_PRIORITY: u16 = 2;

/// `enum nft_rule_attributes`.
pub const NFTA_RULE_TABLE: u16 = 1;
pub const NFTA_RULE_CHAIN: u16 = 2;
pub const NFTA_RULE_HANDLE: u16 = 3;
pub const NFTA_RULE_EXPRESSIONS: u16 = 4;
pub const NFTA_RULE_USERDATA: u16 = 7;
/// `NFTA_LIST_ELEM`: one expression of `NFTA_RULE_EXPRESSIONS`.
pub const NFTA_LIST_ELEM: u16 = 1;
/// `enum nft_expression_attributes`.
pub const NFTA_EXPR_NAME: u16 = 1;
pub const NFTA_EXPR_DATA: u16 = 2;

/// `enum nft_data_attributes` and `enum nft_verdict_attributes`.
pub const NFTA_DATA_VALUE: u16 = 1;
pub const NFTA_DATA_VERDICT: u16 = 2;
pub const NFTA_VERDICT_CODE: u16 = 1;

/// `enum nft_gen_attributes` (in NFT_MSG_NEWGEN).
pub const NFTA_GEN_ID: u16 = 1;

/// The expressions' attributes (`enum nft_*_attributes`).
pub const NFTA_META_DREG: u16 = 1;
pub const NFTA_META_KEY: u16 = 2;
pub const NFTA_CMP_SREG: u16 = 1;
pub const NFTA_CMP_OP: u16 = 2;
pub const NFTA_CMP_DATA: u16 = 3;
pub const NFTA_PAYLOAD_DREG: u16 = 1;
pub const NFTA_PAYLOAD_BASE: u16 = 2;
pub const NFTA_PAYLOAD_OFFSET: u16 = 3;
pub const NFTA_PAYLOAD_LEN: u16 = 4;
pub const NFTA_BITWISE_SREG: u16 = 1;
pub const NFTA_BITWISE_DREG: u16 = 2;
pub const NFTA_BITWISE_LEN: u16 = 3;
pub const NFTA_BITWISE_MASK: u16 = 4;
pub const NFTA_BITWISE_XOR: u16 = 5;
pub const NFTA_BITWISE_OP: u16 = 6;
pub const NFTA_IMMEDIATE_DREG: u16 = 1;
pub const NFTA_IMMEDIATE_DATA: u16 = 2;
pub const NFTA_NAT_TYPE: u16 = 1;
pub const NFTA_NAT_FAMILY: u16 = 2;
pub const NFTA_NAT_REG_ADDR_MIN: u16 = 3;
pub const NFTA_NAT_REG_ADDR_MAX: u16 = 4;
pub const NFTA_NAT_FLAGS: u16 = 7;
pub const NFTA_COUNTER_BYTES: u16 = 1;
pub const NFTA_COUNTER_PACKETS: u16 = 2;
pub const NFTA_FIB_DREG: u16 = 1;
pub const NFTA_FIB_RESULT: u16 = 2;
pub const NFTA_FIB_FLAGS: u16 = 3;

/// Registers: `NFT_REG_VERDICT` and the first 16-byte data register.
pub const NFT_REG_VERDICT: u32 = 0;
pub const NFT_REG_1: u32 = 1;
/// `enum nft_meta_keys`.
pub const NFT_META_OIFNAME: u32 = 7;
pub const NFT_META_NFPROTO: u32 = 15;
/// `meta iifgroup`: the input interface's link group.
pub const NFT_META_IIFGROUP: u32 = 21;
pub const NFT_META_L4PROTO: u32 = 16;
/// `NFT_PAYLOAD_NETWORK_HEADER` (`enum nft_payload_bases`).
pub const NFT_PAYLOAD_NETWORK_HEADER: u32 = 1;
/// `NFT_CMP_EQ` (`enum nft_cmp_ops`).
pub const NFT_CMP_EQ: u32 = 0;
/// `NFT_BITWISE_BOOL` (renamed `NFT_BITWISE_MASK_XOR` in 6.14): `(r & mask) ^ xor`.
pub const NFT_BITWISE_BOOL: u32 = 0;
/// `enum nft_nat_types`.
pub const NFT_NAT_SNAT: u32 = 0;
pub const NFT_NAT_DNAT: u32 = 1;
/// `NF_NAT_RANGE_MAP_IPS` (nf_nat.h): the kernel sets it for a NAT with an address.
pub const NF_NAT_RANGE_MAP_IPS: u32 = 1;
/// `NFT_FIB_RESULT_ADDRTYPE` and `NFTA_FIB_F_DADDR`.
pub const NFT_FIB_RESULT_ADDRTYPE: u32 = 3;
pub const NFTA_FIB_F_DADDR: u32 = 2;
/// `RTN_LOCAL` (rtnetlink.h): the address type `fib ... type local` compares with.
pub const RTN_LOCAL: u32 = 2;

/// Verdicts (`linux/netfilter.h`).
pub const NF_DROP: u32 = 0;
pub const NF_ACCEPT: u32 = 1;

/// `enum nf_inet_hooks`.
pub const NF_INET_PRE_ROUTING: u32 = 0;
pub const NF_INET_LOCAL_OUT: u32 = 3;
pub const NF_INET_POST_ROUTING: u32 = 4;

/// `IPPROTO_TCP`.
pub const IPPROTO_TCP: u8 = 6;
/// `IFNAMSIZ`: an interface name's room, NUL included.
pub const IFNAMSIZ: usize = 16;

/// `NFTNL_UDATA_TABLE_COMMENT`: the type of the TLV (one byte type, one
/// byte length, the value) in which nft keeps a table's `comment` in
/// `NFTA_TABLE_USERDATA`. A marker stored that way is shown by
/// `nft list ruleset` as the table's comment.
pub const NFTNL_UDATA_TABLE_COMMENT: u8 = 0;
/// `NFT_USERDATA_MAXLEN`: the most bytes of user data the kernel keeps.
pub const NFT_USERDATA_MAXLEN: usize = 256;
