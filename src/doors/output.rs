//! What every door prints: a description as JSON, or text, to a file or stdout.

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use crate::model::Description;

/// Write the description as pretty JSON to `output` (atomically) or stdout.
pub fn emit(desc: &Description, output: Option<&Path>) -> Result<()> {
    let mut text = serde_json::to_string_pretty(desc)
        .map_err(|e| Error::Invalid(format!("serialize: {e}")))?;
    text.push('\n');
    emit_text(&text, output)
}

pub fn emit_text(text: &str, output: Option<&Path>) -> Result<()> {
    match output {
        Some(path) => crate::state::write_atomic(path, text.as_bytes(), 0o644),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|_| out.flush())
                .map_err(|e| Error::io("write", "stdout", e))
        }
    }
}
