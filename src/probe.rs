//! Can this node wire pods? Each kernel feature a wiring mode needs, probed
//! by making it in a throwaway network namespace.
//!
//! A fresh thread calls `unshare(CLONE_NEWNET)`: it alone moves to a new,
//! empty netns (the host's netns and every other thread stay where they
//! were), opens its own rtnetlink socket there and makes each object.
//! When the thread ends, its socket closes and the netns goes with
//! everything in it. A module list says what could be loaded; making the
//! object says what works, and loads the module on demand as attach would.
//!
//! ```no_run
//! use podtap::model::Wiring;
//! match podtap::probe::mode(Wiring::Tc) {
//!     Ok(()) => println!("this node can attach in tc mode"),
//!     Err(missing) => println!("not in tc mode: {missing}"),
//! }
//! ```

use std::fmt;

use rtnetlink::packet_route::link::{LinkMessage, MacVtapMode};
use rtnetlink::packet_route::tc::{
    TcAttribute, TcFilterU32, TcFilterU32Option, TcHandle, TcMessage, TcOption,
};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::sys::{protocols::NETLINK_ROUTE, Socket};
use rtnetlink::{LinkBridge, LinkMacVtap, LinkVeth};

use crate::error::KernelError;
use crate::kernel::batch::{Batch, Request};
use crate::kernel::links;
use crate::kernel::tap::{TapFlags, TapQueue};
use crate::kernel::tc::{match_all, new_filter, new_ingress_qdisc, new_redirect};
use crate::model::Wiring;

/// A kernel feature podtap's wiring uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Feature {
    /// A veth pair: what the CNI plugins podtap chains after give a pod.
    Veth,
    /// A Linux bridge (bridge mode).
    Bridge,
    /// A TAP with `IFF_VNET_HDR` on `/dev/net/tun` (tc, bridge and l3 mode).
    Tap,
    /// A passthru macvtap on a veth (macvtap mode).
    Macvtap,
    /// An ingress qdisc (tc mode).
    Ingress,
    /// A clsact qdisc: what other plugins (Cilium, Calico eBPF) put beside
    /// podtap's filters; podtap itself needs none.
    Clsact,
    /// A u32 classifier (tc mode).
    U32,
    /// A u32 filter with a mirred redirect (tc mode).
    Mirred,
    /// nf_tables with nat and filter chains in an inet table (l3 mode's
    /// anti-spoofing and port-forward).
    Nftables,
}

impl Feature {
    /// Every feature, in the order [`features`] reports them.
    pub const ALL: [Feature; 9] = [
        Feature::Veth,
        Feature::Bridge,
        Feature::Tap,
        Feature::Macvtap,
        Feature::Ingress,
        Feature::Clsact,
        Feature::U32,
        Feature::Mirred,
        Feature::Nftables,
    ];

