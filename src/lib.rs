//! podtap: bridge a prepared pod network namespace to VM NICs.
//!
//! A CNI plugin prepares a pod netns for a normal container (veths,
//! addresses, routes). A VM cannot use a veth: podtap scans the netns,
//! creates one TAP per pod interface inside it, wires each pair (tc redirect,
//! a Linux bridge or a macvtap), records a checkpoint, and returns a
//! [`model::Description`] that a VMM launcher boots the VM from.
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
//! | hand the TAP queue fds to a VMM, from any netns | [`handover`] | proves each TAP |
//! | follow late interfaces, hotplug | [`watch`] | until its caller stops it or detach |
//!
//! [`model`] holds the description types (the JSON contract), [`error`]
//! the errors a caller can match on, [`probe`] whether the node can wire
//! pods at all, and [`netns`] an opened, proven network namespace.
//!
//! ```no_run
//! # fn main() -> podtap::error::Result<()> {
//! use std::path::Path;
//! use podtap::{attach::AttachOptions, render::Format, state::{SandboxId, StateDir}};
//!
//! let state = StateDir::new("/run/podtap");
//! let id: SandboxId = "pod-1234".parse()?;
//! let attached = podtap::attach::attach(Path::new("/run/netns/pod"), &id, &AttachOptions::default(), &state)?;
//! let desc = attached.description;
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
//! The library has no process-wide effects: no signal disposition, no
//! logger (it emits `tracing` events for the caller's subscriber), no
//! global setting. The `podtap` program (the `podtap-cli` crate of this
//! workspace) is its first user: it parses arguments, sets up logging,
//! maps errors to exit codes, and calls only what is public here.
#![deny(missing_docs)]

pub mod attach;
pub mod check;
pub mod detach;
pub mod error;
pub mod model;
pub mod probe;
pub mod render;
pub mod scan;
pub mod serve;
pub mod state;
pub mod stop;
pub mod sweep;
pub mod watch;

mod apply;
mod describe;
pub mod handover;
mod id;
mod kernel;
pub mod netns;
mod plan;
mod teardown;

pub use kernel::mac::MacAddr;
