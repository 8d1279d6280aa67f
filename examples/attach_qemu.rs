//! Attach a pod netns, print the QEMU arguments for its TAPs, and detach.
//!
//! ```sh
//! cargo run --example attach_qemu -- /run/netns/POD
//! ```
//!
//! Needs root (CAP_NET_ADMIN in the pod netns). The state dir is a private
//! temporary directory, so this never touches `/run/podtap`.

use std::path::PathBuf;
use std::process::ExitCode;

use podtap::attach::AttachOptions;
use podtap::render::Format;
use podtap::state::{SandboxId, StateDir};

fn main() -> ExitCode {
    let Some(netns) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: attach_qemu NETNS_PATH");
        return ExitCode::from(2);
    };
    match run(&netns) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("attach_qemu: {e}");
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1))
        }
    }
}

fn run(netns: &std::path::Path) -> podtap::error::Result<()> {
    let state =
        StateDir::new(std::env::temp_dir().join(format!("podtap-example-{}", std::process::id())));
    let id: SandboxId = format!("example-{}", std::process::id()).parse()?;

    let desc = podtap::attach::attach(netns, &id, &AttachOptions::default(), &state)?;
    let rendered = podtap::render::render(Format::Qemu, &desc);
    let detached = podtap::detach::detach(&id, &state, Some(netns));
    let _ = std::fs::remove_dir_all(state.path());

    println!("{}", rendered?);
    for warning in detached?.warnings {
        eprintln!("attach_qemu: {warning}");
    }
    Ok(())
}