    /// Its name, as a report prints it.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Veth => "veth",
            Feature::Bridge => "bridge",
            Feature::Tap => "tap",
            Feature::Macvtap => "macvtap",
            Feature::Ingress => "ingress qdisc",
            Feature::Clsact => "clsact qdisc",
            Feature::U32 => "u32 filter",
            Feature::Mirred => "mirred action",
            Feature::Nftables => "nftables",
        }
    }

    /// What the probe makes for it.
    pub fn made(self) -> &'static str {
        match self {
            Feature::Veth => "a veth pair",
            Feature::Bridge => "a bridge",
            Feature::Tap => "a TAP (vnet_hdr) on /dev/net/tun",
            Feature::Macvtap => "a passthru macvtap on a veth",
            Feature::Ingress => "an ingress qdisc",
            Feature::Clsact => "a clsact qdisc",
            Feature::U32 => "a u32 filter",
            Feature::Mirred => "a u32 filter with a mirred redirect",
            Feature::Nftables => "an inet table with nat and filter chains, as l3 mode's",
        }
    }

    /// Whether attach in `mode` needs it.
    pub fn needed_by(self, mode: Wiring) -> bool {
        match self {
            Feature::Veth => true,
            Feature::Bridge => mode == Wiring::Bridge,
            Feature::Tap => mode != Wiring::Macvtap,
            Feature::Macvtap => mode == Wiring::Macvtap,
            Feature::Ingress | Feature::U32 | Feature::Mirred => mode == Wiring::Tc,
            Feature::Clsact => false,
            Feature::Nftables => mode == Wiring::L3,
        }
    }

    /// The feature that must work before this one can be probed.
    fn needs(self) -> Option<Feature> {
        match self {
            Feature::Macvtap | Feature::Ingress | Feature::Clsact => Some(Feature::Veth),
            Feature::U32 | Feature::Mirred => Some(Feature::Ingress),
            Feature::Veth | Feature::Bridge | Feature::Tap | Feature::Nftables => None,
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a feature did not probe as working.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The kernel refused to make it.
    #[error("the kernel refused {}: {source}", .feature.made())]
    Refused {
        /// What was probed.
        feature: Feature,
        /// The kernel's answer.
        source: KernelError,
    },
    /// Not probed: the feature it is made on did not work.
    #[error("{feature} not probed: needs {needs}")]
    NotProbed {
        /// What was not probed.
        feature: Feature,
        /// The feature that failed first.
        needs: Feature,
    },
    /// No throwaway netns could be made (no CAP_SYS_ADMIN, say).
    #[error("cannot make a throwaway netns: {0}")]
    NoScratchNetns(std::io::Error),
}

/// Probe every [`Feature`], in [`Feature::ALL`] order.
pub fn features() -> Vec<(Feature, Result<(), ProbeError>)> {
    probe(&Feature::ALL)
}

/// Probe only what attach in `mode` needs, and return the first that fails:
/// cheap enough for a runtime's status poll (CNI STATUS runs it).
pub fn mode(mode: Wiring) -> Result<(), ProbeError> {
    let wanted: Vec<Feature> = Feature::ALL
        .into_iter()
        .filter(|f| f.needed_by(mode))
        .collect();
    probe(&wanted)
        .into_iter()
        .find_map(|(_, outcome)| outcome.err())
        .map_or(Ok(()), Err)
}

/// Probe `wanted` (each with what it needs) in one throwaway netns.
fn probe(wanted: &[Feature]) -> Vec<(Feature, Result<(), ProbeError>)> {
    let asked = wanted.to_vec();
    let run = std::thread::Builder::new()
        .name("podtap-probe".into())
        .spawn(
            move || -> std::io::Result<Vec<(Feature, Result<(), ProbeError>)>> {
                nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)?;
                let mut socket = Socket::new(NETLINK_ROUTE)?;
                socket.bind_auto()?;
                let mut scratch = Scratch::new(Batch::new(socket));
                Ok(asked.iter().map(|f| (*f, scratch.probe(*f))).collect())
            },
        );
    let outcome = match run.map(std::thread::JoinHandle::join) {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err(std::io::Error::other("probe thread panicked")),
        Err(e) => Err(e),
    };
    outcome.unwrap_or_else(|e| {
        wanted
            .iter()
            .map(|f| {
                let e = std::io::Error::new(e.kind(), e.to_string());
                (*f, Err(ProbeError::NoScratchNetns(e)))
            })
            .collect()
    })
}

/// The throwaway netns's socket and what was made in it so far.
struct Scratch {
    batch: Batch,
    /// The veth pair's ifindexes, once made.
    pair: Option<(u32, u32)>,
    /// Each feature probed so far, and whether it worked.
    done: Vec<(Feature, bool)>,
}

impl Scratch {
    fn new(batch: Batch) -> Self {
        Scratch {
            batch,
            pair: None,
            done: Vec::new(),
        }
    }

    /// Probe `feature`, first what it needs (once).
    fn probe(&mut self, feature: Feature) -> Result<(), ProbeError> {
        if let Some(&(_, ok)) = self.done.iter().find(|(f, _)| *f == feature) {
            return if ok {
                Ok(())
            } else {
                Err(ProbeError::NotProbed {
                    feature,
                    needs: feature,
                })
            };
        }
        if let Some(needs) = feature.needs() {
            if self.probe(needs).is_err() {
                self.done.push((feature, false));
                return Err(ProbeError::NotProbed { feature, needs });
            }
        }
        let made = self.make(feature);
        self.done.push((feature, made.is_ok()));
        made.map_err(|source| ProbeError::Refused { feature, source })
    }

