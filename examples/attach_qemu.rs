//! Boot a VM on a pod's network from the host's netns, as a runtime whose
//! VMM runs outside the pod netns would (Kuasar, a Cloud Hypervisor or
//! QEMU launcher): attach with two queues per TAP, open every queue fd
//! through the library, start QEMU in this netns with `-netdev tap,fds=…`,
//! and detach once QEMU exits.
//!
//! ```sh
//! cargo run --example attach_qemu -- NETNS KERNEL INITRD
//! ```
//!
//! `GUEST_APPEND` adds to the guest kernel's command line (after what
//! `podtap render guest-args` gives it: its addresses, routes and
//! neighbours). Needs root and `qemu-system-x86_64`; the state dir is a
//! private temporary directory, so this never touches `/run/podtap`.

use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use podtap::attach::AttachOptions;
use podtap::handover::{self, HandoverOptions};
use podtap::render::Format;
use podtap::state::{SandboxId, StateDir};

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [netns, kernel, initrd] = args.as_slice() else {
        eprintln!("usage: attach_qemu NETNS KERNEL INITRD");
        return ExitCode::from(2);
    };
    let state =
        StateDir::new(std::env::temp_dir().join(format!("podtap-example-{}", std::process::id())));
    let outcome = SandboxId::new(format!("example-{}", std::process::id()))
        .map_err(|e| e.to_string())
        .and_then(|id| {
            let booted = boot(netns, (kernel, initrd), &id, &state);
            let detached = podtap::detach::detach(&id, &state, Some(netns));
            let _ = std::fs::remove_dir_all(state.path());
            booted.and(detached.map(drop).map_err(|e| e.to_string()))
        });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("attach_qemu: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Attach `netns`, hand its TAP fds to QEMU and wait for QEMU to exit.
fn boot(
    netns: &Path,
    (kernel, initrd): (&Path, &Path),
    id: &SandboxId,
    state: &StateDir,
) -> Result<(), String> {
    let opts = AttachOptions {
        queues: 2,
        ..AttachOptions::default()
    };
    podtap::attach::attach(netns, id, &opts, state).map_err(|e| e.to_string())?;
    // Opened from this thread, in the host's netns: the library enters the
    // pod netns on a thread of its own and proves each TAP is the recorded one.
    let fds = handover::open(id, state, &HandoverOptions::default()).map_err(|e| e.to_string())?;
    for tap in &fds.taps {
        eprintln!(
            "attach_qemu: {} -> {}: {} queue fd(s), guest MAC {}",
            tap.interface,
            tap.tap,
            tap.queues.len(),
            tap.guest_mac.as_deref().unwrap_or("-")
        );
    }
    let netdevs = fds.qemu_args().map_err(|e| e.to_string())?;
    let guest =
        podtap::render::render(Format::GuestArgs, &fds.description).map_err(|e| e.to_string())?;
    let append = format!(
        "console=ttyS0 quiet panic=-1 {} {}",
        guest.trim(),
        std::env::var("GUEST_APPEND").unwrap_or_default()
    );
    let inherited: Vec<i32> = fds.fds().map(|fd| fd.as_raw_fd()).collect();
    let mut qemu = Command::new("qemu-system-x86_64");
    qemu.args([
        "-accel",
        "tcg",
        "-m",
        "256",
        "-smp",
        "2",
        "-nographic",
        "-no-reboot",
    ])
    .arg("-kernel")
    .arg(kernel)
    .arg("-initrd")
    .arg(initrd)
    .args(["-append", &append])
    .args(&netdevs);
    // SAFETY: between fork and exec only fcntl(2) runs, which is
    // async-signal-safe and touches no memory; the fds stay open in this
    // process (owned by `fds`) until QEMU has its own copies.
    unsafe {
        qemu.pre_exec(move || {
            for &fd in &inherited {
                nix::fcntl::fcntl(
                    std::os::fd::BorrowedFd::borrow_raw(fd),
                    nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
                )?;
            }
            Ok(())
        });
    }
    let status = qemu
        .status()
        .map_err(|e| format!("run qemu-system-x86_64: {e}"))?;
    drop(fds);
    if status.success() {
        Ok(())
    } else {
        Err(format!("qemu-system-x86_64 exited with {status}"))
    }
}
