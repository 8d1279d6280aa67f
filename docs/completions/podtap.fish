# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_podtap_global_optspecs
    string join \n log-format= h/help V/version
end

function __fish_podtap_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_podtap_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_podtap_using_subcommand
    set -l cmd (__fish_podtap_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c podtap -n "__fish_podtap_needs_command" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_needs_command" -s V -l version -d 'Print version'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "scan" -d 'Print the JSON network description of a netns (read-only)'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "attach" -d 'Create one TAP per pod interface inside the netns, wire it, record a checkpoint, print the description'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "detach" -d 'Undo exactly what attach did. Succeeds for unknown ids and for gone or reused netns'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "check" -d 'Exit 0 only if every object of the attachment exists and is wired as recorded'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "list" -d 'List the checkpoints in the state dir, and CNI registry entries (orphans too)'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "render" -d 'Render a description for a VMM or guest: qemu, cloud-hypervisor, cloud-hypervisor-api, firecracker, libvirt, cloud-init, kernel-cmdline, guest-args, kata-agent'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "exec" -d 'Run a VMM with the TAP queue fds of sandbox ID appended to its arguments (fd handover), or run a command inside the pod netns (--enter-netns). It inherits stdio and those fds only'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "watch" -d 'Follow sandbox ID\'s netns: attach interfaces that appear later, undo those that leave, hotplug them into the running VM, and print one JSON event per line. Ends on SIGTERM/SIGINT or when the sandbox is detached (exit 0), or its pod netns is deleted (exit 3)'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "serve" -d 'Answer the DHCPv4, DHCPv6 and router solicitations of every served NIC\'s guest, of every attachment in the state dir, from attach until detach (the node daemon); print one JSON event per line. Ends on SIGTERM/SIGINT (exit 0)'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "oci-hook" -d 'OCI runtime hook: reads the container state JSON on stdin'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "cni-install" -d 'Install podtap on a node: copy this binary into the CNI bin dir and chain podtap into the runtime\'s network configuration (idempotent); --uninstall takes both out again'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "demo" -d 'Build a throwaway pod netns, run podtap on it, print the result, and remove everything'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "doctor" -d 'Preflight of this node: one line per check (ok / warn / fail, and what to do); exit 0 only when every check the wiring mode needs passes (17 otherwise)'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "show" -d 'The wiring of one or every attachment at a glance, like `ip -br`: pod interface -> TAP -> wiring -> VM NIC, each with its live state (as `check` sees it) and packet counters'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "completions" -d 'Print the completion script for SHELL (bash, zsh, fish) on stdout'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "man" -d 'Print the man page of podtap, or of one subcommand; --dir writes every page there'
complete -c podtap -n "__fish_podtap_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c podtap -n "__fish_podtap_using_subcommand scan" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand scan" -l netns -d 'The netns: a pinned file (/var/run/netns/NAME) or /proc/PID/ns/net' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand scan" -s o -l output -d 'Write the JSON here instead of stdout' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand scan" -l allow-host-netns -d 'Allow scanning the host\'s own netns'
complete -c podtap -n "__fish_podtap_using_subcommand scan" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand attach" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand attach" -l netns -d 'The pod netns: a pinned file (/var/run/netns/NAME) or /proc/PID/ns/net' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand attach" -l id -d 'Sandbox id: the checkpoint\'s key (letters, digits, -_.:@+=; at most 128 bytes)' -r
complete -c podtap -n "__fish_podtap_using_subcommand attach" -l mode -d 'Wiring between each pod interface and its TAP' -r -f -a "tc\t''
bridge\t''
macvtap\t''
l3\t''"
complete -c podtap -n "__fish_podtap_using_subcommand attach" -l queues -d 'Queues per TAP (1-256); more than 1 makes a multi-queue TAP' -r
complete -c podtap -n "__fish_podtap_using_subcommand attach" -l tc-redirect -d 'Accepted and ignored: tc mode\'s one redirect filter is u32 + mirred. An earlier release took `u32` here (and in `PODTAP_TC_REDIRECT`)' -r
complete -c podtap -n "__fish_podtap_using_subcommand attach" -l tap-owner -d 'Let UID[:GID] open the TAPs without CAP_NET_ADMIN (for an unprivileged or jailed VMM)' -r
complete -c podtap -n "__fish_podtap_using_subcommand attach" -l nic -d 'One interface\'s own choices: IFNAME:KEY=VALUE[,KEY=VALUE...] with keys tap (the TAP\'s name), mac (the guest NIC\'s MAC), queues, owner (UID[:GID]) and serve (yes/no); repeat for more interfaces' -r
complete -c podtap -n "__fish_podtap_using_subcommand attach" -l interfaces -d 'Only these pod interfaces (comma-separated); default: every eligible one' -r
complete -c podtap -n "__fish_podtap_using_subcommand attach" -l dns-from -d 'Record this resolv.conf (nameserver, domain, search, options) as the guest\'s DNS' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand attach" -l state-dir -d 'State directory (tmpfs, like the netns it describes)' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand attach" -s o -l output -d 'Write the JSON here instead of stdout' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand attach" -l no-vnet-hdr -d 'Create TAPs without IFF_VNET_HDR'
complete -c podtap -n "__fish_podtap_using_subcommand attach" -l serve -d 'Answer every NIC\'s guest\'s DHCPv4, DHCPv6 and router solicitations (podtap serve or watch --serve does), where the NIC can be served: not macvtap, not without an address'
complete -c podtap -n "__fish_podtap_using_subcommand attach" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand detach" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand detach" -l id -r
complete -c podtap -n "__fish_podtap_using_subcommand detach" -l state-dir -d 'State directory (tmpfs, like the netns it describes)' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand detach" -l netns -d 'Where the netns is now, when the recorded path has died while the netns lives on (used only if it is the recorded netns, by identity); with --force, the netns to clean when the checkpoint no longer names it' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand detach" -l force -d 'For a corrupt checkpoint: clean up by podtap\'s own markers (TAP/bridge ifalias, link group)'
complete -c podtap -n "__fish_podtap_using_subcommand detach" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand check" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand check" -l id -r
complete -c podtap -n "__fish_podtap_using_subcommand check" -l state-dir -d 'State directory (tmpfs, like the netns it describes)' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand list" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand list" -l state-dir -d 'State directory (tmpfs, like the netns it describes)' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand list" -l json -d 'Print JSON instead of a table'
complete -c podtap -n "__fish_podtap_using_subcommand list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand render" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand render" -l id -d 'Render the description recorded for this sandbox id. Guest formats (cloud-init, guest-args, kernel-cmdline, kata-agent) read the routes, neighbours and rules live from the recorded netns, which must still exist (exit 3 if gone, 6 if not permitted, 12 if replaced)' -r
complete -c podtap -n "__fish_podtap_using_subcommand render" -l description -d 'Render the description in this JSON file' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand render" -l state-dir -d 'State directory (tmpfs, like the netns it describes)' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand render" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand exec" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand exec" -l id -r
complete -c podtap -n "__fish_podtap_using_subcommand exec" -l vmm -d 'Append fd arguments for this VMM: qemu (fds=/vhostfds=) or cloud-hypervisor (--net fd=[..])' -r -f -a "qemu\t''
cloud-hypervisor\t''"
complete -c podtap -n "__fish_podtap_using_subcommand exec" -l user -d 'Run the command as UID[:GID] (GID defaults to UID) with no capabilities and no_new_privs, after the TAPs are opened (it keeps their fds)' -r
complete -c podtap -n "__fish_podtap_using_subcommand exec" -l state-dir -d 'State directory (tmpfs, like the netns it describes)' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand exec" -l vhost -d 'Also open one /dev/vhost-net fd per queue (QEMU)'
complete -c podtap -n "__fish_podtap_using_subcommand exec" -l enter-netns -d 'Run the command inside the pod netns instead (VMMs that open TAPs by name)'
complete -c podtap -n "__fish_podtap_using_subcommand exec" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand watch" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand watch" -l id -r
complete -c podtap -n "__fish_podtap_using_subcommand watch" -l qmp -d 'Hotplug into the QEMU behind this QMP socket (fds over SCM_RIGHTS)' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand watch" -l cloud-hypervisor-api -d 'Hotplug into the Cloud Hypervisor behind this API socket (vm.add-net with fds)' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand watch" -l vmm-uid -d 'Send TAP fds to a VMM socket whose peer runs as this uid (besides root, always allowed); any other peer gets no fds (SO_PEERCRED)' -r
complete -c podtap -n "__fish_podtap_using_subcommand watch" -l state-dir -d 'State directory (tmpfs, like the netns it describes)' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand watch" -l serve -d 'Also answer the served NICs\' guests (DHCP, router solicitations), those it hotplugs too: for a node without podtap serve'
complete -c podtap -n "__fish_podtap_using_subcommand watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand serve" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand serve" -l state-dir -d 'State directory (tmpfs, like the netns it describes)' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand oci-hook" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand oci-hook" -l state-dir -d 'State directory (tmpfs, like the netns it describes)' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand oci-hook" -l output -d 'Write the description here when the annotation io.podtap.output (a path relative to the bundle) is absent; default <bundle>/podtap.json' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand oci-hook" -l pod-modes -d 'Wiring modes a pod may pick with io.podtap.mode besides tc (comma-separated; default: none)' -r -f -a "tc\t''
bridge\t''
macvtap\t''
l3\t''"
complete -c podtap -n "__fish_podtap_using_subcommand oci-hook" -l pod-max-queues -d 'Most queues a pod may ask for with io.podtap.queues (default: 1)' -r
complete -c podtap -n "__fish_podtap_using_subcommand oci-hook" -l pod-tap-owners -d 'uids a pod may name as TAP owner with io.podtap.tap-owner (comma-separated; default: none)' -r
complete -c podtap -n "__fish_podtap_using_subcommand oci-hook" -l pod-tap-groups -d 'gids a pod may name as TAP group with io.podtap.tap-owner (comma-separated; default: none)' -r
complete -c podtap -n "__fish_podtap_using_subcommand oci-hook" -l pod-tap-names -d 'TAP names a pod may ask for with io.podtap.nic.IFNAME (comma-separated; default: none)' -r
complete -c podtap -n "__fish_podtap_using_subcommand oci-hook" -l pod-guest-macs -d 'Let a pod choose its guest NICs\' MACs with io.podtap.nic.IFNAME (default: never)'
complete -c podtap -n "__fish_podtap_using_subcommand oci-hook" -l pod-serve -d 'Let a pod ask for its guests to be served (io.podtap.serve, or serve=yes in io.podtap.nic.IFNAME) by podtap serve (default: never)'
complete -c podtap -n "__fish_podtap_using_subcommand oci-hook" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand cni-install" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand cni-install" -l conf-dir -d 'The CNI configuration dir the runtime reads' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand cni-install" -l bin-dir -d 'The CNI plugin dir the runtime runs plugins from' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand cni-install" -l mode -d 'Wiring for pods on this node (an io.podtap.mode annotation may change it only where a podPolicy in the conflist allows: docs/integration.md)' -r -f -a "tc\t''
bridge\t''
macvtap\t''
l3\t''"
complete -c podtap -n "__fish_podtap_using_subcommand cni-install" -l plugin-state-dir -d 'The state dir written into podtap\'s plugin entry' -r
complete -c podtap -n "__fish_podtap_using_subcommand cni-install" -l pod-policy -d 'What pods may ask for by annotation, as podtap\'s podPolicy (JSON, e.g. \'{"modes":["bridge"],"maxQueues":2}\'); default: nothing beyond --mode' -r
complete -c podtap -n "__fish_podtap_using_subcommand cni-install" -l sweep-every -d 'With --wait: seconds between two sweeps of the state dir (0: only at start)' -r
complete -c podtap -n "__fish_podtap_using_subcommand cni-install" -l serve -d 'Serve the pods\' guests their configuration ("serve": true in podtap\'s entry; the DaemonSet\'s podtap serve answers), unless the network brings its own DHCP (a dhcp IPAM, a macvlan/ipvlan/host-device without IPAM)'
complete -c podtap -n "__fish_podtap_using_subcommand cni-install" -l uninstall -d 'Take podtap off the node: restore the configuration byte for byte, remove the binary, and sweep the state dir. The one way podtap leaves a node (a stopped --wait does not)'
complete -c podtap -n "__fish_podtap_using_subcommand cni-install" -l wait -d 'After installing, keep podtap chained (the node\'s CNI rewrites its conf when it restarts) and sweep the state dir (at start and every --sweep-every) until SIGTERM or SIGINT, which leave podtap installed: a DaemonSet\'s rolling update never unchains it. With --uninstall: uninstall, then stay until SIGTERM (hooks/k8s/uninstall.yaml)'
complete -c podtap -n "__fish_podtap_using_subcommand cni-install" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand demo" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand demo" -l keep -d 'Keep the demo namespaces and print how to remove them (for poking around)'
complete -c podtap -n "__fish_podtap_using_subcommand demo" -l no-boot -d 'Do not boot the test guest, even where QEMU and the guest are at hand (by default the demo boots it on the TAP, the guest configures itself from podtap\'s DHCP and router advertisements, and it and the peer ping each other)'
complete -c podtap -n "__fish_podtap_using_subcommand demo" -l boot -d 'Accepted for older scripts: booting is the default now'
complete -c podtap -n "__fish_podtap_using_subcommand demo" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand doctor" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand doctor" -l mode -d 'The wiring mode to check the node for (decides which checks are required)' -r -f -a "tc\t''
bridge\t''
macvtap\t''
l3\t''"
complete -c podtap -n "__fish_podtap_using_subcommand doctor" -l state-dir -d 'State directory (tmpfs, like the netns it describes)' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand doctor" -l cni-conf-dir -d 'The CNI configuration dir the runtime reads' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand doctor" -l cni-bin-dir -d 'The CNI plugin dir the runtime runs plugins from' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand doctor" -l json -d 'Print the findings as JSON'
complete -c podtap -n "__fish_podtap_using_subcommand doctor" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand show" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand show" -l id -d 'Only this sandbox id' -r
complete -c podtap -n "__fish_podtap_using_subcommand show" -l netns -d 'Only the attachments of this netns (matched by identity, whatever path recorded it)' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand show" -l state-dir -d 'State directory (tmpfs, like the netns it describes)' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand show" -l json -d 'Print JSON instead of lines'
complete -c podtap -n "__fish_podtap_using_subcommand show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand completions" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand man" -l log-format -d 'Log format on stderr: text, or one JSON object per line (PODTAP_LOG sets the level)' -r -f -a "text\t'Human-readable lines'
json\t'One JSON object per line, for log shippers'"
complete -c podtap -n "__fish_podtap_using_subcommand man" -l dir -d 'Write podtap.1 and one podtap-SUBCOMMAND.1 per subcommand into this directory' -r -F
complete -c podtap -n "__fish_podtap_using_subcommand man" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "scan" -d 'Print the JSON network description of a netns (read-only)'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "attach" -d 'Create one TAP per pod interface inside the netns, wire it, record a checkpoint, print the description'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "detach" -d 'Undo exactly what attach did. Succeeds for unknown ids and for gone or reused netns'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "check" -d 'Exit 0 only if every object of the attachment exists and is wired as recorded'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "list" -d 'List the checkpoints in the state dir, and CNI registry entries (orphans too)'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "render" -d 'Render a description for a VMM or guest: qemu, cloud-hypervisor, cloud-hypervisor-api, firecracker, libvirt, cloud-init, kernel-cmdline, guest-args, kata-agent'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "exec" -d 'Run a VMM with the TAP queue fds of sandbox ID appended to its arguments (fd handover), or run a command inside the pod netns (--enter-netns). It inherits stdio and those fds only'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "watch" -d 'Follow sandbox ID\'s netns: attach interfaces that appear later, undo those that leave, hotplug them into the running VM, and print one JSON event per line. Ends on SIGTERM/SIGINT or when the sandbox is detached (exit 0), or its pod netns is deleted (exit 3)'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "serve" -d 'Answer the DHCPv4, DHCPv6 and router solicitations of every served NIC\'s guest, of every attachment in the state dir, from attach until detach (the node daemon); print one JSON event per line. Ends on SIGTERM/SIGINT (exit 0)'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "oci-hook" -d 'OCI runtime hook: reads the container state JSON on stdin'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "cni-install" -d 'Install podtap on a node: copy this binary into the CNI bin dir and chain podtap into the runtime\'s network configuration (idempotent); --uninstall takes both out again'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "demo" -d 'Build a throwaway pod netns, run podtap on it, print the result, and remove everything'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "doctor" -d 'Preflight of this node: one line per check (ok / warn / fail, and what to do); exit 0 only when every check the wiring mode needs passes (17 otherwise)'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "show" -d 'The wiring of one or every attachment at a glance, like `ip -br`: pod interface -> TAP -> wiring -> VM NIC, each with its live state (as `check` sees it) and packet counters'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "completions" -d 'Print the completion script for SHELL (bash, zsh, fish) on stdout'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "man" -d 'Print the man page of podtap, or of one subcommand; --dir writes every page there'
complete -c podtap -n "__fish_podtap_using_subcommand help; and not __fish_seen_subcommand_from scan attach detach check list render exec watch serve oci-hook cni-install demo doctor show completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
