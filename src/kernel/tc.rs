//! tc requests: ingress qdiscs, and the redirect filters: u32 match-all with
//! a mirred egress redirect. A dump reads those back as [`FilterInfo`], and
//! so the cls_bpf redirects an earlier podtap made, which its checkpoints
//! still record: `check`, `show` and teardown take them for podtap's own.
//!
//! Filters are added at parent `ffff:fff2`, which both the `ingress` and the
//! `clsact` qdisc accept, so podtap can sit beside a CNI plugin's own clsact.

use std::collections::{BTreeMap, BTreeSet};

use rtnetlink::packet_core::DefaultNla;
use rtnetlink::packet_route::tc::{
    TcAction, TcActionAttribute, TcActionGeneric, TcActionMirror, TcActionMirrorOption,
    TcActionOption, TcActionType, TcAttribute, TcBpfFlags, TcFilterBpf, TcFilterBpfOption,
    TcFilterU32, TcFilterU32Option, TcHandle, TcMessage, TcMirror, TcMirrorActionType, TcOption,
    TcU32Key, TcU32Selector, TcU32SelectorFlags,
};
use rtnetlink::packet_route::RouteNetlinkMessage;

use super::batch::Batch;
use super::errno::{is_gone, kernel_error};
use crate::error::KernelError;

/// `TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS)`: the ingress hook of ingress and clsact qdiscs.
pub const INGRESS_PARENT: u32 = 0xFFFF_FFF2;
/// ETH_P_ALL, in network byte order as tc expects it.
const ETH_P_ALL_BE: u16 = 0x0003u16.to_be();

/// One filter found on a link's ingress hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterInfo {
    /// The filter's priority (the upper half of `tcm_info`).
    pub prio: u16,
    /// Target ifindex when the filter is a redirect: a mirred action's, or
    /// the classid of a cls_bpf filter running an earlier podtap's program.
    pub redirect_to: Option<u32>,
    /// Which kind of redirect that is.
    pub via: Option<Via>,
}

/// The redirect filters podtap recognises as its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// u32 match-all with a mirred egress redirect: what attach makes.
    Mirred,
    /// cls_bpf running the redirect program of an earlier podtap, which
    /// attach no longer makes; its attachments are still checked, shown
    /// and torn down.
    Bpf,
}

impl Via {
    /// `u32` or `bpf`, as `show` names them.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Mirred => "u32",
            Via::Bpf => "bpf",
        }
    }
}

/// The ingress hook of one link: its qdisc kind and the filters on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressHook {
    /// "ingress" or "clsact".
    pub qdisc: String,
    /// Filters attached at `ffff:fff2`, one entry per priority.
    pub filters: Vec<FilterInfo>,
}

/// Every qdisc of the netns, as [`ingress_hooks`] reads them.
pub fn dump_qdiscs(batch: &Batch) -> Result<Vec<RouteNetlinkMessage>, KernelError> {
    let dumped = batch
        .dumps(&[RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default())])
        .map_err(|e| kernel_error(&e))?;
    Ok(dumped.into_iter().next().unwrap_or(Ok(Vec::new()))?)
}

/// The ingress hooks of the given links among `qdiscs` ([`dump_qdiscs`]),
/// with their filters dumped on `batch` (links without an ingress or clsact
/// qdisc are absent).
pub fn ingress_hooks(
    batch: &Batch,
    qdiscs: Vec<RouteNetlinkMessage>,
    ifindexes: &BTreeSet<u32>,
) -> Result<BTreeMap<u32, IngressHook>, KernelError> {
    let mut hooked = BTreeMap::new();
    for q in qdiscs.into_iter().filter_map(|m| match m {
        RouteNetlinkMessage::NewQueueDiscipline(q) => Some(q),
        _ => None,
    }) {
        let Ok(ifindex) = u32::try_from(q.header.index) else {
            continue;
        };
        if !ifindexes.contains(&ifindex) || q.header.parent != TcHandle::INGRESS {
            continue;
        }
        let kind = q.attributes.iter().find_map(|a| match a {
            TcAttribute::Kind(k) => Some(k.clone()),
            _ => None,
        });
        if let Some(qdisc) = kind.filter(|k| k == "ingress" || k == "clsact") {
            hooked.insert(ifindex, qdisc);
        }
    }
    let links: Vec<u32> = hooked.keys().copied().collect();
    let mut out = BTreeMap::new();
    for ((ifindex, qdisc), filters) in hooked.into_iter().zip(filters_of(batch, &links)) {
        out.insert(
            ifindex,
            IngressHook {
                qdisc,
                filters: filters?,
            },
        );
    }
    Ok(out)
}

