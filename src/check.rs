//! Check: is every object of an attachment still there and wired as recorded?

use crate::error::{Error, Result};
use crate::kernel::netlink::Netlink;
use crate::model::{NetnsRef, Wiring};
use crate::plan::NicPlan;
use crate::state::{created_ifindex, Checkpoint, Phase, SandboxId, StateDir};
use crate::teardown;
use crate::teardown::decide::Observed;
use crate::teardown::missing::NicProblems;

/// Check sandbox `id`: `Ok(())` when every recorded object exists and is
/// wired as recorded; [`Error::CheckFailed`] lists every problem found, and
/// [`Error::NotFound`] says there is no checkpoint.
pub fn check(id: &SandboxId, state: &StateDir) -> Result<()> {
    state.locked(id, || check_locked(id, state))
}

fn check_locked(id: &SandboxId, state: &StateDir) -> Result<()> {
    let seen = inspect_locked(id, state)?;
    let problems: Vec<String> = match seen.whole {
        Some(why) => vec![why],
        None => seen
            .nics
            .into_iter()
            .flat_map(|n| n.missing.into_iter().chain(n.drifted))
            .collect(),
    };
    verdict(id, problems)
}

/// Ok, or a failed check naming every problem.
fn verdict(id: &SandboxId, problems: Vec<String>) -> Result<()> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::CheckFailed {
            id: id.to_string(),
            problems,
        })
    }
}

/// What [`check`] sees of an attachment, NIC by NIC: what `podtap show`
/// prints.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The sandbox id.
    pub id: SandboxId,
    /// The netns attach recorded.
    pub netns: NetnsRef,
    /// The wiring mode asked for.
    pub mode: Wiring,
    /// Why the attachment as a whole fails (attach unfinished, netns gone or
    /// replaced); its NICs were then not looked at and `nics` is empty.
    pub whole: Option<String>,
    /// Each NIC attach built, in order.
    pub nics: Vec<NicInspection>,
}

/// One NIC as attach recorded it and as the kernel holds it now.
#[derive(Debug, Clone)]
pub struct NicInspection {
    /// The pod interface's name and ifindex.
    pub pod: (String, u32),
    /// The TAP's (or macvtap's) name as recorded.
    pub tap: String,
    /// The ifindex the kernel gave it, when recorded.
    pub tap_ifindex: Option<u32>,
    /// Its name now, when it was found by ifindex under another one.
    pub tap_now: Option<String>,
    /// A macvtap's device node (podtap's own, under `/dev/podtap/`); `None` for a TAP.
    pub device: Option<String>,
    /// How it is wired.
    pub wiring: WiringDetail,
    /// The MAC the guest's NIC must have.
    pub guest_mac: Option<String>,
    /// The TAP's MTU, queue count and `IFF_VNET_HDR`.
    pub mtu: u32,
    /// Its queues.
    pub queues: u32,
    /// Whether it has `IFF_VNET_HDR`.
    pub vnet_hdr: bool,
    /// Its pod interface or its TAP is gone: nothing else was looked at.
    pub missing: Option<String>,
    /// What differs from the record while both are there.
    pub drifted: Vec<String>,
    /// The TAP's packet counters `(rx, tx)`, when it is there.
    pub packets: Option<(u64, u64)>,
}

impl NicInspection {
    /// "ok", "drifted" or "missing".
    pub fn state(&self) -> &'static str {
        match (&self.missing, self.drifted.is_empty()) {
            (Some(_), _) => "missing",
            (None, true) => "ok",
            (None, false) => "drifted",
        }
    }
}

/// How one NIC is wired, with the detail `show` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WiringDetail {
    /// tc redirects at this priority; `redirect` names the filter kind found
    /// on the pod interface (`u32`, or `bpf` from an earlier release).
    Tc {
        /// podtap's filter priority.
        prio: u16,
        /// The kind of the redirect found, if one is there.
        redirect: Option<&'static str>,
    },
    /// A bridge of this name.
    Bridge(String),
    /// A passthru macvtap.
    Macvtap,
    /// Another mode, by name.
    Other(Wiring),
}

/// [`check`], NIC by NIC, under the id's lock.
pub fn inspect(id: &SandboxId, state: &StateDir) -> Result<Inspection> {
    state.locked(id, || inspect_locked(id, state))
}

fn inspect_locked(id: &SandboxId, state: &StateDir) -> Result<Inspection> {
    let cp = state.load(id)?.ok_or_else(|| Error::NotFound {
        id: id.to_string(),
        dir: state.path().into(),
    })?;
    let whole = |cp: &Checkpoint, why: String| Inspection {
        id: cp.id.clone(),
        netns: cp.netns.clone(),
        mode: cp.plan.mode,
        whole: Some(why),
        nics: Vec::new(),
    };
    if cp.phase() != Phase::Complete {
        let why = "attach did not finish (run detach, then attach again)".into();
        return Ok(whole(&cp, why));
    }
    let ns = match teardown::open_recorded(&cp, &state.file(id), &[]) {
        Ok(Ok(ns)) => ns,
        Ok(Err(why)) => return Ok(whole(&cp, why)),
        // Cannot look (permission, fd limit, ...): that error is the answer.
        Err(e) => return Err(e),
    };
    let nl = Netlink::connect_bare(&ns)?;
    if !cp.is_netns(ns.identity(), nl.cookie) {
        let why = format!(
            "netns {} is now a different namespace (new netns cookie)",
            cp.netns.path
        );
        return Ok(whole(&cp, why));
    }
    let (now, problems) = teardown::missing_per_nic(&nl, &cp.plan, &cp.created)?;
    let nics = cp
        .plan
        .nics
        .iter()
        .zip(problems)
        .map(|(nic, problems)| inspect_nic(&nl, &cp, &now, nic, problems))
        .collect();
    Ok(Inspection {
        whole: None,
        nics,
        ..whole(&cp, String::new())
    })
}