    fn make(&mut self, feature: Feature) -> Result<(), KernelError> {
        let (a, b) = self.pair.unwrap_or((0, 0));
        match feature {
            Feature::Veth => {
                links::add(&self.batch, LinkVeth::new("pt0", "pt1").build())?;
                self.pair = Some((self.index_of("pt0")?, self.index_of("pt1")?));
                Ok(())
            }
            Feature::Bridge => links::add(&self.batch, LinkBridge::new("ptbr0").build()),
            Feature::Tap => TapQueue::open(
                "pttap0",
                TapFlags {
                    vnet_hdr: true,
                    multi_queue: false,
                },
            )
            .map(drop)
            .map_err(KernelError::from),
            Feature::Macvtap => {
                self.add(LinkMacVtap::new("ptmvt0", a, MacVtapMode::Passthrough).build())
            }
            Feature::Ingress => self.create(new_ingress_qdisc(a)),
            Feature::Clsact => self.create(clsact(b)),
            Feature::U32 => self.create(u32_filter(a)),
            Feature::Mirred => self.create(new_redirect(a, b, 2)),
            Feature::Nftables => nft_table(),
        }
    }

    fn add(&self, msg: LinkMessage) -> Result<(), KernelError> {
        links::add(&self.batch, msg)
    }

    fn create(&self, msg: RouteNetlinkMessage) -> Result<(), KernelError> {
        self.batch.request(Request::create(msg))
    }

    fn index_of(&self, name: &str) -> Result<u32, KernelError> {
        links::index_of(&self.batch, name)?
            .ok_or_else(|| KernelError::Netlink(format!("{name}: not listed after creation")))
    }
}

/// A table of routed wiring's shape (loopback DNAT and SNAT, anti-spoofing),
/// made in the throwaway netns (it goes with it).
fn nft_table() -> Result<(), KernelError> {
    use crate::kernel::nft;
    let spec = nft::Spec {
        id: 0,
        sandbox: "probe".into(),
        forward: Some(nft::Forward {
            tap: "pttap0".into(),
            v4: Some(nft::NatPair {
                guest: std::net::Ipv4Addr::new(198, 18, 0, 2),
                snat: crate::plan::l3::ROUTER4,
            }),
            v6: None,
        }),
        guard: Some(nft::Guard {
            group: 1,
            v4: vec![std::net::Ipv4Addr::new(198, 18, 0, 2)],
            v6: Vec::new(),
        }),
        local_daddr_check: false,
    };
    let table = nft::Table::podtap(&spec).map_err(|e| KernelError::Netlink(e.0))?;
    let socket = nft::Nft::open().map_err(KernelError::from)?;
    socket.create(&table).map_err(|e| {
        e.errno()
            .map_or_else(|| KernelError::Netlink(e.to_string()), KernelError::from)
    })
}

/// `tc qdisc add dev B clsact`.
fn clsact(ifindex: u32) -> RouteNetlinkMessage {
    let mut msg = TcMessage::with_index(i32::try_from(ifindex).unwrap_or(i32::MAX));
    msg.header.parent = TcHandle::CLSACT;
    msg.header.handle = TcHandle::from(0xFFFF_0000);
    msg.attributes.push(TcAttribute::Kind("clsact".into()));
    RouteNetlinkMessage::NewQueueDiscipline(msg)
}

/// `u32 match u8 0 0` without an action, at priority 1: the classifier alone.
fn u32_filter(ifindex: u32) -> RouteNetlinkMessage {
    let options = vec![TcOption::U32(TcFilterU32Option::Selector(match_all()))];
    new_filter(ifindex, 1, TcFilterU32::KIND, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_needs_what_it_makes() {
        for f in Feature::ALL {
            assert_eq!(
                f.needed_by(Wiring::Tc),
                matches!(
                    f,
                    Feature::Veth
                        | Feature::Tap
                        | Feature::Ingress
                        | Feature::U32
                        | Feature::Mirred
                ),
                "{f}"
            );
            assert!(!f.needed_by(Wiring::Macvtap) || matches!(f, Feature::Veth | Feature::Macvtap));
            // What a feature is made on comes before it in the report.
            if let Some(needs) = f.needs() {
                let pos = |x| Feature::ALL.iter().position(|g| *g == x);
                assert!(pos(needs) < pos(f), "{f}");
            }
        }
    }
}
