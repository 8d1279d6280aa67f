//! Hand-made kernel states and plans for teardown's unit tests.

use std::collections::BTreeMap;

use crate::id::SandboxId;
use crate::kernel::links::LinkState;
use crate::kernel::mac::MacAddr;
use crate::kernel::tc::FilterInfo;
use crate::model::{LinkKind, Wiring};
use crate::plan::{self, BridgePlan, NicPlan, Plan, PodSide, TapPlan, TcPlan, TC_PRIO_BASE};
use crate::state::Created;

use super::actions::Observed;

pub(super) const GROUP: u32 = 0x7064_0001;

pub(super) fn id() -> SandboxId {
    SandboxId::new("s1").unwrap()
}

pub(super) fn mac(last: u8) -> MacAddr {
    MacAddr([0xaa, 0xbb, 0xcc, 0, 0, last])
}

pub(super) fn link(ifindex: u32, name: &str, kind: Option<&str>) -> LinkState {
    LinkState {
        ifindex,
        name: name.into(),
        kind: kind.map(str::to_string),
        mtu: 1500,
        up: true,
        mac: Some(mac(u8::try_from(ifindex).unwrap())),
        txqlen: Some(1000),
        ..LinkState::default()
    }
}

pub(super) fn tap(ifindex: u32, name: &str) -> LinkState {
    LinkState {
        group: GROUP,
        alias: Some(plan::marker(&id())),
        ..link(ifindex, name, Some("tun"))
    }
}

pub(super) fn nic(pod: u32, tap: &str, wiring: Wiring) -> NicPlan {
    NicPlan {
        pod: PodSide {
            ifindex: pod,
            name: format!("eth{pod}"),
            mac: Some(mac(u8::try_from(pod).unwrap())),
            mtu: 1500,
            kind: LinkKind::Veth,
            txqlen: Some(0),
            neighbours: vec![],
        },
        tap: TapPlan {
            name: tap.into(),
            mtu: 1500,
            queues: 1,
            vnet_hdr: true,
            multi_queue: false,
            owner: None,
            group: None,
        },
        guest_mac: None,
        wiring,
        wiring_note: None,
        tc: (wiring == Wiring::Tc).then_some(TcPlan {
            prio: TC_PRIO_BASE,
            create_pod_qdisc: true,
            existing_pod_qdisc: None,
        }),
        bridge: (wiring == Wiring::Bridge).then(|| BridgePlan {
            name: format!("br_eth{pod}"),
            pod_mac: MacAddr([0x06, 1, 2, 3, 4, u8::try_from(pod).unwrap()]),
            restore: Default::default(),
        }),
        macvtap: (wiring == Wiring::Macvtap).then(|| crate::plan::MacvtapPlan {
            device: format!("/dev/podtap/pod-1/{tap}"),
        }),
        l3: None,
        serve: false,
    }
}

pub(super) fn the_plan(nics: Vec<NicPlan>) -> Plan {
    Plan {
        id: id(),
        mode: Wiring::Tc,
        group: GROUP,
        nics,
        taps: None,
        tc_redirect: None,
        l3: None,
    }
}

pub(super) fn created(ifindex: u32, name: &str, kind: &str) -> Created {
    Created {
        name: name.into(),
        ifindex,
        kind: serde_json::from_value(serde_json::json!(kind)).expect("a created kind"),
        mac: None,
    }
}

pub(super) fn observed(links: Vec<LinkState>, filters: Vec<(u32, Vec<FilterInfo>)>) -> Observed {
    Observed {
        links: links.into_iter().map(|l| (l.ifindex, l)).collect(),
        filters: filters.into_iter().collect::<BTreeMap<_, _>>(),
        neighbours: vec![],
    }
}

pub(super) fn ours_filter(to: u32) -> FilterInfo {
    FilterInfo {
        prio: TC_PRIO_BASE,
        redirect_to: Some(to),
        via: Some(crate::kernel::tc::Via::Bpf),
    }
}
