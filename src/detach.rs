//! Detach: undo what attach recorded, whatever became of the netns.
//!
//! ```no_run
//! # fn main() -> podtap::error::Result<()> {
//! use podtap::state::{SandboxId, StateDir};
//! let id: SandboxId = "pod-1234".parse()?;
//! let report = podtap::detach::detach(&id, &StateDir::new("/run/podtap"), None)?;
//! for warning in report.warnings {
//!     eprintln!("{warning}");
//! }
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};

use crate::error::{Error, Invalid, Result};
use crate::kernel::macvtap;
use crate::kernel::netlink::Netlink;
use crate::kernel::netns::NetNs;
use crate::kernel::netns_search;
use crate::state::{Phase, SandboxId, StateDir, LOCK_TIMEOUT};
use crate::teardown::{self, Proof};

/// When detach deletes the links podtap made (TAPs, bridges, macvtaps).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LinkDeletion {
    /// Before detach returns: once the kernel has unlisted them (the rest
    /// of its work, a wait of 10-15 ms, runs in a child process).
    #[default]
    Now,
    /// For a CNI DEL, which the chain's next plugin follows by deleting
    /// the pod's veth: a child process deletes them once the kernel
    /// announces that deletion (or after `at_most`), and `settle` later,
    /// so the plugin's own wait in the kernel does not queue behind
    /// theirs. Detach returns once the pod's interfaces are as they were;
    /// the child holds the netns's attach lock until the links are gone,
    /// so an attach into the same netns (a network reload) finds none of
    /// them. A deletion that fails then is not reported: the links go with
    /// the netns.
    AfterPodInterfaces {
        /// The longest wait for a pod interface's deletion.
        at_most: std::time::Duration,
        /// The wait after it was announced.
        settle: std::time::Duration,
    },
}

/// What detach did.
#[derive(Debug, Default)]
pub struct DetachReport {
    /// Whether there was a checkpoint (or, for `--force`, something to clean).
    pub found: bool,
    /// Things already gone or left alone on purpose; detach still succeeded.
    pub warnings: Vec<String>,
}

/// Detach sandbox `id`. An unknown id, a gone netns or a reused netns path all
/// succeed; only a real kernel failure fails, and then the checkpoint stays
/// for a retry. A corrupt checkpoint is [`Error::CorruptState`]: see [`force_detach`].
///
/// `netns` is where the caller believes the netns is (CNI_NETNS, the hook's
/// path): it is used only when it is the recorded netns, found by identity,
/// for when the recorded path has died while the netns lives on.
pub fn detach(id: &SandboxId, state: &StateDir, netns: Option<&Path>) -> Result<DetachReport> {
    locked(id, state, || {
        detach_locked(id, state, netns, LinkDeletion::Now)
    })
}

/// Run `work` under the id's lock. A state dir where the lock cannot even be
/// made (read-only, full) blocks nothing when there is nothing recorded.
fn locked(
    id: &SandboxId,
    state: &StateDir,
    work: impl FnOnce() -> Result<DetachReport>,
) -> Result<DetachReport> {
    match state.locked(id, || work().map(|r| without_nodes(id, r))) {
        Err(e) if cannot_write(&e) && matches!(state.load(id), Ok(None)) => {
            Ok(DetachReport::default())
        }
        other => other,
    }
}

/// Remove the id's macvtap device nodes once its links are undone (they
/// live in the host's /dev, not in the netns, so nothing else removes them;
/// a stale node could later reach another pod's macvtap with the same minor).
fn without_nodes(id: &SandboxId, mut report: DetachReport) -> DetachReport {
    if let Err(e) = macvtap::remove_nodes(id.as_str()) {
        report.warnings.push(format!(
            "could not remove macvtap device nodes in {}: {e}",
            macvtap::node_path(id.as_str(), "").display()
        ));
    }
    report
}

/// Whether `e` says the state dir cannot be written (read-only, full, no permission).
fn cannot_write(e: &Error) -> bool {
    let source = match e.primary() {
        Error::Io { source, .. } | Error::Permission { source, .. } => source,
        _ => return false,
    };
    matches!(
        source.raw_os_error(),
        Some(libc::EROFS | libc::ENOSPC | libc::EDQUOT | libc::EACCES | libc::EPERM)
    )
}

