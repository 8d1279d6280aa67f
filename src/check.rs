//! `check`: is every object of an attachment still there and wired as recorded?

use crate::attach::LOCK_TIMEOUT;
use crate::error::{Error, Result};
use crate::kernel::links::{self, LinkState};
use crate::kernel::tc;
use crate::plan::NicPlan;
use crate::scan::Netlink;
use crate::state::{created_ifindex, validate_id, Phase, StateDir};

/// Check sandbox `id`; `Err(CheckFailed)` lists every problem found.
pub fn check(id: &str, state: &StateDir) -> Result<()> {
    validate_id(id)?;
    state.locked(id, LOCK_TIMEOUT, || check_locked(id, state))
}

fn check_locked(id: &str, state: &StateDir) -> Result<()> {
    let cp = state.load(id)?.ok_or_else(|| Error::NotFound {
        id: id.into(),
        dir: state.path().into(),
    })?;
    let fail = |problems: Vec<String>| Error::CheckFailed {
        id: id.into(),
        problems: problems.join("; "),
    };
    if cp.phase != Phase::Complete {
        return Err(fail(vec![
            "attach did not finish (run detach, then attach again)".into(),
        ]));
    }
    let ns = match crate::detach::open_recorded(&cp) {
        Ok(Ok(ns)) => ns,
        Ok(Err(why)) => return Err(fail(vec![why])),
        Err(e) => return Err(fail(vec![format!("netns {}: {e}", cp.netns.path)])),
    };
    let problems = crate::kernel::runtime::block_on(async {
        let nl = Netlink::connect(&ns)?;
        if !cp.is_netns(ns.identity(), nl.cookie) {
            return Ok(vec![format!(
                "netns {} is now a different namespace (new netns cookie)",
                cp.netns.path
            )]);
        }
        let live = links::list(&nl.handle)
            .await
            .map_err(|e| nl.err("dump links", "", e))?;
        let mut problems = Vec::new();
        for nic in &cp.plan.nics {
            let tap_idx = created_ifindex(&cp.created, &nic.tap.name);
            let bridge_idx = nic
                .bridge
                .as_ref()
                .map(|b| created_ifindex(&cp.created, &b.name));
            problems.extend(check_nic(&nl, nic, &live, tap_idx, bridge_idx).await?);
        }
        Ok::<_, Error>(problems)
    })?;
    if problems.is_empty() {
        Ok(())
    } else {
        Err(fail(problems))
    }
}

async fn check_nic(
    nl: &Netlink,
    nic: &NicPlan,
    live: &std::collections::BTreeMap<u32, LinkState>,
    tap_idx: u32,
    bridge_idx: Option<u32>,
) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let Some(pod) = live.get(&nic.pod.ifindex) else {
        problems.push(format!(
            "pod interface {} (ifindex {}) is missing",
            nic.pod.name, nic.pod.ifindex
        ));
        return Ok(problems);
    };
    let Some(tap) = live
        .get(&tap_idx)
        .filter(|l| l.kind.as_deref() == Some("tun"))
    else {
        problems.push(format!(
            "TAP {} (ifindex {tap_idx}) is missing",
            nic.tap.name
        ));
        return Ok(problems);
    };
    if !tap.up {
        problems.push(format!("TAP {} is down", tap.name));
    }
    if tap.mtu != nic.tap.mtu {
        problems.push(format!(
            "TAP {} has MTU {} instead of {}",
            tap.name, tap.mtu, nic.tap.mtu
        ));
    }
    if let Some(tcp) = &nic.tc {
        for (from, to) in [(pod, tap), (tap, pod)] {
            let filters = tc::filters(&nl.handle, from.ifindex)
                .await
                .map_err(|e| nl.err("dump tc filters", &from.name, e))?;
            let ok = filters
                .iter()
                .any(|f| f.prio == tcp.prio && f.redirect_to == Some(to.ifindex));
            if !ok {
                problems.push(format!(
                    "tc redirect {} -> {} (prio {}) is missing",
                    from.name, to.name, tcp.prio
                ));
            }
        }
    }
    if let (Some(b), Some(idx)) = (&nic.bridge, bridge_idx) {
        match live.get(&idx) {
            None => problems.push(format!("bridge {} (ifindex {idx}) is missing", b.name)),
            Some(br) => {
                for port in [pod, tap] {
                    if port.controller != Some(br.ifindex) {
                        problems.push(format!("{} is not in bridge {}", port.name, br.name));
                    }
                }
                if pod.mac.as_deref() != Some(b.pod_mac.as_str()) {
                    problems.push(format!(
                        "{} does not carry its bridged MAC {}",
                        pod.name, b.pod_mac
                    ));
                }
            }
        }
    }
    Ok(problems)
}
