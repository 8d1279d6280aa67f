//! One attach and one detach through the library, each timed in-process:
//! the "library call" contender of `benches/run.sh` (no process start, no
//! argument parsing, no JSON printing).
//!
//! ```sh
//! cargo run --release --example bench_lib -- STATE_DIR NETNS_PATH ID MODE
//! ```
//!
//! Prints one JSON line: `{"attach_ms":…,"detach_ms":…,"taps":…}`.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use podtap::attach::AttachOptions;
use podtap::state::{SandboxId, StateDir};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [state, netns, id, mode] = args.as_slice() else {
        eprintln!("usage: bench_lib STATE_DIR NETNS_PATH ID MODE");
        return ExitCode::from(2);
    };
    match run(state, netns, id, mode) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_lib: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(state: &str, netns: &str, id: &str, mode: &str) -> podtap::error::Result<String> {
    let state = StateDir::new(state);
    let id: SandboxId = id.parse()?;
    let opts = AttachOptions {
        mode: mode.parse()?,
        ..AttachOptions::default()
    };
    let t = Instant::now();
    let desc = podtap::attach::attach(Path::new(netns), &id, &opts, &state)?.description;
    let attach_ms = t.elapsed().as_secs_f64() * 1e3;
    let taps = desc.interfaces.iter().filter(|i| i.tap.is_some()).count();
    let t = Instant::now();
    podtap::detach::detach(&id, &state, None)?;
    let detach_ms = t.elapsed().as_secs_f64() * 1e3;
    Ok(format!(
        "{{\"attach_ms\":{attach_ms:.3},\"detach_ms\":{detach_ms:.3},\"taps\":{taps}}}"
    ))
}