/// The filters on the ingress hooks of `ifindexes`, one result per link in
/// order (none for a link that is gone or has no ingress qdisc), dumped one
/// after another on the batch socket ([`Batch::dumps`]).
pub fn filters_of(batch: &Batch, ifindexes: &[u32]) -> Vec<Result<Vec<FilterInfo>, KernelError>> {
    let requests: Vec<RouteNetlinkMessage> = ifindexes.iter().map(|i| dump_filters(*i)).collect();
    let dumped = match batch.dumps(&requests) {
        Ok(d) => d,
        Err(e) => return ifindexes.iter().map(|_| Err(kernel_error(&e))).collect(),
    };
    dumped
        .into_iter()
        .map(|answer| match answer.map_err(KernelError::from) {
            Ok(msgs) => Ok(filter_info(msgs.iter().filter_map(|m| match m {
                RouteNetlinkMessage::NewTrafficFilter(f) => Some(f),
                _ => None,
            }))),
            Err(e) if is_gone(&e) => Ok(Vec::new()),
            Err(e) => Err(e),
        })
        .collect()
}

/// The dump request for the filters on `ifindex`'s ingress hook (what
/// `tc filter show dev X ingress` asks).
fn dump_filters(ifindex: u32) -> RouteNetlinkMessage {
    let mut msg = TcMessage::with_index(index(ifindex));
    msg.header.parent = INGRESS_PARENT.into();
    RouteNetlinkMessage::GetTrafficFilter(msg)
}

/// One entry per priority, with the redirect target where a filter of that
/// priority carries one.
fn filter_info<'a>(replies: impl Iterator<Item = &'a TcMessage>) -> Vec<FilterInfo> {
    let mut out: Vec<FilterInfo> = Vec::new();
    for f in replies {
        let prio = (f.header.info >> 16) as u16;
        let (redirect_to, via) = match (mirred_target(f), bpf_target(f)) {
            (Some(to), _) => (Some(to), Some(Via::Mirred)),
            (None, Some(to)) => (Some(to), Some(Via::Bpf)),
            (None, None) => (None, None),
        };
        match out.iter_mut().find(|x| x.prio == prio) {
            Some(existing) if existing.redirect_to.is_none() => {
                existing.redirect_to = redirect_to;
                existing.via = via;
            }
            Some(_) => {}
            None => out.push(FilterInfo {
                prio,
                redirect_to,
                via,
            }),
        }
    }
    out
}

fn mirred_target(f: &TcMessage) -> Option<u32> {
    f.attributes.iter().find_map(|a| match a {
        TcAttribute::Options(opts) => opts.iter().find_map(|o| match o {
            TcOption::U32(TcFilterU32Option::Action(actions)) => actions.iter().find_map(|act| {
                act.attributes.iter().find_map(|aa| match aa {
                    TcActionAttribute::Options(aopts) => aopts.iter().find_map(|ao| match ao {
                        TcActionOption::Mirror(TcActionMirrorOption::Parms(p)) => Some(p.ifindex),
                        _ => None,
                    }),
                    _ => None,
                })
            }),
            _ => None,
        }),
        _ => None,
    })
}

/// The tags of the redirect program an earlier podtap attached with cls_bpf:
/// the first 8 bytes of the SHA-256 (Linux 6.18 and later) or SHA-1
/// (earlier) of its four instructions, `r1 = skb->tc_classid; r2 = 0; call
/// bpf_redirect; exit`. The filter's classid named the target.
const OLD_REDIRECT_TAGS: [[u8; 8]; 2] = [
    [0x35, 0x1a, 0x16, 0x12, 0xfd, 0x39, 0xee, 0x2f],
    [0xfd, 0x42, 0xed, 0xd0, 0x2e, 0x5d, 0xe6, 0x48],
];

