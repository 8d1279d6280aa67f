//! Shared fixtures for podtap's root integration tests (`tests/*.rs`), one
//! module per thing they build: network namespaces and snapshots of them,
//! pods, state dirs, CNI chains, VMs, and the processes that run it all.
//!
//! Every object lives in a netns the test creates (named with pid and a
//! counter) and is removed on drop. Nothing touches the root netns.
//!
//! A library of its own (a dev-dependency), so each test binary uses what it
//! needs and nothing warns as unused. The podtap binary is known only to the
//! integration tests themselves (`env!("CARGO_BIN_EXE_podtap")`): the helpers
//! that run it take its path as their first argument, `bin`.

pub mod churn;
pub mod cni;
pub mod dirs;
pub mod listen;
pub mod netns;
pub mod pod;
pub mod podtap;
pub mod run;
pub mod scan;
pub mod serve;
pub mod shapes;
pub mod snapshot;
pub mod standin;
pub mod vm;
pub mod watch;
pub mod wiring;

pub use cni::{cni_add, cni_plugin, conflist, container_id, Chain, Run, PLUGINS};
pub use dirs::{checkpoint_path, StateDir, TempDir};
pub use netns::{in_netns, settle, settle_taps, taps, wait_for_deferred_teardown, Netns, Sleeper};
pub use pod::Pod;
pub use podtap::{
    attach, attach_cmd, attach_json, check, detach, iface, json_ok, oci_hook, podtap, podtap_cmd,
    podtap_ok, podtap_state,
};
pub use run::{
    exit_code, net_tools_or_skip, poll, root_or_skip, run_with_stdin, sh, sh_ok, stderr, stdout,
    tool_or_skip, unique, wait_for,
};
pub use snapshot::{full_snapshot, settled_snapshot, snapshot, wait_for_drained_bridges};
pub use watch::Watch;

/// The repository (the podtap package's own directory).
pub fn repo() -> std::path::PathBuf {
    let testkit = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    testkit
        .ancestors()
        .nth(2)
        .expect("tests/support lies two levels below the repository")
        .to_path_buf()
}
