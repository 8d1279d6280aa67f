//! Check: is every object of an attachment still there and wired as recorded?

use crate::error::{Error, Result};
use crate::kernel::links::LinkState;
use crate::kernel::netlink::Netlink;
use crate::kernel::tc::Via;
use crate::state::{created_ifindex, Checkpoint, Phase, SandboxId, StateDir};
use crate::teardown;
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
            .flat_map(|n| n.problems.all())
            .collect(),
    };
    verdict(id, problems)
}

/// Ok, or a failed check (exit 12) naming every problem.
pub(crate) fn verdict(id: &SandboxId, problems: Vec<String>) -> Result<()> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::CheckFailed {
            id: id.to_string(),
            problems: problems.join("; "),
        })
    }
}

/// What [`check`] sees of an attachment, NIC by NIC (for `podtap show`).
pub(crate) struct Inspection {
    /// The checkpoint.
    pub(crate) cp: Checkpoint,
    /// Why the attachment as a whole fails (attach unfinished, netns gone or
    /// replaced); its NICs were then not looked at and `nics` is empty.
    pub(crate) whole: Option<String>,
    /// Each NIC of `cp.plan.nics`, in order.
    pub(crate) nics: Vec<NicLive>,
}

/// One NIC as the kernel holds it now.
pub(crate) struct NicLive {
    /// What is missing or drifted.
    pub(crate) problems: NicProblems,
    /// Its TAP (or macvtap) now, found by recorded ifindex.
    pub(crate) tap: Option<LinkState>,
    /// The TAP's packet counters (rx, tx) from `IFLA_STATS64`.
    pub(crate) packets: Option<(u64, u64)>,
    /// The kind of the pod interface's redirect to the TAP, when there is one.
    pub(crate) redirect: Option<Via>,
}

/// [`check`], NIC by NIC, under the id's lock.
pub(crate) fn inspect(id: &SandboxId, state: &StateDir) -> Result<Inspection> {
    state.locked(id, || inspect_locked(id, state))
}

fn inspect_locked(id: &SandboxId, state: &StateDir) -> Result<Inspection> {
    let cp = state.load(id)?.ok_or_else(|| Error::NotFound {
        id: id.to_string(),
        dir: state.path().into(),
    })?;
    let whole = |cp, why: String| Inspection {
        cp,
        whole: Some(why),
        nics: Vec::new(),
    };
    if cp.phase() != Phase::Complete {
        let why = "attach did not finish (run detach, then attach again)".into();
        return Ok(whole(cp, why));
    }
    let ns = match teardown::open_recorded(&cp, &state.file(id), &[]) {
        Ok(Ok(ns)) => ns,
        Ok(Err(why)) => return Ok(whole(cp, why)),
        // Cannot look (permission, fd limit, ...): that error's own exit code.
        Err(e) => return Err(e),
    };
    let nl = Netlink::connect_bare(&ns)?;
    if !cp.is_netns(ns.identity(), nl.cookie) {
        let why = format!(
            "netns {} is now a different namespace (new netns cookie)",
            cp.netns.path
        );
        return Ok(whole(cp, why));
    }
    let (now, problems) = teardown::missing_per_nic(&nl, &cp.plan, &cp.created)?;
    let mut nics = Vec::new();
    for (nic, problems) in cp.plan.nics.iter().zip(problems) {
        let idx = created_ifindex(&cp.created, &nic.tap.name);
        let tap = idx.and_then(|i| now.links.get(&i)).cloned();
        let packets = match (&tap, idx) {
            (Some(_), Some(idx)) => packets(&nl, idx),
            _ => None,
        };
        let redirect = nic.tc.as_ref().and_then(|tc| {
            now.filters_of(nic.pod.ifindex)
                .iter()
                .find(|f| f.prio == tc.prio && f.redirect_to.is_some() && f.redirect_to == idx)
                .and_then(|f| f.via)
        });
        nics.push(NicLive {
            problems,
            tap,
            packets,
            redirect,
        });
    }
    Ok(Inspection {
        cp,
        whole: None,
        nics,
    })
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