/// The target of a cls_bpf filter that runs that program in direct-action
/// mode: its classid, cut to the 16 bits the program sees (`tc_classid`).
/// A filter with another program (another tag) or a classic BPF one (no
/// tag) is not a redirect podtap knows.
fn bpf_target(f: &TcMessage) -> Option<u32> {
    let opts = f.attributes.iter().find_map(|a| match a {
        TcAttribute::Options(opts) => Some(opts),
        _ => None,
    })?;
    let (mut classid, mut direct, mut ours) = (None, false, false);
    for o in opts {
        match o {
            TcOption::Bpf(TcFilterBpfOption::ClassId(c)) => classid = Some(u32::from(*c)),
            TcOption::Bpf(TcFilterBpfOption::Flags(fl)) => {
                direct = fl.contains(TcBpfFlags::DirectAction)
            }
            TcOption::Bpf(TcFilterBpfOption::ProgTag(tag)) => {
                ours = OLD_REDIRECT_TAGS.contains(tag)
            }
            _ => {}
        }
    }
    classid
        .map(|c| c & 0xFFFF)
        .filter(|c| direct && ours && *c != 0)
}

/// The request that adds an `ingress` qdisc (`ffff:`), to send with
/// `NLM_F_CREATE | NLM_F_EXCL` (EEXIST when the link has one).
pub fn new_ingress_qdisc(ifindex: u32) -> RouteNetlinkMessage {
    let mut msg = TcMessage::with_index(index(ifindex));
    msg.header.parent = TcHandle::INGRESS;
    msg.header.handle = TcHandle::from(0xFFFF_0000);
    msg.attributes
        .push(TcAttribute::Kind("ingress".to_string()));
    RouteNetlinkMessage::NewQueueDiscipline(msg)
}

/// The request that deletes the ingress qdisc; the kernel takes its filters with it.
pub fn del_ingress_qdisc(ifindex: u32) -> RouteNetlinkMessage {
    let mut msg = TcMessage::with_index(index(ifindex));
    msg.header.parent = TcHandle::INGRESS;
    msg.header.handle = TcHandle::from(0xFFFF_0000);
    RouteNetlinkMessage::DelQueueDiscipline(msg)
}

/// `u32 match u8 0 0 action mirred egress redirect dev <to>` at `prio` on
/// `from`'s ingress, to send with `NLM_F_CREATE | NLM_F_EXCL`:
/// the filter rtnetlink's `TrafficFilterNewRequest::redirect` builds (and
/// `tc filter add dev FROM ingress prio PRIO protocol all u32 match u8 0 0
/// action mirred egress redirect dev TO`), built here so that it can also go
/// out in a batch.
pub fn new_redirect(from: u32, to: u32, prio: u16) -> RouteNetlinkMessage {
    let mut mirred = TcMirror::default();
    mirred.generic = TcActionGeneric::default();
    mirred.generic.action = TcActionType::Stolen;
    mirred.eaction = TcMirrorActionType::EgressRedir;
    mirred.ifindex = to;
    let mut action = TcAction::default();
    action.attributes = vec![
        TcActionAttribute::Kind(TcActionMirror::KIND.to_string()),
        TcActionAttribute::Options(vec![TcActionOption::Mirror(TcActionMirrorOption::Parms(
            mirred,
        ))]),
    ];
    new_filter(
        from,
        prio,
        TcFilterU32::KIND,
        vec![
            TcOption::U32(TcFilterU32Option::Selector(match_all())),
            TcOption::U32(TcFilterU32Option::Action(vec![action])),
        ],
    )
}

/// The priority of the filter that stops a served guest's DHCPv4, DHCPv6
/// and router solicitations on its TAP: below every redirect of podtap's,
/// so it runs first.
pub const STOP_PRIO: u16 = 0xC0D0;

