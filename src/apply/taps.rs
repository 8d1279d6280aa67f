//! The TAPs of a plan: which NICs get one, what they are made with (fds the
//! netns thread opens ahead, [`TapMaker`]), and making them.

use crate::error::Error;
use crate::kernel::mac::MacAddr;
use crate::kernel::netlink::Netlink;
use crate::kernel::netns_worker::Pending;
use crate::kernel::tap::{TapFlags, TapMaker, TapSpec};
use crate::plan::{NicPlan, Plan};

/// The NICs of `plan` that get a TAP (all but the macvtap ones).
pub(super) fn nics(plan: &Plan) -> impl Iterator<Item = &NicPlan> {
    plan.nics.iter().filter(|n| n.macvtap.is_none())
}

/// The TAPs of `plan` to create.
pub(super) fn specs(plan: &Plan) -> Vec<TapSpec> {
    nics(plan)
        .map(|n| TapSpec {
            name: n.tap.name.clone(),
            flags: TapFlags {
                vnet_hdr: n.tap.vnet_hdr,
                multi_queue: n.tap.multi_queue,
            },
            owner: n.tap.owner,
            group: n.tap.group,
        })
        .collect()
}

/// What [`super::build::build`] makes its TAPs with, opening on the netns thread while
/// the caller records its intent ([`TapMaker`]).
pub(super) type Prepared = Pending<std::io::Result<TapMaker>>;

/// The most TAPs whose fds are opened ahead: each holds an fd until its TAP
/// is made, and a pod with more interfaces than this (none seen) makes its
/// TAPs on the netns thread, one fd at a time, as before.
const PREPARED_TAPS_MAX: usize = 128;

/// Queue the opening of a [`TapMaker`] for `count` TAPs on the netns
/// thread; `None` when there are none to make, too many, or the thread has
/// ended.
pub(super) fn prepare(nl: &Netlink, count: usize) -> Option<Prepared> {
    (1..=PREPARED_TAPS_MAX)
        .contains(&count)
        .then(|| nl.worker.start(move || TapMaker::open(count)).ok())
        .flatten()
}

/// Create the persistent TAPs and learn their ifindexes: on this thread
/// with `prepared` fds when they opened (no hand-off to the netns thread
/// and back on the attach's path), else on the netns thread. Returns the
/// ifindexes of those made, and the error that stopped it, if any.
pub(super) fn create(
    nl: &Netlink,
    specs: &[TapSpec],
    prepared: Option<Prepared>,
) -> (Vec<(u32, MacAddr)>, Option<Error>) {
    if specs.is_empty() {
        return (Vec::new(), None);
    }
    let ready = prepared
        .and_then(|p| p.opened("the TAPs' fds"))
        .filter(|maker| maker.capacity() >= specs.len());
    let outcome = match ready {
        Some(maker) => Ok(maker.create(specs)),
        None => {
            let specs = specs.to_vec();
            nl.worker.run(move || {
                Ok(match TapMaker::open(specs.len()) {
                    Ok(maker) => maker.create(&specs),
                    Err(e) => (Vec::new(), specs.first().map(|s| (s.name.clone(), e))),
                })
            })
        }
    };
    match outcome {
        Ok((made, failed)) => {
            let err =
                failed.map(|(name, e)| nl.err("create TAP (TUNSETIFF/TUNSETPERSIST)", name, e));
            (made, err)
        }
        Err(e) => (Vec::new(), Some(e)),
    }
}
