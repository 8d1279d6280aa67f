//! Attach: create one TAP per pod interface inside the netns, wire it,
//! record a checkpoint, and return the description a VMM launcher boots from.
//!
//! ```no_run
//! # fn main() -> podtap::error::Result<()> {
//! use std::path::Path;
//! use podtap::attach::AttachOptions;
//! use podtap::state::{SandboxId, StateDir};
//!
//! let id: SandboxId = "pod-1234".parse()?;
//! let state = StateDir::new("/run/podtap");
//! let attached = podtap::attach::attach(
//!     Path::new("/run/netns/pod-1234"),
//!     &id,
//!     &AttachOptions::default(),
//!     &state,
//! )?;
//! for iface in &attached.description.interfaces {
//!     if let Some(tap) = &iface.tap {
//!         println!("{} -> {}", iface.name, tap.name);
//!     }
//! }
//! # Ok(())
//! # }
//! ```

use std::path::Path;

use crate::apply;
use crate::error::{Error, Result};
use crate::kernel::netlink::Netlink;
use crate::kernel::netns::{NetNs, OpeningLink};
use crate::model::Description;
use crate::state::{SandboxId, Stage, StateDir, LOCK_TIMEOUT};
use crate::teardown::{self, Proof};

pub use crate::model::Wiring;
pub use crate::plan::{AttachOptions, NicOptions, TapOwner, MAX_QUEUES, TABLE_ANSWER_LIMIT};

/// Attach `opts` to the netns at `netns` under sandbox `id`, and return the
/// description. The host's own netns is always refused: detach could not
/// tell its objects from the host's, and a redirect there would cut the
/// node off.
///
/// Idempotent: a second attach of the same id and netns returns the recorded
/// description (`fresh` false), with the pod's routes, neighbours and rules
/// as they are then (the checkpoint records no routes or rules; a neighbour
/// it recorded keeps its recorded state): the same bytes while they have not
/// changed. An attach that crashed half-way is undone first. Blocks the
/// calling thread (from async code, call it through `spawn_blocking`).
pub fn attach(
    netns: &Path,
    id: &SandboxId,
    opts: &AttachOptions,
    state: &StateDir,
) -> Result<Attached> {
    // Every event of this attach carries the sandbox id and the netns.
    let span = tracing::info_span!("attach", id = id.as_str(), netns = %netns.display());
    let _entered = span.enter();
    let ns = NetNs::open(netns, false)?;
    // The netns thread opens its sockets while this one takes the locks.
    let opening = ns.open_netlink()?;
    state.locked(id, || {
        let _netns_lock = ns.lock(id.as_str(), LOCK_TIMEOUT)?;
        attach_locked(&ns, opening, id, opts, state)
    })
}

/// What [`attach`] did.
#[derive(Debug, Clone)]
pub struct Attached {
    /// The description, with what was built.
    pub description: Description,
    /// Whether this call built it (false: an earlier attach had, and this one
    /// returned the recorded description).
    pub fresh: bool,
    /// For an attachment with served NICs, whether `podtap serve` took their
    /// sockets (bound before attach returned, so the guest's first request
    /// is answered); false when no daemon listens on the state dir (a
    /// daemon started later, or `watch --serve`, serves from then on).
    /// `None`: no NIC is served, or this call did not build.
    pub handed_over: Option<bool>,
}

fn attach_locked(
    ns: &NetNs,
    opening: OpeningLink,
    id: &SandboxId,
    opts: &AttachOptions,
    state: &StateDir,
) -> Result<Attached> {
    let fresh = |description: Description| Attached {
        handed_over: crate::serve::hand_over(state, id, ns, &description),
        description,
        fresh: true,
    };
    let recorded = state.load(id)?;
    let mut nl = Netlink::connect_opening(ns, opening)?;
    nl.set_table_answer_limit(opts.table_answer_limit);
    if let Some(cp) = recorded {
        if (cp.netns.dev, cp.netns.inode) == ns.identity() && !cp.is_netns(ns.identity(), nl.cookie)
        {
            // Same inode number, other cookie: the recorded netns died and its
            // inode was reused. Nothing of it is left to undo.
            tracing::warn!("sandbox {id}: dropping a checkpoint of a netns that no longer exists");
            state.remove(id)?;
            return apply::fresh(ns, &nl, id, opts, state).map(fresh);
        }
        if !cp.is_netns(ns.identity(), nl.cookie) {
            return Err(Error::Conflict {
                id: id.to_string(),
                existing: cp.netns.path.clone(),
                existing_inode: cp.netns.inode,
                requested: ns.display(),
            });
        }
        if let Stage::Complete(Some(description)) = cp.stage {
            // The checkpoint records the description without its routes
            // and rules: the pod's tables are read again, as they are now.
            return Ok(Attached {
                description: apply::recorded(ns, &nl, description)?,
                fresh: false,
                handed_over: None,
            });
        }
        tracing::warn!("sandbox {id}: an earlier attach did not finish; undoing it first");
        // A dead attach: match by planned name too, for a TAP made just
        // before the kill and not yet grouped.
        teardown::undo_recorded(&nl, &cp.plan, &cp.created, Proof::RecordedDead).into_result()?;
        state.remove(id)?;
    }
    apply::fresh(ns, &nl, id, opts, state).map(fresh)
}