/// The filter that drops what a served guest asks the network for, on its
/// TAP's ingress, ahead of podtap's wiring (tc redirect, the bridge, the
/// routed stack): the responder's packet socket, bound to the TAP for
/// every protocol, has seen each frame before tc runs. A cls_bpf filter in
/// direct-action mode with a classic program ([`STOP_PROGRAM`]): it
/// answers `TC_ACT_SHOT` for IPv4 UDP to port 67 (not a non-first
/// fragment), IPv6 UDP to port 547 and ICMPv6 router solicitations, and
/// `TC_ACT_UNSPEC` (the next filter decides) for anything else. Classic BPF
/// needs neither the bpf() system call nor a loaded object, and this kernel
/// family may lack `act_gact` (no `action drop`). Like the responder's own
/// filter, it looks only at an IPv6 packet without extension headers: a
/// request behind one is neither stopped nor answered.
pub fn stop_filter(tap: u32) -> RouteNetlinkMessage {
    // TCA_BPF_OPS_LEN and TCA_BPF_OPS: the program, as the kernel's
    // struct sock_filter array (native endian).
    const TCA_BPF_OPS_LEN: u16 = 4;
    const TCA_BPF_OPS: u16 = 5;
    let mut ops = Vec::with_capacity(STOP_PROGRAM.len() * 8);
    for (code, jt, jf, k) in STOP_PROGRAM {
        ops.extend_from_slice(&code.to_ne_bytes());
        ops.extend_from_slice(&[jt, jf]);
        ops.extend_from_slice(&k.to_ne_bytes());
    }
    let len = u16::try_from(STOP_PROGRAM.len()).unwrap_or(u16::MAX);
    let options = vec![
        TcOption::Bpf(TcFilterBpfOption::Other(DefaultNla::new(
            TCA_BPF_OPS_LEN,
            len.to_ne_bytes().to_vec(),
        ))),
        TcOption::Bpf(TcFilterBpfOption::Other(DefaultNla::new(TCA_BPF_OPS, ops))),
        TcOption::Bpf(TcFilterBpfOption::Flags(TcBpfFlags::DirectAction)),
    ];
    new_filter(tap, STOP_PRIO, TcFilterBpf::KIND, options)
}

/// The stop filter's program, `(code, jt, jf, k)`; offsets from the
/// Ethernet header (cls_bpf puts it back in front at ingress), jumps
/// relative to the next instruction.
pub const STOP_PROGRAM: [(u16, u8, u8, u32); 19] = [
    /* 0 */ (0x28, 0, 0, 12), // ldh [12]: ethertype
    /* 1 */ (0x15, 0, 7, 0x0800), // IPv4? else 9
    /* 2 */ (0x30, 0, 0, 23), // ldb [23]: protocol
    /* 3 */ (0x15, 0, 14, 17), // UDP? else pass
    /* 4 */ (0x28, 0, 0, 20), // ldh [20]: flags, fragment offset
    /* 5 */ (0x45, 12, 0, 0x1fff), // a non-first fragment: pass
    /* 6 */ (0xb1, 0, 0, 14), // ldxb 4*([14]&0xf): header length
    /* 7 */ (0x48, 0, 0, 16), // ldh [x+16]: UDP destination port
    /* 8 */ (0x15, 8, 9, 67), // DHCPv4 server port: drop, else pass
    /* 9 */ (0x15, 0, 8, 0x86dd), // IPv6? else pass
    /* 10 */ (0x30, 0, 0, 20), // ldb [20]: next header
    /* 11 */ (0x15, 0, 2, 17), // UDP? else 14
    /* 12 */ (0x28, 0, 0, 56), // ldh [56]: UDP destination port
    /* 13 */ (0x15, 3, 4, 547), // DHCPv6 server port: drop, else pass
    /* 14 */ (0x15, 0, 3, 58), // ICMPv6? else pass
    /* 15 */ (0x30, 0, 0, 54), // ldb [54]: ICMPv6 type
    /* 16 */ (0x15, 0, 1, 133), // router solicitation: drop, else pass
    /* 17 */ (0x06, 0, 0, 2), // TC_ACT_SHOT
    /* 18 */ (0x06, 0, 0, u32::MAX), // TC_ACT_UNSPEC: the next filter
];

