//! Shell completions and man pages, generated from the clap grammar
//! (`clap_complete`, `clap_mangen`). The copies committed under `docs/`
//! (`docs/completions/`, `docs/man/`) are kept true by a test that
//! regenerates them and compares byte for byte.

use clap::CommandFactory;

use crate::error::{Error, Result};

/// The shells podtap writes completions for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompletionShell {
    /// bash (bash-completion).
    Bash,
    /// zsh.
    Zsh,
    /// fish.
    Fish,
}

#[cfg(test)]
impl CompletionShell {
    /// The file name under `docs/completions/`.
    pub fn file_name(self) -> &'static str {
        match self {
            CompletionShell::Bash => "podtap.bash",
            CompletionShell::Zsh => "podtap.zsh",
            CompletionShell::Fish => "podtap.fish",
        }
    }
}

/// The full grammar, built, with environment values hidden: help text and
/// generated files must not depend on who runs the generator.
fn grammar() -> clap::Command {
    fn stable(cmd: clap::Command) -> clap::Command {
        let mut cmd = cmd.mut_args(|a| a.hide_env_values(true));
        let subs: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        for sub in subs {
            cmd = cmd.mut_subcommand(sub, stable);
        }
        cmd
    }
    let mut cmd = super::Cli::command();
    // Deferred subcommands get their arguments when built.
    cmd.build();
    stable(cmd)
}

/// The completion script for `shell`.
pub fn completion(shell: CompletionShell) -> Result<String> {
    use clap_complete::Shell;
    let mut cmd = grammar();
    let mut out = Vec::new();
    let generator = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    clap_complete::generate(generator, &mut cmd, "podtap", &mut out);
    text(out)
}

/// Every man page as `(file name, text)`: `podtap.1` and one
/// `podtap-SUBCOMMAND.1` per subcommand, in grammar order.
pub fn man_pages() -> Result<Vec<(String, String)>> {
    let cmd = grammar();
    let mut pages = vec![page(cmd.clone())?];
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        pages.push(page(sub.clone())?);
    }
    Ok(pages)
}

fn page(cmd: clap::Command) -> Result<(String, String)> {
    let man = clap_mangen::Man::new(cmd).source(format!("podtap {}", env!("CARGO_PKG_VERSION")));
    let mut out = Vec::new();
    man.render(&mut out)
        .map_err(|e| Error::io("render man page", man.get_filename(), e))?;
    Ok((man.get_filename(), text(out)?))
}

fn text(bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| Error::Invalid(format!("generated text: {e}")))
}

/// Every generated file, as `(path under docs/, text)`.
#[cfg(test)]
pub fn docs_files() -> Result<Vec<(String, String)>> {
    let mut files = Vec::new();
    for shell in [
        CompletionShell::Bash,
        CompletionShell::Zsh,
        CompletionShell::Fish,
    ] {
        files.push((
            format!("completions/{}", shell.file_name()),
            completion(shell)?,
        ));
    }
    for (name, text) in man_pages()? {
        files.push((format!("man/{name}"), text));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The files under docs/ are what the grammar generates now. To update
    /// them after changing the grammar: `PODTAP_REGENERATE_DOCS=1 cargo test
    /// -p podtap-cli --bin podtap generated`.
    #[test]
    fn committed_completions_and_man_pages_are_current() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
        let regenerate = std::env::var_os("PODTAP_REGENERATE_DOCS").is_some();
        let files = super::docs_files().unwrap();
        for (rel, text) in &files {
            let path = docs.join(rel);
            if regenerate {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, text).unwrap();
            }
            let committed = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("{}: {e} (regenerate: see this test)", path.display()));
            assert!(
                committed == text.as_bytes(),
                "{} differs from what the grammar generates (PODTAP_REGENERATE_DOCS=1 cargo test -p podtap-cli --bin podtap generated)",
                path.display()
            );
        }
        // No stale page of a subcommand that is gone.
        let pages: Vec<String> = std::fs::read_dir(docs.join("man"))
            .unwrap()
            .map(|e| format!("man/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        for page in pages {
            assert!(files.iter().any(|(rel, _)| *rel == page), "stale {page}");
        }
    }

    #[test]
    fn every_subcommand_has_a_page_and_completions_name_them() {
        let pages = super::man_pages().unwrap();
        for name in [
            "podtap.1",
            "podtap-doctor.1",
            "podtap-show.1",
            "podtap-attach.1",
        ] {
            assert!(pages.iter().any(|(n, _)| n == name), "{name}");
        }
        let bash = super::completion(super::CompletionShell::Bash).unwrap();
        assert!(bash.contains("doctor") && bash.contains("--log-format"));
    }
}
