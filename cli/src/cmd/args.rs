//! The command-line grammar (clap derive). `--help` text lives here.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::state_args::StateArgs;

#[derive(Debug, Parser)]
#[command(
    name = "podtap",
    version,
    about = "Bridge a prepared pod network namespace to VM NICs",
    long_about = "podtap scans a pod network namespace, creates one TAP per pod interface, wires each \
pair with tc redirect or a Linux bridge, and prints a JSON description a VMM launcher boots from.\n\n\
Exit codes: 0 ok, 1 failure, 2 usage, 3 netns missing, 4 not a netns, 5 host netns refused, \
6 permission denied (or a pod's ask the pod policy refuses), 7 invalid sandbox id, 8 corrupt checkpoint, 9 busy, 10 kernel operation failed, \
11 id attached elsewhere, 12 check failed, 13 invalid input, 14 no such checkpoint, 15 render refused, 16 untrusted state, 17 node not ready (doctor).\n\n\
When CNI_COMMAND is set and no arguments are given, podtap runs as a chained CNI plugin \
instead; a command line with a subcommand always runs that subcommand (CNI_COMMAND is then ignored).\n\n\
PODTAP_TABLE_LIMIT_MIB (a whole number of MiB from 1 to 4096; default 16) is the most podtap reads of \
one dump of a pod's routes, rules, neighbours or addresses; every command but a detach (detach, \
oci-hook detach) refuses a bad value."
)]
pub struct Cli {
    /// Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level).
    #[arg(long, global = true, value_enum, env = super::logging::FORMAT_ENV, default_value = "text")]
    pub log_format: super::logging::LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
// Build only the invoked subcommand's arguments: a podtap process parses one
// command line, and building all of them cost a fifth of a millisecond cold.
#[command(defer = true)]
pub enum Command {
    /// Print the JSON network description of a netns (read-only).
    Scan {
        /// The netns: a pinned file (/var/run/netns/NAME) or /proc/PID/ns/net.
        #[arg(long)]
        netns: PathBuf,
        /// Allow scanning the host's own netns.
        #[arg(long)]
        allow_host_netns: bool,
        /// Write the JSON here instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Create one TAP per pod interface inside the netns, wire it, record a checkpoint, print the description.
    Attach(AttachArgs),
    /// Undo exactly what attach did. Succeeds for unknown ids and for gone or reused netns.
    Detach(DetachArgs),
    /// Exit 0 only if every object of the attachment exists and is wired as recorded.
    Check {
        #[arg(long)]
        id: String,
        #[command(flatten)]
        state: StateArgs,
    },
    /// List the checkpoints in the state dir, and CNI registry entries (orphans too).
    List {
        #[command(flatten)]
        state: StateArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Render a description for a VMM or guest: qemu, cloud-hypervisor, cloud-hypervisor-api,
    /// firecracker, libvirt, cloud-init, kernel-cmdline, guest-args, kata-agent.
    Render(RenderArgs),
    /// Run a VMM with the TAP queue fds of sandbox ID appended to its arguments (fd handover),
    /// or run a command inside the pod netns (--enter-netns). It inherits stdio and those fds
    /// only.
    Exec(ExecArgs),
    /// Follow sandbox ID's netns: attach interfaces that appear later, undo those that leave,
    /// hotplug them into the running VM, and print one JSON event per line. Ends on
    /// SIGTERM/SIGINT or when the sandbox is detached (exit 0), or its pod netns is deleted (exit 3).
    Watch(WatchArgs),
    /// Answer the DHCPv4, DHCPv6 and router solicitations of every served NIC's guest, of
    /// every attachment in the state dir, from attach until detach (the node daemon); print
    /// one JSON event per line. Ends on SIGTERM/SIGINT (exit 0).
    Serve {
        #[command(flatten)]
        state: StateArgs,
    },
    /// OCI runtime hook: reads the container state JSON on stdin.
    OciHook {
        /// attach (createRuntime) or detach (poststop).
        #[arg(value_parser = ["attach", "detach"])]
        action: String,
        #[command(flatten)]
        args: crate::oci_hook::OciHookArgs,
    },
    /// Install podtap on a node: copy this binary into the CNI bin dir and chain podtap into
    /// the runtime's network configuration (idempotent); --uninstall takes both out again.
    CniInstall(CniInstallArgs),
    /// Build a throwaway pod netns, run podtap on it, print the result, and remove everything.
    Demo {
        /// Keep the demo namespaces and print how to remove them (for poking around).
        #[arg(long)]
        keep: bool,
        /// Do not boot the test guest, even where QEMU and the guest are at hand (by default
        /// the demo boots it on the TAP, the guest configures itself from podtap's DHCP and
        /// router advertisements, and it and the peer ping each other).
        #[arg(long)]
        no_boot: bool,
        /// Accepted for older scripts: booting is the default now.
        #[arg(long, hide = true, conflicts_with = "no_boot")]
        boot: bool,
    },
    #[command(flatten)]
    Ops(super::ops::Ops),
}

// `podtap attach`'s arguments. (A plain comment: a doc comment would replace
// the subcommand's about.)
#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The pod netns: a pinned file (/var/run/netns/NAME) or /proc/PID/ns/net.
    #[arg(long)]
    pub netns: PathBuf,
    /// Sandbox id: the checkpoint's key (letters, digits, -_.:@+=; at most 128 bytes).
    #[arg(long)]
    pub id: String,
    /// Wiring between each pod interface and its TAP.
    #[arg(long, default_value = MODES[0], value_parser = MODES)]
    pub mode: String,
    /// Queues per TAP (1-256); more than 1 makes a multi-queue TAP.
    #[arg(long, default_value_t = DEFAULT_QUEUES)]
    pub queues: u32,
    /// Create TAPs without IFF_VNET_HDR.
    #[arg(long)]
    pub no_vnet_hdr: bool,
    /// Accepted and ignored: tc mode's one redirect filter is u32 + mirred.
    /// An earlier release took `u32` here (and in `PODTAP_TC_REDIRECT`).
    #[arg(long, hide = true)]
    pub tc_redirect: Option<String>,
    /// Let UID[:GID] open the TAPs without CAP_NET_ADMIN (for an unprivileged or jailed VMM).
    #[arg(long, value_name = "UID[:GID]")]
    pub tap_owner: Option<String>,
    /// Answer every NIC's guest's DHCPv4, DHCPv6 and router solicitations (podtap serve or
    /// watch --serve does), where the NIC can be served: not macvtap, not without an address.
    #[arg(long)]
    pub serve: bool,
    /// One interface's own choices: IFNAME:KEY=VALUE[,KEY=VALUE...] with keys tap (the TAP's
    /// name), mac (the guest NIC's MAC), queues, owner (UID[:GID]) and serve (yes/no); repeat
    /// for more interfaces.
    #[arg(long = "nic", value_name = "IFNAME:KEY=VALUE,...")]
    pub nics: Vec<String>,
    /// Only these pod interfaces (comma-separated); default: every eligible one.
    #[arg(long, value_delimiter = ',')]
    pub interfaces: Option<Vec<String>>,
    /// Record this resolv.conf (nameserver, domain, search, options) as the guest's DNS.
    #[arg(long, value_name = "FILE")]
    pub dns_from: Option<PathBuf>,
    #[command(flatten)]
    pub state: StateArgs,
    /// Write the JSON here instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

// `podtap detach`'s arguments. (A plain comment: a doc comment would replace
// the subcommand's about.)
#[derive(Debug, Args)]
pub struct DetachArgs {
    #[arg(long)]
    pub id: String,
    #[command(flatten)]
    pub state: StateArgs,
    /// For a corrupt checkpoint: clean up by podtap's own markers (TAP/bridge ifalias, link group).
    #[arg(long)]
    pub force: bool,
    /// Where the netns is now, when the recorded path has died while the netns lives on
    /// (used only if it is the recorded netns, by identity); with --force, the netns to
    /// clean when the checkpoint no longer names it.
    #[arg(long)]
    pub netns: Option<PathBuf>,
}

// `podtap render`'s arguments. (A plain comment: a doc comment would replace
// the subcommand's about.)
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// Output format.
    pub format: podtap::render::Format,
    /// Render the description recorded for this sandbox id. Guest formats (cloud-init, guest-args,
    /// kernel-cmdline, kata-agent) read the routes, neighbours and rules live from the recorded
    /// netns, which must still exist (exit 3 if gone, 6 if not permitted, 12 if replaced).
    #[arg(
        long,
        conflicts_with = "description",
        required_unless_present = "description"
    )]
    pub id: Option<String>,
    /// Render the description in this JSON file.
    #[arg(long)]
    pub description: Option<PathBuf>,
    #[command(flatten)]
    pub state: StateArgs,
}