/// `match u8 0 0`: the u32 selector that matches every packet.
pub fn match_all() -> TcU32Selector {
    let mut selector = TcU32Selector::default();
    selector.flags = TcU32SelectorFlags::Terminal;
    selector.nkeys = 1;
    selector.keys = vec![TcU32Key::default()];
    selector
}

/// A new filter of `kind` with `options` at `prio`, protocol all, on
/// `ifindex`'s ingress hook (`ffff:fff2`).
pub fn new_filter(
    ifindex: u32,
    prio: u16,
    kind: &str,
    options: Vec<TcOption>,
) -> RouteNetlinkMessage {
    let mut msg = filter_at(ifindex, prio);
    msg.attributes.push(TcAttribute::Kind(kind.to_string()));
    msg.attributes.push(TcAttribute::Options(options));
    RouteNetlinkMessage::NewTrafficFilter(msg)
}

/// The request that deletes every filter at `prio` on `ifindex`'s ingress hook.
pub fn del_filter(ifindex: u32, prio: u16) -> RouteNetlinkMessage {
    // A raw message: rtnetlink's TrafficFilterDelRequest cannot set the priority.
    RouteNetlinkMessage::DelTrafficFilter(filter_at(ifindex, prio))
}

/// A filter message for `prio`, protocol all, on `ifindex`'s ingress hook.
fn filter_at(ifindex: u32, prio: u16) -> TcMessage {
    let mut msg = TcMessage::with_index(index(ifindex));
    msg.header.parent = INGRESS_PARENT.into();
    msg.header.info = (u32::from(prio) << 16) | u32::from(ETH_P_ALL_BE);
    msg
}

/// tc messages carry the ifindex as a signed int; kernel ifindexes are always below 2^31.
fn index(ifindex: u32) -> i32 {
    i32::try_from(ifindex).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A filter as a dump shows it, from the request that made it.
    fn dumped(msg: RouteNetlinkMessage) -> TcMessage {
        match msg {
            RouteNetlinkMessage::NewTrafficFilter(m) => m,
            other => panic!("not a filter: {other:?}"),
        }
    }

    /// The cls_bpf redirect an earlier podtap made: `tag`, direct action
    /// when `direct`, the target as classid.
    fn old_bpf_redirect(from: u32, to: u32, prio: u16, tag: [u8; 8], direct: bool) -> TcMessage {
        let mut options = vec![
            TcOption::Bpf(TcFilterBpfOption::ProgTag(tag)),
            TcOption::Bpf(TcFilterBpfOption::ClassId(TcHandle::from(to))),
        ];
        if direct {
            options.push(TcOption::Bpf(TcFilterBpfOption::Flags(
                TcBpfFlags::DirectAction,
            )));
        }
        dumped(new_filter(from, prio, "bpf", options))
    }

    #[test]
    fn an_earlier_releases_bpf_redirect_reads_as_podtaps() {
        for tag in OLD_REDIRECT_TAGS {
            let f = old_bpf_redirect(2, 7, 49374, tag, true);
            let info = filter_info([&f].into_iter());
            assert_eq!(
                info,
                [FilterInfo {
                    prio: 49374,
                    redirect_to: Some(7),
                    via: Some(Via::Bpf),
                }]
            );
        }
        let u32_mirred = dumped(new_redirect(2, 7, 49375));
        let info = filter_info([&u32_mirred].into_iter());
        assert_eq!(info[0].redirect_to, Some(7));
        assert_eq!(info[0].via, Some(Via::Mirred));
    }

    #[test]
    fn another_program_or_no_direct_action_is_not_a_redirect() {
        let other = old_bpf_redirect(2, 7, 1, [1; 8], true);
        let not_direct = old_bpf_redirect(2, 7, 2, OLD_REDIRECT_TAGS[0], false);
        let info = filter_info([&other, &not_direct].into_iter());
        assert!(info
            .iter()
            .all(|f| f.redirect_to.is_none() && f.via.is_none()));
    }
}
