//! Kernel features, probed by making each object in a throwaway netns.
//!
//! A fresh thread calls `unshare(CLONE_NEWNET)`: it alone moves to a new,
//! empty netns (the root netns and every other thread stay where they
//! were), opens its own rtnetlink socket there and creates a veth pair, a
//! bridge, a macvtap, qdiscs and filters. When the thread ends,
//! its socket closes and the netns (the thread and the socket were its only
//! users) goes with everything in it. A module list says what could be
//! loaded; creating the object says what works, and loads the module on
//! demand as attach would.

use rtnetlink::packet_route::link::{LinkMessage, MacVtapMode};
use rtnetlink::packet_route::tc::{
    TcAttribute, TcFilterU32, TcFilterU32Option, TcHandle, TcMessage, TcOption,
};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::sys::{protocols::NETLINK_ROUTE, Socket};
use rtnetlink::{LinkBridge, LinkMacVtap, LinkVeth};

use super::checks::{Feature, Probe};
use crate::error::KernelError;
use crate::kernel::batch::{Batch, Request};
use crate::kernel::tc::{match_all, new_filter, new_ingress_qdisc, new_redirect};

/// The result of each kernel feature probe, in [`Feature::ALL`] order.
pub fn probe() -> Vec<(Feature, Probe)> {
    let run = std::thread::Builder::new()
        .name("podtap-doctor".into())
        .spawn(|| -> Result<Vec<(Feature, Probe)>, String> {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| format!("cannot make a throwaway netns (unshare: {e})"))?;
            let mut socket =
                Socket::new(NETLINK_ROUTE).map_err(|e| format!("rtnetlink socket: {e}"))?;
            socket
                .bind_auto()
                .map_err(|e| format!("rtnetlink socket: {e}"))?;
            Ok(probe_all(&Batch::new(socket)))
        });
    let outcome = match run.map(std::thread::JoinHandle::join) {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err("probe thread panicked".to_string()),
        Err(e) => Err(format!("spawn probe thread: {e}")),
    };
    outcome.unwrap_or_else(|why| {
        Feature::ALL
            .iter()
            .map(|f| (*f, Err(why.clone())))
            .collect()
    })
}

fn probe_all(batch: &Batch) -> Vec<(Feature, Probe)> {
    let mut out = Vec::new();
    let veth = add_link(batch, LinkVeth::new("pt0", "pt1").build());
    let pair = match veth {
        Ok(()) => match (index_of(batch, "pt0"), index_of(batch, "pt1")) {
            (Ok(a), Ok(b)) => Ok((a, b)),
            (Err(e), _) | (_, Err(e)) => Err(e),
        },
        Err(e) => Err(e),
    };
    out.push((
        Feature::Veth,
        pair.as_ref().map(|_| made("a veth pair")).map_err(show),
    ));
    let bridge = add_link(batch, LinkBridge::new("ptbr0").build());
    out.push((
        Feature::Bridge,
        bridge.map(|()| made("a bridge")).map_err(|e| show(&e)),
    ));
    out.push((Feature::Tap, tap()));
    let Ok((a, b)) = pair else {
        let why = "not probed: needs a veth pair".to_string();
        for f in &Feature::ALL[3..] {
            out.push((*f, Err(why.clone())));
        }
        return out;
    };
    let macvtap = LinkMacVtap::new("ptmvt0", a, MacVtapMode::Passthrough).build();
    out.push((
        Feature::Macvtap,
        outcome(add_link(batch, macvtap), "a passthru macvtap on a veth"),
    ));
    let ingress = create(batch, new_ingress_qdisc(a));
    let have_ingress = ingress.is_ok();
    out.push((Feature::Ingress, outcome(ingress, "an ingress qdisc")));
    out.push((
        Feature::Clsact,
        outcome(create(batch, clsact(b)), "a clsact qdisc"),
    ));
    if have_ingress {
        out.push((
            Feature::U32,
            outcome(create(batch, u32_filter(a)), "a u32 filter"),
        ));
        let mirred = create(batch, new_redirect(a, b, 2));
        out.push((
            Feature::Mirred,
            outcome(mirred, "a u32 filter with a mirred redirect"),
        ));
    } else {
        for f in [Feature::U32, Feature::Mirred] {
            out.push((f, Err("not probed: needs an ingress qdisc".into())));
        }
    }
    out
}

/// A TAP with vnet_hdr, as attach makes them; it goes when its fd closes
/// (it is not made persistent).
fn tap() -> Probe {
    let flags = crate::kernel::tap::TapFlags {
        vnet_hdr: true,
        multi_queue: false,
    };
    crate::kernel::tap::TapQueue::open("pttap0", flags)
        .map(|_| made("a TAP (vnet_hdr)"))
        .map_err(|e| format!("TUNSETIFF: {e}"))
}

fn made(what: &str) -> String {
    format!("created {what} in a throwaway netns")
}

fn show(e: &KernelError) -> String {
    format!("the kernel refused it: {e}")
}

fn outcome(r: Result<(), KernelError>, what: &str) -> Probe {
    r.map(|()| made(what)).map_err(|e| show(&e))
}

fn add_link(batch: &Batch, msg: LinkMessage) -> Result<(), KernelError> {
    crate::kernel::links::add(batch, msg)
}

fn create(batch: &Batch, msg: RouteNetlinkMessage) -> Result<(), KernelError> {
    batch.request(Request::create(msg))
}

fn index_of(batch: &Batch, name: &str) -> Result<u32, KernelError> {
    crate::kernel::links::index_of(batch, name)?
        .ok_or_else(|| KernelError::Netlink(format!("{name}: not listed after creation")))
}

fn tc_index(ifindex: u32) -> i32 {
    i32::try_from(ifindex).unwrap_or(i32::MAX)
}

/// `tc qdisc add dev B clsact`.
fn clsact(ifindex: u32) -> RouteNetlinkMessage {
    let mut msg = TcMessage::with_index(tc_index(ifindex));
    msg.header.parent = TcHandle::CLSACT;
    msg.header.handle = TcHandle::from(0xFFFF_0000);
    msg.attributes.push(TcAttribute::Kind("clsact".into()));
    RouteNetlinkMessage::NewQueueDiscipline(msg)
}

/// A filter at `ffff:fff2`, priority 1, protocol all, of `kind` with `options`.
fn filter(ifindex: u32, kind: &str, options: Vec<TcOption>) -> RouteNetlinkMessage {
    new_filter(ifindex, 1, kind, options)
}

/// `u32 match u8 0 0` without an action: the classifier alone.
fn u32_filter(ifindex: u32) -> RouteNetlinkMessage {
    let options = vec![TcOption::U32(TcFilterU32Option::Selector(match_all()))];
    filter(ifindex, TcFilterU32::KIND, options)
}