// `podtap exec`'s arguments. (A plain comment: a doc comment would replace
// the subcommand's about.)
#[derive(Debug, Args)]
pub struct ExecArgs {
    #[arg(long)]
    pub id: String,
    /// Append fd arguments for this VMM: qemu (fds=/vhostfds=) or cloud-hypervisor (--net fd=[..]).
    #[arg(
        long,
        value_enum,
        conflicts_with = "enter_netns",
        required_unless_present = "enter_netns"
    )]
    pub vmm: Option<crate::exec::Vmm>,
    /// Also open one /dev/vhost-net fd per queue (QEMU).
    #[arg(long)]
    pub vhost: bool,
    /// Run the command inside the pod netns instead (VMMs that open TAPs by name).
    #[arg(long)]
    pub enter_netns: bool,
    /// Run the command as UID[:GID] (GID defaults to UID) with no capabilities and
    /// no_new_privs, after the TAPs are opened (it keeps their fds).
    #[arg(long, value_name = "UID[:GID]")]
    pub user: Option<String>,
    #[command(flatten)]
    pub state: StateArgs,
    /// The VMM (or command) and its arguments, after `--`.
    #[arg(last = true, required = true)]
    pub argv: Vec<String>,
}

// `podtap watch`'s arguments. (A plain comment: a doc comment would replace
// the subcommand's about.)
#[derive(Debug, Args)]
pub struct WatchArgs {
    #[arg(long)]
    pub id: String,
    /// Hotplug into the QEMU behind this QMP socket (fds over SCM_RIGHTS).
    #[arg(long, conflicts_with = "cloud_hypervisor_api")]
    pub qmp: Option<PathBuf>,
    /// Hotplug into the Cloud Hypervisor behind this API socket (vm.add-net with fds).
    #[arg(long)]
    pub cloud_hypervisor_api: Option<PathBuf>,
    /// Send TAP fds to a VMM socket whose peer runs as this uid (besides root, always
    /// allowed); any other peer gets no fds (SO_PEERCRED).
    #[arg(long, value_name = "UID")]
    pub vmm_uid: Option<u32>,
    /// Also answer the served NICs' guests (DHCP, router solicitations), those it hotplugs
    /// too: for a node without podtap serve.
    #[arg(long)]
    pub serve: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

// `podtap cni-install`'s arguments. (A plain comment: a doc comment would replace
// the subcommand's about.)
#[derive(Debug, Args)]
pub struct CniInstallArgs {
    /// The CNI configuration dir the runtime reads.
    #[arg(long, default_value = "/etc/cni/net.d")]
    pub conf_dir: PathBuf,
    /// The CNI plugin dir the runtime runs plugins from.
    #[arg(long, default_value = "/opt/cni/bin")]
    pub bin_dir: PathBuf,
    /// Wiring for pods on this node (an io.podtap.mode annotation may change it only
    /// where a podPolicy in the conflist allows: docs/integration.md).
    #[arg(long, default_value = MODES[0], value_parser = MODES)]
    pub mode: String,
    /// The state dir written into podtap's plugin entry.
    #[arg(long, default_value = podtap::state::DEFAULT_STATE_DIR)]
    pub plugin_state_dir: String,
    /// Serve the pods' guests their configuration ("serve": true in podtap's entry; the
    /// DaemonSet's podtap serve answers), unless the network brings its own DHCP (a dhcp
    /// IPAM, a macvlan/ipvlan/host-device without IPAM).
    #[arg(long)]
    pub serve: bool,
    /// What pods may ask for by annotation, as podtap's podPolicy (JSON, e.g.
    /// '{"modes":["bridge"],"maxQueues":2}'); default: nothing beyond --mode.
    #[arg(long, value_name = "JSON")]
    pub pod_policy: Option<String>,
    /// Take podtap off the node: restore the configuration byte for byte, remove the binary,
    /// and sweep the state dir. The one way podtap leaves a node (a stopped --wait does not).
    #[arg(long)]
    pub uninstall: bool,
    /// After installing, keep podtap chained (the node's CNI rewrites its conf when it
    /// restarts) and sweep the state dir (at start and every --sweep-every) until SIGTERM or
    /// SIGINT, which leave podtap installed: a DaemonSet's rolling update never unchains it.
    /// With --uninstall: uninstall, then stay until SIGTERM (hooks/k8s/uninstall.yaml).
    #[arg(long)]
    pub wait: bool,
    /// With --wait: seconds between two sweeps of the state dir (0: only at start).
    #[arg(long, value_name = "SECONDS", default_value_t = 600, requires = "wait")]
    pub sweep_every: u64,
}

/// `--mode`'s values; the first is the default.
const MODES: [&str; 4] = podtap::model::Wiring::NAMES;
/// `--queues`' default.
const DEFAULT_QUEUES: u32 = 1;

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn the_grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn deferred_subcommands_keep_their_own_about() {
        // A deferred subcommand's arguments are added when it is built; the
        // doc comment of a flattened Args struct would then replace its about.
        let mut cli = Cli::command();
        cli.build();
        for sub in cli.get_subcommands() {
            let about = sub.get_about().map(ToString::to_string).unwrap_or_default();
            assert!(
                !about.is_empty() && !about.starts_with("Where") && !about.starts_with("Options"),
                "{}: about is {about:?}",
                sub.get_name()
            );
        }
    }
}