/// Detach, and when the checkpoint is corrupt, clean up by podtap's own
/// markers (TAP/bridge ifalias, link group) in `netns` (or the netns the file
/// still names), then remove the file. Without a checkpoint, the links of
/// `id` that carry its marker in `netns` (orphans: see
/// [`crate::check::orphans`]) are removed the same way.
pub fn force_detach(
    id: &SandboxId,
    state: &StateDir,
    netns: Option<&Path>,
) -> Result<DetachReport> {
    let now = LinkDeletion::Now;
    locked(id, state, || match detach_locked(id, state, netns, now) {
        Ok(report) if !report.found => match netns {
            Some(path) => cleanup_by_markers(id, &NetNs::open(path, false)?),
            None => Ok(report),
        },
        Err(e @ Error::CorruptState { .. }) => {
            let mut report = match netns_to_clean(state, id, netns)? {
                Where::In(ns) => cleanup_by_markers(id, &ns)?,
                Where::Gone(why) => DetachReport {
                    found: true,
                    warnings: vec![why],
                },
                Where::Unknown => {
                    return Err(Error::Invalid(Invalid::ForcedDetachNeedsNetns(Box::new(e))));
                }
            };
            report.warnings.insert(
                0,
                format!("removed corrupt checkpoint {}", state.file(id).display()),
            );
            state.remove_unread(id)?;
            Ok(report)
        }
        other => other,
    })
}

/// Detach for doors that must never block pod deletion (CNI DEL, OCI poststop).
///
/// A corrupt checkpoint is cleaned up by podtap's markers in `netns` (or the
/// netns still named in the file), then moved aside as
/// `<id>.json.corrupt-<time>`: kept for inspection, never deleted, and the
/// detach succeeds with a warning. A cleanup that fails is a warning too:
/// only a state dir where the file cannot be moved aside fails the call.
/// `links`: when podtap's links go.
pub fn detach_for_teardown(
    id: &SandboxId,
    state: &StateDir,
    netns: Option<&Path>,
    links: LinkDeletion,
) -> Result<DetachReport> {
    locked(id, state, || match detach_locked(id, state, netns, links) {
        Err(Error::CorruptState { .. }) => {
            let cleaned = netns_to_clean(state, id, netns).and_then(|found| match found {
                Where::In(ns) => cleanup_by_markers(id, &ns),
                Where::Gone(why) => Ok(DetachReport {
                    found: true,
                    warnings: vec![why],
                }),
                Where::Unknown => Ok(DetachReport {
                    found: true,
                    warnings: vec![
                        "the checkpoint names no netns and none was given; cleaned nothing".into(),
                    ],
                }),
            });
            let mut report = match cleaned {
                Ok(report) => report,
                Err(e) => DetachReport {
                    found: true,
                    warnings: vec![format!("cleanup by markers failed: {e}")],
                },
            };
            let kept = state.quarantine(id)?;
            report.warnings.insert(
                0,
                format!("checkpoint was corrupt; moved it to {}", kept.display()),
            );
            Ok(report)
        }
        other => other,
    })
}

fn detach_locked(
    id: &SandboxId,
    state: &StateDir,
    netns: Option<&Path>,
    links: LinkDeletion,
) -> Result<DetachReport> {
    let Some(cp) = state.load_for_teardown(id)? else {
        return Ok(DetachReport::default());
    };
    let mut report = DetachReport {
        found: true,
        warnings: Vec::new(),
    };
    let hints: Vec<&Path> = netns.into_iter().collect();
    match teardown::open_recorded(&cp, &state.file(id), &hints)? {
        Ok(ns) => {
            report.warnings.extend(undo_in(&ns, &cp, links)?);
        }
        Err(why) => report.warnings.push(why),
    }
    state.remove_recorded(&cp)?;
    Ok(report)
}

