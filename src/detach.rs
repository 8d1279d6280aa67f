//! `detach`: undo what attach recorded, whatever became of the netns.

use std::path::{Path, PathBuf};

use crate::attach::LOCK_TIMEOUT;
use crate::error::{Error, Result};
use crate::kernel::links::{self, LinkState};
use crate::kernel::netns::NetNs;
use crate::kernel::{bridge, tc};
use crate::plan::{is_podtap_prio, preferred_group};
use crate::scan::Netlink;
use crate::state::{validate_id, Checkpoint, StateDir};
use crate::teardown;

/// What detach did; `warnings` go to stderr, the exit code stays 0.
#[derive(Debug, Default)]
pub struct DetachReport {
    pub found: bool,
    pub warnings: Vec<String>,
}

/// Detach sandbox `id`. An unknown id, a gone netns or a reused netns path all succeed.
/// With `force`, a corrupt checkpoint is cleaned up by podtap's markers in `netns`
/// (or the netns path still readable in the file).
pub fn detach(
    id: &str,
    state: &StateDir,
    force: bool,
    netns: Option<&Path>,
) -> Result<DetachReport> {
    validate_id(id)?;
    state.locked(id, LOCK_TIMEOUT, || detach_locked(id, state, force, netns))
}

fn detach_locked(
    id: &str,
    state: &StateDir,
    force: bool,
    netns: Option<&Path>,
) -> Result<DetachReport> {
    let cp = match state.load(id) {
        Ok(Some(cp)) => cp,
        Ok(None) => return Ok(DetachReport::default()),
        Err(e @ Error::CorruptState { .. }) if force => {
            let path = netns
                .map(Path::to_path_buf)
                .or_else(|| salvage_netns_path(&state.file(id)));
            let Some(path) = path else {
                return Err(Error::Invalid(format!(
                    "{e}; pass --netns PATH so --force knows where to clean up"
                )));
            };
            let mut report = force_cleanup(id, &path)?;
            report.warnings.insert(
                0,
                format!("removed corrupt checkpoint {}", state.file(id).display()),
            );
            state.remove(id)?;
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    let mut report = DetachReport {
        found: true,
        warnings: Vec::new(),
    };
    match open_recorded(&cp)? {
        Ok(ns) => {
            let warnings = crate::kernel::runtime::block_on(async {
                let nl = Netlink::connect(&ns)?;
                if !cp.is_netns(ns.identity(), nl.cookie) {
                    return Ok(vec![format!(
                        "netns {} is now a different namespace (same inode, new netns cookie); left it untouched",
                        cp.netns.path
                    )]);
                }
                // Names count only for an attach that never finished recording.
                let match_names = cp.phase == crate::state::Phase::Applying;
                teardown::undo(&nl, &cp.plan, &cp.created, match_names)
                    .await
                    .into_result(id)
            })?;
            report.warnings.extend(warnings);
        }
        Err(why) => report.warnings.push(why),
    }
    state.remove(id)?;
    Ok(report)
}

/// Detach for doors that must never block pod deletion (CNI DEL, OCI poststop).
///
/// A corrupt checkpoint is cleaned up by podtap's markers in `netns` (or the
/// netns still named in the file), then moved aside as
/// `<id>.json.corrupt-<time>`: kept for inspection, never deleted, and the
/// detach succeeds with a warning.
pub fn detach_for_teardown(
    id: &str,
    state: &StateDir,
    netns: Option<&Path>,
) -> Result<DetachReport> {
    match detach(id, state, false, None) {
        Err(Error::CorruptState { .. }) => {}
        other => return other,
    }
    state.locked(id, LOCK_TIMEOUT, || {
        let path = netns
            .map(Path::to_path_buf)
            .or_else(|| salvage_netns_path(&state.file(id)));
        let mut report = match path {
            Some(path) => force_cleanup(id, &path)?,
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
    })
}

/// Open the recorded netns if it is still the same one (`Ok(Ok(ns))`); say
/// why there is nothing to undo when it is gone or replaced (`Ok(Err(why))`).
/// Any other failure (permission, fd limit, ...) is an error and the
/// checkpoint stays, since podtap's objects may still be there.
pub(crate) fn open_recorded(cp: &Checkpoint) -> Result<std::result::Result<NetNs, String>> {
    let path = Path::new(&cp.netns.path);
    match NetNs::open(path, true) {
        Ok(ns) if ns.identity() == (cp.netns.dev, cp.netns.inode) => Ok(Ok(ns)),
        Ok(ns) => Ok(Err(format!(
            "netns {} is now a different namespace (inode {} != recorded {}); left it untouched",
            cp.netns.path,
            ns.inode(),
            cp.netns.inode
        ))),
        Err(Error::NetnsMissing { .. }) | Err(Error::NotNetns { .. }) => Ok(Err(format!(
            "netns {} is gone; its virtual links went with it",
            cp.netns.path
        ))),
        Err(e) => Err(e),
    }
}

/// Pull `netns.path` out of a checkpoint that no longer parses as a whole.
fn salvage_netns_path(file: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(file).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("netns")?.get("path")?.as_str().map(PathBuf::from)
}

/// Without a checkpoint: remove links marked `podtap:<id>` (or unmarked ones in
/// the id's preferred group), podtap-priority filters that redirect to them, and give
/// bridged pod interfaces back the MAC recorded in their bridge's marker.
fn force_cleanup(id: &str, path: &Path) -> Result<DetachReport> {
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
    crate::kernel::runtime::block_on(async {
        let nl = Netlink::connect(&ns)?;
        let h = &nl.handle;
        let live = links::list(h)
            .await
            .map_err(|e| nl.err("dump links", "", e))?;
        let marker = links::marker(id);
        let group = preferred_group(id);
        let ours: Vec<&LinkState> = live
            .values()
            .filter(|l| links::is_tap_or_bridge(l.kind.as_deref()))
            .filter(|l| {
                // The marker decides. The group alone could be another id's (a
                // colliding id moves to the next free group), so it counts
                // only for an unmarked link: a bridge made just before a crash.
                match l.alias.as_deref() {
                    Some(a) => a.split(' ').next() == Some(marker.as_str()),
                    None => l.group == group,
                }
            })
            .collect();
        let our_idx: Vec<u32> = ours.iter().map(|l| l.ifindex).collect();
        let mut report = DetachReport {
            found: true,
            warnings: Vec::new(),
        };
        for l in live.values().filter(|l| !our_idx.contains(&l.ifindex)) {
            if let Some(ctrl) = l.controller.filter(|c| our_idx.contains(c)) {
                if let Some(mac) = live
                    .get(&ctrl)
                    .and_then(|b| bridge_marker_mac(b.alias.as_deref()?, l.ifindex))
                {
                    bridge::release_pod(h, l.ifindex, &mac)
                        .await
                        .map_err(|e| nl.err("release pod interface", &l.name, e))?;
                }
            }
            for f in tc::filters(h, l.ifindex)
                .await
                .map_err(|e| nl.err("dump tc filters", &l.name, e))?
            {
                if is_podtap_prio(f.prio) && f.redirect_to.is_some_and(|t| our_idx.contains(&t)) {
                    tc::del_filter(h, l.ifindex, f.prio)
                        .await
                        .map_err(|e| nl.err("delete tc filter", &l.name, e))?;
                    report.warnings.push(format!(
                        "removed podtap filter prio {} on {}",
                        f.prio, l.name
                    ));
                }
            }
        }
        for l in ours {
            links::delete(h, l.ifindex)
                .await
                .map_err(|e| nl.err("delete link", &l.name, e))?;
            report.warnings.push(format!(
                "removed {} {}",
                l.kind.as_deref().unwrap_or("link"),
                l.name
            ));
        }
        Ok(report)
    })
}

/// The bridge marker is `podtap:<id> pod=<ifindex> mac=<original MAC>`.
pub fn bridge_marker(id: &str, pod_ifindex: u32, mac: &str) -> String {
    format!("{} pod={pod_ifindex} mac={mac}", links::marker(id))
}

fn bridge_marker_mac(alias: &str, pod_ifindex: u32) -> Option<String> {
    let mut fields = alias.split(' ').skip(1);
    let pod = fields.next()?.strip_prefix("pod=")?.parse::<u32>().ok()?;
    let mac = fields.next()?.strip_prefix("mac=")?;
    (pod == pod_ifindex).then(|| mac.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bridge_marker_round_trips() {
        let m = bridge_marker("s1", 7, "aa:bb:cc:dd:ee:ff");
        assert_eq!(
            bridge_marker_mac(&m, 7).as_deref(),
            Some("aa:bb:cc:dd:ee:ff")
        );
        assert_eq!(bridge_marker_mac(&m, 8), None);
        assert_eq!(bridge_marker_mac("podtap:s1", 7), None);
    }
}
