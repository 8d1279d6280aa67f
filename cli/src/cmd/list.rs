//! `podtap list`: every checkpoint, and every CNI registry entry with or without one.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::output::emit_text;
use podtap::state::{Checkpoint, SandboxId, StateDir};
use podtap::state::{Registry, RegistryEntry};

/// One line of the listing.
#[derive(Debug, Serialize)]
struct Row {
    id: SandboxId,
    /// "applying", "complete", "corrupt", or "orphan" (a CNI registry entry
    /// whose checkpoint is gone: GC or DEL will drop it).
    phase: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    netns: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inode: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
    taps: Vec<String>,
    /// The most queues any of its TAPs (or macvtaps) has: a VMM's vCPU count for multiqueue.
    #[serde(skip_serializing_if = "Option::is_none")]
    queues: Option<u32>,
    /// The CNI attachment that made it, when it came through the CNI door.
    #[serde(skip_serializing_if = "Option::is_none")]
    cni: Option<RegistryEntry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

pub fn list(state: &StateDir, json: bool) -> Result<()> {
    let registry = Registry::new(state.path());
    let registered: BTreeSet<SandboxId> = registry.ids()?.into_iter().collect();
    let ids = state.ids()?;
    let cni = |id: &SandboxId| registered.contains(id).then(|| registry.get(id)).flatten();
    // Each checkpoint read once, through one fd of the state dir, and
    // dropped once its row is made.
    let mut rows: Vec<Row> = ids
        .iter()
        .zip(state.load_each(&ids)?)
        .map(|(id, cp)| row(id.clone(), cp, cni(id)))
        .collect();
    // CNI registry entries without a checkpoint: orphans.
    let listed: BTreeSet<&SandboxId> = ids.iter().collect();
    for id in registered.iter().filter(|id| !listed.contains(id)) {
        rows.push(row(id.clone(), Ok(None), cni(id)));
    }
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    if json {
        let text =
            serde_json::to_string_pretty(&rows).map_err(|e| Error::Invalid(e.to_string()))?;
        return emit_text(&(text + "\n"), None);
    }
    let mut out = String::from("ID\tPHASE\tMODE\tNETNS\tTAPS\n");
    for r in rows {
        let detail = r.error.clone().unwrap_or_else(|| r.taps.join(","));
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\n",
            r.id,
            r.phase,
            r.mode.as_deref().unwrap_or("-"),
            r.netns
                .as_deref()
                .or(r.cni.as_ref().and_then(|c| c.netns.as_deref()))
                .unwrap_or("-"),
            detail
        ));
    }
    emit_text(&out, None)
}

fn row(
    id: SandboxId,
    cp: podtap::error::Result<Option<Checkpoint>>,
    cni: Option<RegistryEntry>,
) -> Row {
    let mut row = Row {
        id,
        phase: String::new(),
        netns: None,
        inode: None,
        mode: None,
        taps: Vec::new(),
        queues: None,
        cni,
        error: None,
    };
    match cp {
        Ok(Some(cp)) => {
            row.phase = serde_plain(&cp.phase());
            row.netns = Some(cp.netns().path.clone());
            row.inode = Some(cp.netns().inode);
            row.mode = Some(serde_plain(&cp.mode()));
            row.queues = cp.taps().map(|(_, queues)| queues).max();
            row.taps = cp.taps().map(|(name, _)| name.to_string()).collect();
        }
        Ok(None) => row.phase = "orphan".into(),
        Err(e) => {
            row.phase = "corrupt".into();
            row.error = Some(e.to_string());
        }
    }
    row
}

/// A unit enum's serde name ("complete", "tc").
fn serde_plain(v: &impl Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
