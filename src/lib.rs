//! podtap: bridge a prepared pod network namespace to VM NICs.
//!
//! A CNI plugin prepares a pod netns for a normal container (veths,
//! addresses, routes). A VM cannot use a veth: podtap scans the netns,
//! creates one TAP per pod interface inside it, wires each pair (tc redirect
//! or a Linux bridge), records a checkpoint, and returns a [`model::Description`]
//! that a VMM launcher boots the VM from.
//!
//! The flow, and the public modules along it:
//!
//! | step | module | |
//! |---|---|---|
//! | read the netns | [`scan`] | read-only |
//! | build TAPs and wiring, record them | [`attach`] | with [`state`] |
//! | VMM and guest arguments | [`render`] | pure |
//! | verify | [`check`] | read-only |
//! | undo exactly | [`detach`] | never blocks on a gone netns |
//! | follow late interfaces, hotplug | [`watch`] | until SIGTERM or detach |
//!
//! [`model`] holds the description types (the JSON contract) and [`error`]
//! the one error type with its documented exit codes.
//!
//! ```no_run
//! # fn main() -> podtap::error::Result<()> {
//! use std::path::Path;
//! use podtap::{attach::AttachOptions, render::Format, state::{SandboxId, StateDir}};
//!
//! let state = StateDir::new("/run/podtap");
//! let id: SandboxId = "pod-1234".parse()?;
//! let desc = podtap::attach::attach(Path::new("/run/netns/pod"), &id, &AttachOptions::default(), &state)?;
//! let qemu_args = podtap::render::render(Format::Qemu, &desc)?;
//! println!("{qemu_args}");
//! podtap::detach::detach(&id, &state, None)?;
//! # Ok(())
//! # }
//! ```
//!
//! Every function that touches the kernel blocks the calling thread: it
//! talks to the kernel over blocking rtnetlink sockets, each wait bounded,
//! and enters a netns only on threads of its own. It starts no async
//! runtime, so it may be called from anywhere, async tasks included; call
//! it through `spawn_blocking` to keep a runtime's workers free meanwhile.
//!
//! The library has no process-wide effects: the program around it (the
//! `cli` feature, on by default) parses arguments, sets up logging and
//! chooses exit codes. Depend on podtap with `default-features = false`
//! to leave that out.
#![deny(missing_docs)]
// Without the `cli` feature the doors are not built, and the crate-private
// helpers only they call (the VMM exec of `podtap exec`, `show`'s live
// inspection, the option parsers, the installer's atomic write) go unused.
#![cfg_attr(not(feature = "cli"), allow(dead_code, unused_imports))]

pub mod attach;
pub mod check;
pub mod detach;
pub mod error;
pub mod model;
pub mod render;
pub mod scan;
pub mod state;
pub mod watch;

mod apply;
mod describe;
#[cfg(feature = "cli")]
mod doors;
mod handover;
mod id;
mod kernel;
mod plan;
mod teardown;

pub use kernel::mac::MacAddr;

/// Run the `podtap` program with the process's arguments and environment
/// (the CLI, or the CNI plugin when `CNI_COMMAND` is set and there are no
/// arguments) and return its exit code. The binary is only this call; it
/// exists with the `cli` feature (the default), which a library user turns
/// off.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub fn main() -> i32 {
    doors::run()
}
