//! What `check` reports: what is not as the checkpoint recorded it. Pure.

use rtnetlink::packet_route::link::InfoKind;

use super::actions::Observed;
use crate::kernel::links::LinkState;
use crate::plan::{NicPlan, Plan};
use crate::state::{created_ifindex, Created};

/// What is not as `plan` recorded it (empty when all is well). `now.filters`
/// must hold the filters of every pod interface and TAP of the plan.
#[cfg(test)]
pub fn missing(plan: &Plan, created: &[Created], now: &Observed) -> Vec<String> {
    per_nic(plan, created, now)
        .into_iter()
        .flat_map(|n| n.missing.into_iter().chain(n.drifted))
        .collect()
}

/// What is wrong with one NIC of a plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NicProblems {
    /// Its pod interface or its TAP (macvtap) is gone: nothing else was looked at.
    pub(crate) missing: Option<String>,
    /// What differs from the record while both are there.
    pub(crate) drifted: Vec<String>,
}

/// [`missing`] per NIC, in `plan.nics` order.
pub fn per_nic(plan: &Plan, created: &[Created], now: &Observed) -> Vec<NicProblems> {
    plan.nics
        .iter()
        .map(|nic| {
            let mut found = NicProblems::default();
            if let Err(gone) = missing_nic(nic, created, now, &mut found.drifted) {
                found.missing = Some(gone);
            }
            found
        })
        .collect()
}

/// The drifts of `nic` into `problems`; `Err` names its pod interface or TAP when gone.
fn missing_nic(
    nic: &NicPlan,
    created: &[Created],
    now: &Observed,
    problems: &mut Vec<String>,
) -> Result<(), String> {
    let Some(pod) = now.links.get(&nic.pod.ifindex) else {
        return Err(format!(
            "pod interface {} (ifindex {}) is missing",
            nic.pod.name, nic.pod.ifindex
        ));
    };
    let tap_idx = created_ifindex(created, &nic.tap.name);
    let (kind, what) = match nic.macvtap {
        Some(_) => (InfoKind::MacVtap, "macvtap"),
        None => (InfoKind::Tun, "TAP"),
    };
    let Some(tap) = tap_idx
        .and_then(|i| now.links.get(&i))
        .filter(|l| l.is_kind(kind))
    else {
        return Err(format!(
            "{what} {} (ifindex {}) is missing",
            nic.tap.name,
            tap_idx.unwrap_or(0)
        ));
    };
    // Found by ifindex: a VMM that opens it by name would not find it.
    if tap.name != nic.tap.name {
        problems.push(format!(
            "{what} {} was renamed to {}",
            nic.tap.name, tap.name
        ));
    }

    if nic.macvtap.is_some() && tap.lower != Some(pod.ifindex) {
        problems.push(format!(
            "macvtap {} does not sit on pod interface {}",
            tap.name, pod.name
        ));
    }
    if !tap.up {
        problems.push(format!("{what} {} is down", tap.name));
    }
    if !pod.up {
        problems.push(format!("pod interface {} is down", pod.name));
    }
    if pod.mtu != tap.mtu {
        problems.push(format!(
            "pod interface {} has MTU {} but its {what} {} has {}: the guest would send frames the pod cannot carry",
            pod.name, pod.mtu, tap.name, tap.mtu
        ));
    }
    for n in &nic.pod.neighbours {
        let there = now
            .neighbours
            .iter()
            .any(|(idx, ip, mac)| *idx == pod.ifindex && *ip == n.ip && *mac == n.mac);
        if !there {
            problems.push(format!(
                "permanent neighbour {} lladdr {} on {} is missing",
                n.ip, n.mac, pod.name
            ));
        }
    }
    if tap.mtu != nic.tap.mtu {
        problems.push(format!(
            "{what} {} has MTU {} instead of {}",
            tap.name, tap.mtu, nic.tap.mtu
        ));
    }
    wiring_drift(nic, created, now, (pod, tap), problems);
    Ok(())
}

/// The drifts of `nic`'s tc redirects or bridge between `pod` and `tap`.
fn wiring_drift(
    nic: &NicPlan,
    created: &[Created],
    now: &Observed,
    (pod, tap): (&LinkState, &LinkState),
    problems: &mut Vec<String>,
) {
    if nic.serve
        && !now
            .filters_of(tap.ifindex)
            .iter()
            .any(|f| f.prio == crate::kernel::tc::STOP_PRIO)
    {
        problems.push(format!(
            "the filter on {} that keeps the served guest's DHCP and router solicitations in is missing",
            tap.name
        ));
    }
    if let Some(tcp) = &nic.tc {
        for (from, to) in [(pod, tap), (tap, pod)] {
            let ok = now
                .filters_of(from.ifindex)
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
    if let Some(b) = &nic.bridge {
        let idx = created_ifindex(created, &b.name);
        match idx.and_then(|i| now.links.get(&i)) {
            None => problems.push(format!(
                "bridge {} (ifindex {}) is missing",
                b.name,
                idx.unwrap_or(0)
            )),
            Some(br) => {
                for port in [pod, tap] {
                    if port.controller != Some(br.ifindex) {
                        problems.push(format!("{} is not in bridge {}", port.name, br.name));
                    }
                }
                if pod.mac != Some(b.pod_mac) {
                    problems.push(format!(
                        "{} does not carry its bridged MAC {}",
                        pod.name, b.pod_mac
                    ));
                }
            }
        }
    }
}