/// Undo what `cp` records in its live netns `ns`; the warnings.
fn undo_in(
    ns: &NetNs,
    cp: &crate::state::Checkpoint<serde::de::IgnoredAny>,
    links: LinkDeletion,
) -> Result<Vec<String>> {
    let nl = Netlink::connect_bare(ns)?;
    if !cp.is_netns(ns.identity(), nl.cookie) {
        return Ok(vec![format!(
            "netns {} is now a different namespace (same inode, new netns cookie); left it untouched",
            cp.netns.path
        )]);
    }
    // Names count only for an attach that never finished recording.
    // (`pending`: NICs `podtap watch` was adding when it stopped.)
    let proof = match cp.phase() {
        Phase::Applying => Proof::RecordedDead,
        Phase::Complete if !cp.pending.is_empty() => Proof::RecordedDead,
        Phase::Complete => Proof::Recorded,
    };
    match links {
        LinkDeletion::Now => teardown::undo_recorded(&nl, &cp.plan, &cp.created, proof),
        LinkDeletion::AfterPodInterfaces { at_most, settle } => {
            let lock = ns.lock_shared(cp.id.as_str(), LOCK_TIMEOUT)?;
            let fd = lock.hand_over();
            let after = crate::kernel::unlist::AfterPodLinks { at_most, settle };
            teardown::undo_recorded_after_pod(&nl, &cp.plan, &cp.created, proof, (fd, after))
        }
    }
    .into_result()
}

/// Where to clean up after a corrupt checkpoint.
enum Where {
    /// In this live netns.
    In(NetNs),
    /// Nowhere: the netns is gone (why), and its virtual links with it.
    Gone(String),
    /// The file names no netns and the caller gave none.
    Unknown,
}

/// The netns whose identity the file still holds, found by identity (the
/// caller's path first), else the netns the caller or the file names. Never
/// the host's.
fn netns_to_clean(state: &StateDir, id: &SandboxId, given: Option<&Path>) -> Result<Where> {
    let (salvaged_path, identity, cookie) = salvage_netns(&state.file(id));
    let gone = |path: &Path| {
        Where::Gone(format!(
            "netns {} is gone; its virtual links went with it",
            path.display()
        ))
    };
    // A file that names the host's netns says nothing trustworthy about where.
    let identity = identity.filter(|i| !crate::kernel::netns::is_host_identity(*i).unwrap_or(true));
    if let Some(identity) = identity {
        let mut hints: Vec<&Path> = given.into_iter().collect();
        hints.extend(salvaged_path.as_deref());
        let want = crate::kernel::netns_id::NetnsId::new(identity, cookie);
        if let Some(ns) = netns_search::find(&want, &hints) {
            return Ok(Where::In(ns));
        }
        if given.is_none() {
            // Nothing holds the recorded netns.
            let path = salvaged_path.unwrap_or_default();
            return Ok(gone(&path));
        }
    }
    let Some(path) = given.or(salvaged_path.as_deref()) else {
        return Ok(Where::Unknown);
    };
    let recorded = identity.map(|i| crate::kernel::netns_id::NetnsId::new(i, cookie));
    match NetNs::open(path, false) {
        // The same (dev, inode) with another cookie: a newer netns that
        // reuses the number of the recorded one, which is gone.
        Ok(ns) if recorded.is_some_and(|r| r.pair() == ns.identity() && !ns.id().is_ok_and(|now| r.matches(&now))) => {
            Ok(Where::Gone(format!(
                "netns {} is now a different namespace (same inode, new netns cookie); left it untouched",
                path.display()
            )))
        }
        Ok(ns) => Ok(Where::In(ns)),
        Err(Error::NetnsMissing { .. } | Error::NotNetns { .. }) => Ok(gone(path)),
        Err(Error::HostNetns { .. }) => Ok(Where::Gone(format!(
            "netns {} is the host's own; left it untouched",
            path.display()
        ))),
        Err(e) => Err(e),
    }
}

/// Pull `netns.path`, `(dev, inode)` and the cookie out of a checkpoint
/// that no longer parses as a whole; the identity only when both numbers
/// are there.
fn salvage_netns(file: &Path) -> (Option<PathBuf>, Option<(u64, u64)>, Option<u64>) {
    // The file may be anything (that is why it is corrupt): never follow or block.
    let Some(text) = crate::state::read_entry(file).ok().flatten() else {
        return (None, None, None);
    };
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let netns = &v["netns"];
    let path = netns["path"].as_str().map(PathBuf::from);
    let identity = netns["dev"].as_u64().zip(netns["inode"].as_u64());
    (path, identity, v["netns_cookie"].as_u64())
}

/// Without a checkpoint: undo what podtap's markers for `id` show in `ns`.
fn cleanup_by_markers(id: &SandboxId, ns: &NetNs) -> Result<DetachReport> {
    let nl = Netlink::connect_bare(ns)?;
    let warnings = teardown::undo_by_markers(&nl, id)?.into_result()?;
    Ok(DetachReport {
        found: true,
        warnings,
    })
}
