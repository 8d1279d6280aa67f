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

use crate::error::{Error, Result};
use crate::kernel::netlink::Netlink;
use crate::kernel::netns::NetNs;
use crate::kernel::runtime::block_on;
use crate::state::{Phase, SandboxId, StateDir};
use crate::teardown::{self, Proof};

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
/// for a retry. A corrupt checkpoint is an error (exit 8): see [`force_detach`].
///
/// `netns` is where the caller believes the netns is (CNI_NETNS, the hook's
/// path): it is used only when it is the recorded netns, found by identity,
/// for when the recorded path has died while the netns lives on.
pub fn detach(id: &SandboxId, state: &StateDir, netns: Option<&Path>) -> Result<DetachReport> {
    locked(id, state, || detach_locked(id, state, netns))
}

/// Run `work` under the id's lock. A state dir where the lock cannot even be
/// made (read-only, full) blocks nothing when there is nothing recorded.
fn locked(
    id: &SandboxId,
    state: &StateDir,
    work: impl FnOnce() -> Result<DetachReport>,
) -> Result<DetachReport> {
    match state.locked(id, work) {
        Err(e) if cannot_write(&e) && matches!(state.load(id), Ok(None)) => {
            Ok(DetachReport::default())
        }
        other => other,
    }
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
/// markers (TAP/bridge ifalias, link group) in `netns` (or the netns path
/// still readable in the file), then remove the file.
pub fn force_detach(
    id: &SandboxId,
    state: &StateDir,
    netns: Option<&Path>,
) -> Result<DetachReport> {
    locked(id, state, || match detach_locked(id, state, netns) {
        Err(e @ Error::CorruptState { .. }) => {
            let path = netns_to_clean(state, id, netns);
            let Some(path) = path else {
                return Err(Error::Invalid(format!(
                    "{e}; pass --netns PATH so --force knows where to clean up"
                )));
            };
            let mut report = cleanup_by_markers(id, &path)?;
            report.warnings.insert(
                0,
                format!("removed corrupt checkpoint {}", state.file(id).display()),
            );
            state.remove(id)?;
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
/// detach succeeds with a warning.
pub fn detach_for_teardown(
    id: &SandboxId,
    state: &StateDir,
    netns: Option<&Path>,
) -> Result<DetachReport> {
    locked(id, state, || match detach_locked(id, state, netns) {
        Err(Error::CorruptState { .. }) => {
            let path = netns_to_clean(state, id, netns);
            let mut report = match path {
                Some(path) => cleanup_by_markers(id, &path)?,
                None => DetachReport {
                    found: true,
                    warnings: vec![
                        "the checkpoint names no netns and none was given; cleaned nothing".into(),
                    ],
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

fn detach_locked(id: &SandboxId, state: &StateDir, netns: Option<&Path>) -> Result<DetachReport> {
    let Some(cp) = state.load(id)? else {
        return Ok(DetachReport::default());
    };
    let mut report = DetachReport {
        found: true,
        warnings: Vec::new(),
    };
    let hints: Vec<&Path> = netns.into_iter().collect();
    match teardown::open_recorded(&cp, &state.file(id), &hints)? {
        Ok(ns) => {
            let warnings = block_on(async {
                let nl = Netlink::connect(&ns)?;
                if !cp.is_netns(ns.identity(), nl.cookie) {
                    return Ok(vec![format!(
                        "netns {} is now a different namespace (same inode, new netns cookie); left it untouched",
                        cp.netns.path
                    )]);
                }
                // Names count only for an attach that never finished recording.
                let proof = match cp.phase {
                    Phase::Applying => Proof::RecordedDead,
                    Phase::Complete => Proof::Recorded,
                };
                teardown::undo_recorded(&nl, &cp.plan, &cp.created, proof)
                    .await
                    .into_result()
            })?;
            report.warnings.extend(warnings);
        }
        Err(why) => report.warnings.push(why),
    }
    state.remove(id)?;
    Ok(report)
}

/// Where to clean up after a corrupt checkpoint: the netns the caller
/// names, else the one the file still names.
fn netns_to_clean(state: &StateDir, id: &SandboxId, given: Option<&Path>) -> Option<PathBuf> {
    given
        .map(Path::to_path_buf)
        .or_else(|| salvage_netns_path(&state.file(id)))
}

/// Pull `netns.path` out of a checkpoint that no longer parses as a whole.
fn salvage_netns_path(file: &Path) -> Option<PathBuf> {
    // The file may be anything (that is why it is corrupt): never follow or block.
    let text = crate::state::read_entry(file).ok()??;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("netns")?.get("path")?.as_str().map(PathBuf::from)
}

/// Without a checkpoint: undo what podtap's markers for `id` show in the netns at `path`.
fn cleanup_by_markers(id: &SandboxId, path: &Path) -> Result<DetachReport> {
    let ns = match NetNs::open(path, false) {
        Ok(ns) => ns,
        Err(Error::NetnsMissing { .. }) | Err(Error::NotNetns { .. }) => {
            return Ok(DetachReport {
                found: true,
                warnings: vec![format!(
                    "netns {} is gone; its virtual links went with it",
                    path.display()
                )],
            })
        }
        Err(e) => return Err(e),
    };
    let warnings = block_on(async {
        let nl = Netlink::connect(&ns)?;
        teardown::undo_by_markers(&nl, id).await?.into_result()
    })?;
    Ok(DetachReport {
        found: true,
        warnings,
    })
}
