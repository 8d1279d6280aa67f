//! What `check` reports: what is not as the checkpoint recorded it. Pure.

use rtnetlink::packet_route::link::InfoKind;

use super::decide::Observed;
use crate::plan::{NicPlan, Plan};
use crate::state::{created_ifindex, Created};

/// What is not as `plan` recorded it (empty when all is well). `now.filters`
/// must hold the filters of every pod interface and TAP of the plan.
pub fn missing(plan: &Plan, created: &[Created], now: &Observed) -> Vec<String> {
    let mut problems = Vec::new();
    for nic in &plan.nics {
        missing_nic(nic, created, now, &mut problems);
    }
    problems
}

fn missing_nic(nic: &NicPlan, created: &[Created], now: &Observed, problems: &mut Vec<String>) {
    let Some(pod) = now.links.get(&nic.pod.ifindex) else {
        problems.push(format!(
            "pod interface {} (ifindex {}) is missing",
            nic.pod.name, nic.pod.ifindex
        ));
        return;
    };
    let tap_idx = created_ifindex(created, &nic.tap.name);
    let (kind, what) = match nic.macvtap {
        Some(_) => (InfoKind::MacVtap, "macvtap"),
        None => (InfoKind::Tun, "TAP"),
    };
    let Some(tap) = now.links.get(&tap_idx).filter(|l| l.is_kind(kind)) else {
        problems.push(format!(
            "{what} {} (ifindex {tap_idx}) is missing",
            nic.tap.name
        ));
        return;
    };
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
        match now.links.get(&idx) {
            None => problems.push(format!("bridge {} (ifindex {idx}) is missing", b.name)),
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
