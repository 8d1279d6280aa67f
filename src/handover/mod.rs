//! The fd handover: TAP (and macvtap) queue fds and vhost-net fds, opened
//! inside the pod netns they were proven to live in, passed to a VMM by exec
//! or by SCM_RIGHTS.
//!
//! A floor below the doors and `watch`, used by both (`podtap exec` and
//! `podtap demo` hand fds over by exec, `podtap watch` by SCM_RIGHTS to a
//! running VMM). It imports only `kernel`, `state`, `model`, `render` (the
//! pure fd argument layout) and `error`.
//!
//! | step | file |
//! |---|---|
//! | open and prepare all of a sandbox's fds, with their arguments | `open.rs` |
//! | prove the netns is the recorded one (dev, inode, cookie) | `recorded_netns.rs` |
//! | open every queue of every TAP/macvtap, vhost-net fds | `queues.rs` |
//! | the VMM's fd arguments (`-netdev tap,fds=…`, `--net fd=[…]`) | `args.rs` |
//! | keep exactly those fds across exec, close_range the rest, drop root | `confine.rs` |
//! | exec the VMM (or a command in the pod netns) | `exec.rs` |
//! | send fds over a VMM socket, to a proven peer only | `scm.rs`, `peer.rs` |
//!
//! Inside, the arrows point one way: `exec` → `open`, `confine`, `proof`;
//! `open` → `args`, `proof`, `queues`; `scm` → `peer`.

mod args;
mod confine;
mod exec;
mod open;
mod peer;
mod queues;
mod recorded_netns;
mod scm;

pub(crate) use args::Layout;
pub(crate) use confine::RunAs;
pub(crate) use exec::{exec_in_netns, exec_vmm};
pub(crate) use open::{open, Handover};
pub(crate) use queues::open_tap_fds;
pub(crate) use recorded_netns::{open_recorded_netns, prove};
pub(crate) use scm::send_with_fds;
