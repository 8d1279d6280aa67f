//! The operator's subcommands: `doctor`, `show`, `completions`, `man`.
//! Each is routed through one small function here, so the main dispatch stays as it is.

use std::path::PathBuf;

use clap::Subcommand;

use super::{doctor, generated, show};
use crate::error::{exit, Error, Result};
use crate::output::emit_text;

#[derive(Debug, Subcommand)]
// As `Command`'s own variants: only the invoked subcommand's arguments are
// built (without it, every attach and detach built these four as well).
#[command(defer = true)]
pub enum Ops {
    /// Preflight of this node: one line per check (ok / warn / fail, and what to do); exit 0
    /// only when every check the wiring mode needs passes (17 otherwise).
    Doctor(doctor::DoctorArgs),
    /// The wiring of one or every attachment at a glance, like `ip -br`: pod interface -> TAP ->
    /// wiring -> VM NIC, each with its live state (as `check` sees it) and packet counters.
    Show(show::ShowArgs),
    /// Print the completion script for SHELL (bash, zsh, fish) on stdout.
    Completions {
        /// The shell.
        shell: generated::CompletionShell,
    },
    /// Print the man page of podtap, or of one subcommand; --dir writes every page there.
    Man {
        /// The subcommand whose page to print (default: podtap's own).
        subcommand: Option<String>,
        /// Write podtap.1 and one podtap-SUBCOMMAND.1 per subcommand into this directory.
        #[arg(long, value_name = "DIR", conflicts_with = "subcommand")]
        dir: Option<PathBuf>,
    },
}

/// Run one operator subcommand and return its exit code.
pub fn run(op: Ops) -> Result<i32> {
    match op {
        Ops::Doctor(args) => doctor::run(&args),
        Ops::Show(args) => show::run(&args).map(|()| exit::OK),
        Ops::Completions { shell } => {
            let text = generated::completion(shell)?;
            emit_text(&text, None).map(|()| exit::OK)
        }
        Ops::Man { subcommand, dir } => man(subcommand.as_deref(), dir).map(|()| exit::OK),
    }
}

fn man(subcommand: Option<&str>, dir: Option<PathBuf>) -> Result<()> {
    let pages = generated::man_pages()?;
    if let Some(dir) = dir {
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("create man dir", &dir, e))?;
        for (name, text) in &pages {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|e| Error::io("write man page", &path, e))?;
        }
        return Ok(());
    }
    let wanted = match subcommand {
        Some(sub) => format!("podtap-{sub}.1"),
        None => "podtap.1".to_string(),
    };
    let (_, text) = pages
        .into_iter()
        .find(|(name, _)| *name == wanted)
        .ok_or_else(|| {
            Error::Invalid(format!(
                "man: no subcommand {:?} (see podtap --help)",
                subcommand.unwrap_or_default()
            ))
        })?;
    emit_text(&text, None)
}