fn inspect_nic(
    nl: &Netlink,
    cp: &Checkpoint,
    now: &Observed,
    nic: &NicPlan,
    problems: NicProblems,
) -> NicInspection {
    let idx = created_ifindex(&cp.created, &nic.tap.name);
    let tap = idx.and_then(|i| now.links.get(&i));
    let wiring = match (&nic.tc, &nic.bridge, &nic.macvtap) {
        (Some(tc), _, _) => WiringDetail::Tc {
            prio: tc.prio,
            redirect: now
                .filters_of(nic.pod.ifindex)
                .iter()
                .find(|f| f.prio == tc.prio && f.redirect_to.is_some() && f.redirect_to == idx)
                .and_then(|f| f.via)
                .map(|via| via.as_str()),
        },
        (_, Some(b), _) => WiringDetail::Bridge(b.name.clone()),
        (_, _, Some(_)) => WiringDetail::Macvtap,
        _ => WiringDetail::Other(nic.wiring),
    };
    let guest_mac = cp
        .description()
        .and_then(|d| d.interfaces.iter().find(|i| i.ifindex == nic.pod.ifindex))
        .and_then(|i| i.guest_mac.clone());
    NicInspection {
        pod: (nic.pod.name.clone(), nic.pod.ifindex),
        tap: nic.tap.name.clone(),
        tap_ifindex: idx,
        tap_now: tap.map(|l| l.name.clone()).filter(|n| *n != nic.tap.name),
        device: nic.macvtap.as_ref().map(|m| m.device.clone()),
        wiring,
        guest_mac,
        mtu: nic.tap.mtu,
        queues: nic.tap.queues,
        vnet_hdr: nic.tap.vnet_hdr,
        missing: problems.missing,
        drifted: problems.drifted,
        packets: match (tap, idx) {
            (Some(_), Some(idx)) => packets(nl, idx),
            _ => None,
        },
    }
}

/// `(rx_packets, tx_packets)` of link `ifindex`, from `IFLA_STATS64`.
fn packets(nl: &Netlink, ifindex: u32) -> Option<(u64, u64)> {
    use rtnetlink::packet_route::link::{LinkAttribute, LinkMessage};
    use rtnetlink::packet_route::RouteNetlinkMessage;
    let dump = RouteNetlinkMessage::GetLink(LinkMessage::default());
    let links = nl.batch.dumps(&[dump]).ok()?.pop()?.ok()?;
    let msg = links.into_iter().find_map(|m| match m {
        RouteNetlinkMessage::NewLink(l) if l.header.index == ifindex => Some(l),
        _ => None,
    })?;
    msg.attributes.into_iter().find_map(|a| match a {
        LinkAttribute::Stats64(s) => Some((s.rx_packets, s.tx_packets)),
        _ => None,
    })
}

/// A link of podtap's (a TAP, bridge or macvtap, with its marker) that no
/// checkpoint records: what a teardown killed between removing the
/// checkpoint and deleting the links leaves. The next attach of the id
/// into that netns removes it first; `detach --force` does too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// A path to the netns it is in (a pinned file, or a process's
    /// `/proc/PID/ns/net`).
    pub netns: std::path::PathBuf,
    /// That netns's identity.
    pub identity: crate::netns::NetnsIdentity,
    /// The sandbox id its marker names.
    pub id: String,
    /// The link's name.
    pub link: String,
    /// Its ifindex.
    pub ifindex: u32,
}

/// Every [`Orphan`] in the network namespaces of the node this process
/// sees (pinned, or with a root-owned process inside), the host's left
/// out: links whose marker names an id without a checkpoint in `state`
/// for that netns. A netns that cannot be read (gone meanwhile) is
/// passed over. Blocks the calling thread for one netlink session per
/// netns.
pub fn orphans(state: &StateDir) -> Result<Vec<Orphan>> {
    let recorded: Vec<(String, (u64, u64))> = state
        .ids()?
        .into_iter()
        .filter_map(|id| {
            let cp = state.load_for_teardown(&id).ok()??;
            Some((id.to_string(), (cp.netns.dev, cp.netns.inode)))
        })
        .collect();
    let mut out = Vec::new();
    for ns in crate::kernel::netns_search::every() {
        let Ok(nl) = Netlink::connect_bare(&ns) else {
            continue;
        };
        let Ok(links) = crate::kernel::links::list(&nl.batch) else {
            continue;
        };
        for link in links.values().filter(|l| l.is_podtap_kind()) {
            let Some(id) = link.alias.as_deref().and_then(crate::plan::marked_id) else {
                continue;
            };
            if !recorded
                .iter()
                .any(|(r, at)| r == id && *at == ns.identity())
            {
                let (dev, inode) = ns.identity();
                out.push(Orphan {
                    netns: ns.path().to_path_buf(),
                    identity: crate::netns::NetnsIdentity { dev, inode },
                    id: id.to_string(),
                    link: link.name.clone(),
                    ifindex: link.ifindex,
                });
            }
        }
    }
    Ok(out)
}
