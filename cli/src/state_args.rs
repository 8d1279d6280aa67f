//! The `--state-dir` option every door that keeps checkpoints shares.

use std::path::PathBuf;

use podtap::state::StateDir;

/// The environment variable `--state-dir` defaults to.
pub const STATE_DIR_ENV: &str = "PODTAP_STATE_DIR";

// Where checkpoints live. (A plain comment: a doc comment here would become
// the `about` of every subcommand that flattens these arguments.)
#[derive(Debug, Clone, clap::Args)]
pub struct StateArgs {
    /// State directory (tmpfs, like the netns it describes).
    #[arg(long, env = STATE_DIR_ENV, default_value = podtap::state::DEFAULT_STATE_DIR)]
    pub state_dir: PathBuf,
}

impl StateArgs {
    /// The state directory these arguments name.
    pub fn dir(&self) -> StateDir {
        StateDir::new(&self.state_dir)
    }
}
