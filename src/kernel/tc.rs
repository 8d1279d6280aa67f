//! tc redirect wiring: an ingress qdisc and a u32 match-all filter with a
//! mirred egress redirect on each side of the pod-interface/TAP pair.
//!
//! Filters are added at parent `ffff:fff2`, which both the `ingress` and the
//! `clsact` qdisc accept, so podtap can sit beside a CNI plugin's own clsact.

use std::collections::{BTreeMap, BTreeSet};

use rtnetlink::packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use rtnetlink::packet_route::tc::{
    TcActionAttribute, TcActionMirrorOption, TcActionOption, TcAttribute, TcFilterU32Option,
    TcHandle, TcMessage, TcOption,
};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::Handle;

use super::netlink::{ack, dump};
use crate::error::KernelError;
use crate::plan::IngressState;

/// `TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS)`: the ingress hook of ingress and clsact qdiscs.
pub const INGRESS_PARENT: u32 = 0xFFFF_FFF2;
/// ETH_P_ALL, in network byte order as tc expects it.
const ETH_P_ALL_BE: u16 = 0x0003u16.to_be();

/// One filter found on a link's ingress hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterInfo {
    pub prio: u16,
    /// Target ifindex when the filter carries a mirred redirect.
    pub redirect_to: Option<u32>,
}

/// Ingress/clsact qdiscs and their filter priorities, for the given links.
pub async fn ingress_inventory(
    handle: &Handle,
    ifindexes: &BTreeSet<u32>,
) -> Result<BTreeMap<u32, IngressState>, KernelError> {
    let mut out = BTreeMap::new();
    let qdiscs = dump(
        handle,
        RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default()),
    )
    .await?;
    for q in qdiscs {
        let RouteNetlinkMessage::NewQueueDiscipline(q) = q else {
            continue;
        };
        let ifindex = q.header.index as u32;
        if !ifindexes.contains(&ifindex) || q.header.parent != TcHandle::INGRESS {
            continue;
        }
        let kind = q.attributes.iter().find_map(|a| match a {
            TcAttribute::Kind(k) => Some(k.clone()),
            _ => None,
        });
        if let Some(kind) = kind.filter(|k| k == "ingress" || k == "clsact") {
            let found = filters(handle, ifindex).await?;
            out.insert(
                ifindex,
                IngressState {
                    qdisc: Some(kind),
                    prios: found.iter().map(|f| f.prio).collect(),
                    redirects: found
                        .iter()
                        .filter(|f| f.redirect_to.is_some())
                        .map(|f| f.prio)
                        .collect(),
                },
            );
        }
    }
    Ok(out)
}

/// Filters on the ingress hook of `ifindex` (empty when it has no ingress qdisc).
pub async fn filters(handle: &Handle, ifindex: u32) -> Result<Vec<FilterInfo>, KernelError> {
    let mut msg = TcMessage::with_index(ifindex as i32);
    msg.header.parent = INGRESS_PARENT.into();
    let replies = match dump(handle, RouteNetlinkMessage::GetTrafficFilter(msg)).await {
        Ok(r) => r,
        Err(e) if super::netlink::is_gone(&e) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out: Vec<FilterInfo> = Vec::new();
    for r in replies {
        let RouteNetlinkMessage::NewTrafficFilter(f) = r else {
            continue;
        };
        let prio = (f.header.info >> 16) as u16;
        let redirect_to = mirred_target(&f);
        match out.iter_mut().find(|x| x.prio == prio) {
            Some(existing) => existing.redirect_to = existing.redirect_to.or(redirect_to),
            None => out.push(FilterInfo { prio, redirect_to }),
        }
    }
    Ok(out)
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

pub async fn add_ingress_qdisc(handle: &Handle, ifindex: u32) -> Result<(), KernelError> {
    let mut msg = TcMessage::with_index(ifindex as i32);
    msg.header.parent = TcHandle::INGRESS;
    msg.header.handle = TcHandle::from(0xFFFF_0000);
    msg.attributes.push(TcAttribute::Kind("ingress".into()));
    ack(
        handle,
        RouteNetlinkMessage::NewQueueDiscipline(msg),
        NLM_F_CREATE | NLM_F_EXCL,
    )
    .await
}

/// Deleting the ingress qdisc takes its filters with it.
pub async fn del_ingress_qdisc(handle: &Handle, ifindex: u32) -> Result<(), KernelError> {
    let mut msg = TcMessage::with_index(ifindex as i32);
    msg.header.parent = TcHandle::INGRESS;
    msg.header.handle = TcHandle::from(0xFFFF_0000);
    ack(handle, RouteNetlinkMessage::DelQueueDiscipline(msg), 0).await
}

/// `u32 match u8 0 0 action mirred egress redirect dev <to>` at `prio` on `from`'s ingress.
pub async fn add_redirect(
    handle: &Handle,
    from: u32,
    to: u32,
    prio: u16,
) -> Result<(), KernelError> {
    // priority() must come before protocol(): it overwrites the whole info word.
    let req = handle
        .clone()
        .traffic_filter(from as i32)
        .add()
        .parent(INGRESS_PARENT)
        .priority(prio)
        .protocol(ETH_P_ALL_BE)
        .redirect(to)
        .map_err(KernelError::from)?;
    req.execute().await.map_err(KernelError::from)
}

/// Delete every filter at `prio` on `ifindex`'s ingress: podtap's priority holds only its own.
pub async fn del_filter(handle: &Handle, ifindex: u32, prio: u16) -> Result<(), KernelError> {
    let mut msg = TcMessage::with_index(ifindex as i32);
    msg.header.parent = INGRESS_PARENT.into();
    msg.header.info = (u32::from(prio) << 16) | u32::from(ETH_P_ALL_BE);
    ack(handle, RouteNetlinkMessage::DelTrafficFilter(msg), 0).await
}
