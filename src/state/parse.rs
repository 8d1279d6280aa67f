//! A checkpoint file's text, checked and parsed: a corrupt file is an
//! error that names it, and every version is read as the current one.

use std::path::Path;

use serde::de::DeserializeOwned;

use super::checkpoint::{Checkpoint, Stage, VERSION, VERSION_1, VERSION_2};
use super::entry::{self, EntryError};
use crate::error::{Error, Result};
use crate::id::SandboxId;

/// `cp` as the current version: a description without its routes and rules
/// (a version-1 file holds them: their digest is the one a later file
/// records). A version-2 file is a version-3 one without `tc_redirect`
/// (versions 1 and 2 made u32 + mirred only; teardown goes by the filters
/// a dump shows).
pub(super) fn current(mut cp: Checkpoint) -> Checkpoint {
    if let Stage::Complete(Some(desc)) = &mut cp.stage {
        if cp.tables_digest.is_none() {
            cp.tables_digest = Some(desc.tables_digest());
        }
        // The neighbours stay: a version-2 file records them too.
        desc.routes.clear();
        desc.rules.clear();
    }
    cp.version = VERSION;
    cp
}

/// Why an entry of `n` bytes is refused.
pub(crate) fn too_large(n: u64) -> String {
    format!(
        "{n} bytes, over the {} MiB a state file may hold",
        entry::MAX_ENTRY >> 20
    )
}

pub(super) fn parse<D: DeserializeOwned>(
    id: &SandboxId,
    path: &Path,
    read: std::result::Result<String, EntryError>,
) -> Result<Option<Checkpoint<D>>> {
    let corrupt = |why: String| Error::CorruptState {
        path: path.into(),
        id: id.to_string(),
        why,
    };
    let text = match read {
        Ok(t) => t,
        Err(EntryError::Missing) => return Ok(None),
        Err(EntryError::NotRegular(what)) => {
            return Err(corrupt(format!("{what}, not a regular file")))
        }
        Err(EntryError::Untrusted(why)) => return Err(entry::untrusted_error(path, why)),
        Err(EntryError::TooLarge(n)) => return Err(corrupt(too_large(n))),
        Err(EntryError::Io(e)) => return Err(Error::io("read checkpoint", path, e)),
    };
    let cp: Checkpoint<D> = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
    if ![VERSION, VERSION_2, VERSION_1].contains(&cp.version) {
        return Err(corrupt(format!("unknown version {}", cp.version)));
    }
    if cp.id != *id {
        return Err(corrupt(format!("it records id {:?}", cp.id.as_str())));
    }
    Ok(Some(cp))
}
