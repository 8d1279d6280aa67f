//! What every door prints: a description as JSON, or text, to a file or stdout.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use podtap::attach::Attached;
use podtap::model::Description;
use podtap::state::{SandboxId, StateDir};

/// Refuse an output path that cannot be written before anything is built:
/// its directory must exist and be a directory, and the path must not be one.
pub fn check_output(path: &Path) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let bad = |why: &str| Error::Invalid(format!("--output {}: {why}", path.display()));
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(bad("its parent is not a directory")),
        Err(_) => return Err(bad("its directory does not exist")),
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Err(bad("is a directory")),
        _ => Ok(()),
    }
}

/// Print what attach returned. If that fails and this call built the
/// attachment, undo it: an attach whose description never reached the
/// caller leaves nothing behind.
pub fn emit_attached(
    attached: &Attached,
    output: Option<&Path>,
    id: &SandboxId,
    state: &StateDir,
) -> Result<()> {
    let printed = emit(&attached.description, output);
    undo_unless_printed(attached, id, state, printed)
}

/// [`emit_attached`] with a writer of the door's own (the OCI hook writes
/// beneath the bundle).
pub fn emit_attached_with(
    attached: &Attached,
    id: &SandboxId,
    state: &StateDir,
    write: impl FnOnce(&str) -> Result<()>,
) -> Result<()> {
    let printed = pretty(&attached.description).and_then(|text| write(&text));
    undo_unless_printed(attached, id, state, printed)
}

/// `printed`, or, when printing failed and this call built the
/// attachment, the failure after the attachment is undone.
fn undo_unless_printed(
    attached: &Attached,
    id: &SandboxId,
    state: &StateDir,
    printed: Result<()>,
) -> Result<()> {
    let Err(e) = printed else {
        return Ok(());
    };
    if !attached.fresh {
        return Err(e);
    }
    let Error::Podtap(e) = e else {
        return Err(e);
    };
    match podtap::detach::detach(id, state, None) {
        Ok(_) => Err(podtap::error::Error::RolledBack(Box::new(e)).into()),
        Err(_) => Err(podtap::error::Error::Several {
            first: Box::new(e),
            more: 1,
        }
        .into()),
    }
}

/// Write the description as pretty JSON to `output` (atomically) or stdout.
pub fn emit(desc: &Description, output: Option<&Path>) -> Result<()> {
    match output {
        Some(_) => emit_text(&pretty(desc)?, output),
        None => print_pretty(desc),
    }
}

/// The description as pretty JSON on stdout, streamed through one buffer:
/// the text of a pod with 100 000 routes is tens of MB, and building it
/// whole first cost a page fault for every 4 KiB of it.
fn print_pretty(desc: &Description) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(STREAM_BUFFER, stdout.lock());
    let failed = |e: std::io::Error| Error::io("write", "stdout", e);
    serde_json::to_writer_pretty(&mut out, desc).map_err(|e| {
        if e.is_io() {
            failed(e.into())
        } else {
            Error::Invalid(format!("serialize: {e}"))
        }
    })?;
    out.write_all(b"\n")
        .and_then(|()| out.flush())
        .map_err(failed)
}

/// The buffer [`print_pretty`] writes through.
const STREAM_BUFFER: usize = 1 << 16;

/// The description as pretty JSON with a final newline.
fn pretty(desc: &Description) -> Result<String> {
    let mut text = serde_json::to_string_pretty(desc)
        .map_err(|e| Error::Invalid(format!("serialize: {e}")))?;
    text.push('\n');
    Ok(text)
}

pub fn emit_text(text: &str, output: Option<&Path>) -> Result<()> {
    match output {
        Some(path) if replaceable(path) => {
            Ok(podtap::state::write_atomic(path, text.as_bytes(), 0o644)?)
        }
        Some(path) => write_through(path, text),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|_| out.flush())
                .map_err(|e| Error::io("write", "stdout", e))
        }
    }
}

/// Whether `path` may be replaced by a new file (a temp file renamed over
/// it): it is missing or a regular file. A device, FIFO or symlink is
/// written through instead: renaming over `/dev/null` or `/dev/stdout`
/// would put a regular file in its place for the whole node.
fn replaceable(path: &Path) -> bool {
    std::fs::symlink_metadata(path).map_or(true, |m| m.file_type().is_file())
}

/// Write `text` into the existing `path` (a device, FIFO or symlink), never
/// creating a file.
fn write_through(path: &Path, text: &str) -> Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| Error::io("write", path, e))
}
