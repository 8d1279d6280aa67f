//! The requests that wire the NICs needing no bridge (tc and macvtap), as
//! one ordered list for a batch ([`crate::kernel::batch`]): pure, so the
//! order the kernel sees is unit-tested.
//!
//! Per NIC: the TAP's (or macvtap's) MTU, group and marker; then, for tc,
//! the ingress qdiscs, the redirect filters both ways (u32 + mirred), and
//! only then the
//! TAP up (adding an ingress qdisc to a link that is up costs the kernel an
//! extra RCU grace period in `dev_deactivate`). The kernel runs a batch's
//! requests in order, so each NIC's steps follow one another, and the NICs
//! follow one after another in the same few system calls.
//!
//! The TAP's qdisc comes before the pod interface's. The first filter on a
//! new ingress qdisc waits for an RCU grace period begun after that qdisc
//! was made (`mini_qdisc_pair_swap`), unless one has already passed. The
//! pod interface is up, so adding its qdisc waits for a grace period
//! (`dev_deactivate`). That one also covers a TAP qdisc made just before,
//! so the TAP's filter waits for nothing: two expedited grace periods per
//! NIC (that one and the TAP fd's close) instead of three. In the other
//! order, the TAP's qdisc came after the last grace period, and its first
//! filter waited for another.

use rtnetlink::packet_route::RouteNetlinkMessage;

use crate::kernel::batch::Request;
use crate::kernel::{links, tc};
use crate::plan::NicPlan;

/// One request, with what to say if it fails: the operation and its object.
#[derive(Debug)]
pub struct Step {
    pub(crate) request: Request,
    pub(crate) op: &'static str,
    pub(crate) on: String,
}

/// The steps for every NIC of `nics` without a bridge, NIC after NIC; `taps`
/// holds each NIC's TAP (or macvtap) ifindex, in the same order.
pub fn unbridged(nics: &[NicPlan], taps: &[u32], group: u32, marker: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    for (n, &tap) in nics.iter().zip(taps).filter(|(n, _)| n.bridge.is_none()) {
        let step = |msg: RouteNetlinkMessage, op: &'static str, on: String| Step {
            request: Request::create(msg),
            op,
            on,
        };
        let settings = links::tap_settings(tap, n.tap.mtu, group, marker, None, n.tc.is_none());
        steps.push(step(
            RouteNetlinkMessage::SetLink(settings),
            "configure TAP",
            n.tap.name.clone(),
        ));
        let Some(tcp) = &n.tc else {
            if n.serve {
                steps.push(step(
                    tc::new_ingress_qdisc(tap),
                    "add ingress qdisc",
                    n.tap.name.clone(),
                ));
                steps.extend(stop_steps(n, tap));
            }
            continue;
        };
        // The TAP's qdisc before the pod's: see the module comment.
        steps.push(step(
            tc::new_ingress_qdisc(tap),
            "add ingress qdisc",
            n.tap.name.clone(),
        ));
        if n.serve {
            steps.extend(stop_steps(n, tap));
        }
        if tcp.create_pod_qdisc {
            steps.push(step(
                tc::new_ingress_qdisc(n.pod.ifindex),
                "add ingress qdisc",
                n.pod.name.clone(),
            ));
        }
        let pod = n.pod.ifindex;
        let redirect = |from: u32, to: u32, on: String| {
            step(
                tc::new_redirect(from, to, tcp.prio),
                "add tc redirect filter",
                on,
            )
        };
        steps.push(redirect(
            pod,
            tap,
            format!("{} -> {}", n.pod.name, n.tap.name),
        ));
        steps.push(redirect(
            tap,
            pod,
            format!("{} -> {}", n.tap.name, n.pod.name),
        ));
        steps.push(step(
            RouteNetlinkMessage::SetLink(links::up_settings(tap)),
            "bring TAP up",
            n.tap.name.clone(),
        ));
    }
    steps
}

/// A served NIC's stop filter on its TAP (`tc::stop_filter`).
pub fn stop_steps(n: &NicPlan, tap: u32) -> Vec<Step> {
    vec![Step {
        request: Request::create(tc::stop_filter(tap)),
        op: "add the filter that keeps a served guest's requests in",
        on: n.tap.name.clone(),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::mac::MacAddr;
    use crate::model::Wiring;
    use crate::plan::{BridgePlan, TcPlan, TC_PRIO_BASE};

    fn nic(pod: u32, wiring: Wiring) -> NicPlan {
        let json = serde_json::json!({
            "pod": {"ifindex": pod, "name": format!("eth{pod}"), "mtu": 1500, "kind": "veth"},
            "tap": {"name": format!("tap_eth{pod}"), "mtu": 1500, "queues": 1,
                    "vnet_hdr": true, "multi_queue": false},
            "wiring": wiring,
        });
        let mut n: NicPlan = serde_json::from_value(json).expect("a NIC plan");
        match wiring {
            Wiring::Tc => {
                n.tc = Some(TcPlan {
                    prio: TC_PRIO_BASE,
                    create_pod_qdisc: pod != 3,
                    existing_pod_qdisc: None,
                })
            }
            Wiring::Bridge => {
                n.bridge = Some(BridgePlan {
                    name: format!("br_eth{pod}"),
                    pod_mac: MacAddr([6, 1, 2, 3, 4, 5]),
                    restore: Default::default(),
                })
            }
            Wiring::Macvtap | Wiring::L3 => {}
        }
        n
    }

    fn ops(steps: &[Step]) -> Vec<String> {
        steps.iter().map(|s| format!("{} {}", s.op, s.on)).collect()
    }

    #[test]
    fn a_tc_nic_gets_the_taps_qdisc_first_goes_up_last_and_nics_follow_each_other() {
        let nics = [nic(2, Wiring::Tc), nic(3, Wiring::Tc)];
        let steps = unbridged(&nics, &[10, 11], 7, "podtap:x");
        assert_eq!(
            ops(&steps),
            [
                "configure TAP tap_eth2",
                "add ingress qdisc tap_eth2",
                "add ingress qdisc eth2",
                "add tc redirect filter eth2 -> tap_eth2",
                "add tc redirect filter tap_eth2 -> eth2",
                "bring TAP up tap_eth2",
                // eth3 had its own qdisc: podtap adds none there.
                "configure TAP tap_eth3",
                "add ingress qdisc tap_eth3",
                "add tc redirect filter eth3 -> tap_eth3",
                "add tc redirect filter tap_eth3 -> eth3",
                "bring TAP up tap_eth3",
            ]
        );
    }

    #[test]
    fn a_macvtap_is_configured_up_in_one_step_and_bridged_nics_are_left_out() {
        let nics = [nic(2, Wiring::Macvtap), nic(3, Wiring::Bridge)];
        let steps = unbridged(&nics, &[10, 11], 7, "podtap:x");
        assert_eq!(ops(&steps), ["configure TAP tap_eth2"]);
        let RouteNetlinkMessage::SetLink(m) = &steps[0].request.message() else {
            panic!("a SetLink")
        };
        assert!(m
            .header
            .flags
            .contains(rtnetlink::packet_route::link::LinkFlags::Up));
    }
}
