#compdef podtap

autoload -U is-at-least

_podtap() {
    typeset -A opt_args
    typeset -a _arguments_options
    local ret=1

    if is-at-least 5.2; then
        _arguments_options=(-s -S -C)
    else
        _arguments_options=(-s -C)
    fi

    local context curcontext="$curcontext" state line
    _arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
'-V[Print version]' \
'--version[Print version]' \
":: :_podtap_commands" \
"*::: :->podtap" \
&& ret=0
    case $state in
    (podtap)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:podtap-command-$line[1]:"
        case $line[1] in
            (scan)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'--netns=[The netns\: a pinned file (/var/run/netns/NAME) or /proc/PID/ns/net]:NETNS:_files' \
'-o+[Write the JSON here instead of stdout]:OUTPUT:_files' \
'--output=[Write the JSON here instead of stdout]:OUTPUT:_files' \
'--allow-host-netns[Allow scanning the host'\''s own netns]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(attach)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'--netns=[The pod netns\: a pinned file (/var/run/netns/NAME) or /proc/PID/ns/net]:NETNS:_files' \
'--id=[Sandbox id\: the checkpoint'\''s key (letters, digits, -_.\:@+=; at most 128 bytes)]:ID:_default' \
'--mode=[Wiring between each pod interface and its TAP]:MODE:(tc bridge macvtap l3)' \
'--queues=[Queues per TAP (1-256); more than 1 makes a multi-queue TAP]:QUEUES:_default' \
'--tc-redirect=[Accepted and ignored\: tc mode'\''s one redirect filter is u32 + mirred. An earlier release took \`u32\` here (and in \`PODTAP_TC_REDIRECT\`)]:TC_REDIRECT:_default' \
'--tap-owner=[Let UID\[\:GID\] open the TAPs without CAP_NET_ADMIN (for an unprivileged or jailed VMM)]:UID[:GID]:_default' \
'*--nic=[One interface'\''s own choices\: IFNAME\:KEY=VALUE\[,KEY=VALUE...\] with keys tap (the TAP'\''s name), mac (the guest NIC'\''s MAC), queues, owner (UID\[\:GID\]) and serve (yes/no); repeat for more interfaces]:IFNAME:KEY=VALUE,...:_default' \
'*--interfaces=[Only these pod interfaces (comma-separated); default\: every eligible one]:INTERFACES:_default' \
'--dns-from=[Record this resolv.conf (nameserver, domain, search, options) as the guest'\''s DNS]:FILE:_files' \
'--state-dir=[State directory (tmpfs, like the netns it describes)]:STATE_DIR:_files' \
'-o+[Write the JSON here instead of stdout]:OUTPUT:_files' \
'--output=[Write the JSON here instead of stdout]:OUTPUT:_files' \
'--no-vnet-hdr[Create TAPs without IFF_VNET_HDR]' \
'--serve[Answer every NIC'\''s guest'\''s DHCPv4, DHCPv6 and router solicitations (podtap serve or watch --serve does), where the NIC can be served\: not macvtap, not without an address]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(detach)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'--id=[]:ID:_default' \
'--state-dir=[State directory (tmpfs, like the netns it describes)]:STATE_DIR:_files' \
'--netns=[Where the netns is now, when the recorded path has died while the netns lives on (used only if it is the recorded netns, by identity); with --force, the netns to clean when the checkpoint no longer names it]:NETNS:_files' \
'--force[For a corrupt checkpoint\: clean up by podtap'\''s own markers (TAP/bridge ifalias, link group)]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(check)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'--id=[]:ID:_default' \
'--state-dir=[State directory (tmpfs, like the netns it describes)]:STATE_DIR:_files' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(list)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'--state-dir=[State directory (tmpfs, like the netns it describes)]:STATE_DIR:_files' \
'--json[Print JSON instead of a table]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(render)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'(--description)--id=[Render the description recorded for this sandbox id. Guest formats (cloud-init, guest-args, kernel-cmdline, kata-agent) read the routes, neighbours and rules live from the recorded netns, which must still exist (exit 3 if gone, 6 if not permitted, 12 if replaced)]:ID:_default' \
'--description=[Render the description in this JSON file]:DESCRIPTION:_files' \
'--state-dir=[State directory (tmpfs, like the netns it describes)]:STATE_DIR:_files' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
':format -- Output format:_default' \
&& ret=0
;;
(exec)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'--id=[]:ID:_default' \
'(--enter-netns)--vmm=[Append fd arguments for this VMM\: qemu (fds=/vhostfds=) or cloud-hypervisor (--net fd=\[..\])]:VMM:(qemu cloud-hypervisor)' \
'--user=[Run the command as UID\[\:GID\] (GID defaults to UID) with no capabilities and no_new_privs, after the TAPs are opened (it keeps their fds)]:UID[:GID]:_default' \
'--state-dir=[State directory (tmpfs, like the netns it describes)]:STATE_DIR:_files' \
'--vhost[Also open one /dev/vhost-net fd per queue (QEMU)]' \
'--enter-netns[Run the command inside the pod netns instead (VMMs that open TAPs by name)]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
'*::argv -- The VMM (or command) and its arguments, after `--`:_default' \
&& ret=0
;;
(watch)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'--id=[]:ID:_default' \
'(--cloud-hypervisor-api)--qmp=[Hotplug into the QEMU behind this QMP socket (fds over SCM_RIGHTS)]:QMP:_files' \
'--cloud-hypervisor-api=[Hotplug into the Cloud Hypervisor behind this API socket (vm.add-net with fds)]:CLOUD_HYPERVISOR_API:_files' \
'--vmm-uid=[Send TAP fds to a VMM socket whose peer runs as this uid (besides root, always allowed); any other peer gets no fds (SO_PEERCRED)]:UID:_default' \
'--state-dir=[State directory (tmpfs, like the netns it describes)]:STATE_DIR:_files' \
'--serve[Also answer the served NICs'\'' guests (DHCP, router solicitations), those it hotplugs too\: for a node without podtap serve]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(serve)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'--state-dir=[State directory (tmpfs, like the netns it describes)]:STATE_DIR:_files' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(oci-hook)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'--state-dir=[State directory (tmpfs, like the netns it describes)]:STATE_DIR:_files' \
'--output=[Write the description here when the annotation io.podtap.output (a path relative to the bundle) is absent; default <bundle>/podtap.json]:OUTPUT:_files' \
'*--pod-modes=[Wiring modes a pod may pick with io.podtap.mode besides tc (comma-separated; default\: none)]:MODES:(tc bridge macvtap l3)' \
'--pod-max-queues=[Most queues a pod may ask for with io.podtap.queues (default\: 1)]:N:_default' \
'*--pod-tap-owners=[uids a pod may name as TAP owner with io.podtap.tap-owner (comma-separated; default\: none)]:UIDS:_default' \
'*--pod-tap-groups=[gids a pod may name as TAP group with io.podtap.tap-owner (comma-separated; default\: none)]:GIDS:_default' \
'*--pod-tap-names=[TAP names a pod may ask for with io.podtap.nic.IFNAME (comma-separated; default\: none)]:NAMES:_default' \
'--pod-guest-macs[Let a pod choose its guest NICs'\'' MACs with io.podtap.nic.IFNAME (default\: never)]' \
'--pod-serve[Let a pod ask for its guests to be served (io.podtap.serve, or serve=yes in io.podtap.nic.IFNAME) by podtap serve (default\: never)]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
':action -- attach (createRuntime) or detach (poststop):(attach detach)' \
&& ret=0
;;
(cni-install)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'--conf-dir=[The CNI configuration dir the runtime reads]:CONF_DIR:_files' \
'--bin-dir=[The CNI plugin dir the runtime runs plugins from]:BIN_DIR:_files' \
'--mode=[Wiring for pods on this node (an io.podtap.mode annotation may change it only where a podPolicy in the conflist allows\: docs/integration.md)]:MODE:(tc bridge macvtap l3)' \
'--plugin-state-dir=[The state dir written into podtap'\''s plugin entry]:PLUGIN_STATE_DIR:_default' \
'--pod-policy=[What pods may ask for by annotation, as podtap'\''s podPolicy (JSON, e.g. '\''{"modes"\:\["bridge"\],"maxQueues"\:2}'\''); default\: nothing beyond --mode]:JSON:_default' \
'--sweep-every=[With --wait\: seconds between two sweeps of the state dir (0\: only at start)]:SECONDS:_default' \
'--serve[Serve the pods'\'' guests their configuration ("serve"\: true in podtap'\''s entry; the DaemonSet'\''s podtap serve answers), unless the network brings its own DHCP (a dhcp IPAM, a macvlan/ipvlan/host-device without IPAM)]' \
'--uninstall[Take podtap off the node\: restore the configuration byte for byte, remove the binary, and sweep the state dir. The one way podtap leaves a node (a stopped --wait does not)]' \
'--wait[After installing, keep podtap chained (the node'\''s CNI rewrites its conf when it restarts) and sweep the state dir (at start and every --sweep-every) until SIGTERM or SIGINT, which leave podtap installed\: a DaemonSet'\''s rolling update never unchains it. With --uninstall\: uninstall, then stay until SIGTERM (hooks/k8s/uninstall.yaml)]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(demo)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'--keep[Keep the demo namespaces and print how to remove them (for poking around)]' \
'--no-boot[Do not boot the test guest, even where QEMU and the guest are at hand (by default the demo boots it on the TAP, the guest configures itself from podtap'\''s DHCP and router advertisements, and it and the peer ping each other)]' \
'(--no-boot)--boot[Accepted for older scripts\: booting is the default now]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(doctor)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'--mode=[The wiring mode to check the node for (decides which checks are required)]:MODE:(tc bridge macvtap l3)' \
'--state-dir=[State directory (tmpfs, like the netns it describes)]:STATE_DIR:_files' \
'--cni-conf-dir=[The CNI configuration dir the runtime reads]:CNI_CONF_DIR:_files' \
'--cni-bin-dir=[The CNI plugin dir the runtime runs plugins from]:CNI_BIN_DIR:_files' \
'--json[Print the findings as JSON]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(show)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'(--netns)--id=[Only this sandbox id]:ID:_default' \
'--netns=[Only the attachments of this netns (matched by identity, whatever path recorded it)]:PATH:_files' \
'--state-dir=[State directory (tmpfs, like the netns it describes)]:STATE_DIR:_files' \
'--json[Print JSON instead of lines]' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
&& ret=0
;;
(completions)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
':shell -- The shell:((bash\:"bash (bash-completion)"
zsh\:"zsh"
fish\:"fish"))' \
&& ret=0
;;
(man)
_arguments "${_arguments_options[@]}" : \
'--log-format=[Log format on stderr\: text, or one JSON object per line (PODTAP_LOG sets the level)]:LOG_FORMAT:((text\:"Human-readable lines"
json\:"One JSON object per line, for log shippers"))' \
'()--dir=[Write podtap.1 and one podtap-SUBCOMMAND.1 per subcommand into this directory]:DIR:_files' \
'-h[Print help (see more with '\''--help'\'')]' \
'--help[Print help (see more with '\''--help'\'')]' \
'::subcommand -- The subcommand whose page to print (default\: podtap'\''s own):_default' \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
":: :_podtap__subcmd__help_commands" \
"*::: :->help" \
&& ret=0

    case $state in
    (help)
        words=($line[1] "${words[@]}")
        (( CURRENT += 1 ))
        curcontext="${curcontext%:*:*}:podtap-help-command-$line[1]:"
        case $line[1] in
            (scan)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(attach)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(detach)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(check)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(list)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(render)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(exec)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(watch)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(serve)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(oci-hook)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(cni-install)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(demo)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(doctor)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(show)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(completions)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(man)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
(help)
_arguments "${_arguments_options[@]}" : \
&& ret=0
;;
        esac
    ;;
esac
;;
        esac
    ;;
esac
}

(( $+functions[_podtap_commands] )) ||
_podtap_commands() {
    local commands; commands=(
'scan:Print the JSON network description of a netns (read-only)' \
'attach:Create one TAP per pod interface inside the netns, wire it, record a checkpoint, print the description' \
'detach:Undo exactly what attach did. Succeeds for unknown ids and for gone or reused netns' \
'check:Exit 0 only if every object of the attachment exists and is wired as recorded' \
'list:List the checkpoints in the state dir, and CNI registry entries (orphans too)' \
'render:Render a description for a VMM or guest\: qemu, cloud-hypervisor, cloud-hypervisor-api, firecracker, libvirt, cloud-init, kernel-cmdline, guest-args, kata-agent' \
'exec:Run a VMM with the TAP queue fds of sandbox ID appended to its arguments (fd handover), or run a command inside the pod netns (--enter-netns). It inherits stdio and those fds only' \
'watch:Follow sandbox ID'\''s netns\: attach interfaces that appear later, undo those that leave, hotplug them into the running VM, and print one JSON event per line. Ends on SIGTERM/SIGINT or when the sandbox is detached (exit 0), or its pod netns is deleted (exit 3)' \
'serve:Answer the DHCPv4, DHCPv6 and router solicitations of every served NIC'\''s guest, of every attachment in the state dir, from attach until detach (the node daemon); print one JSON event per line. Ends on SIGTERM/SIGINT (exit 0)' \
'oci-hook:OCI runtime hook\: reads the container state JSON on stdin' \
'cni-install:Install podtap on a node\: copy this binary into the CNI bin dir and chain podtap into the runtime'\''s network configuration (idempotent); --uninstall takes both out again' \
'demo:Build a throwaway pod netns, run podtap on it, print the result, and remove everything' \
'doctor:Preflight of this node\: one line per check (ok / warn / fail, and what to do); exit 0 only when every check the wiring mode needs passes (17 otherwise)' \
'show:The wiring of one or every attachment at a glance, like \`ip -br\`\: pod interface -> TAP -> wiring -> VM NIC, each with its live state (as \`check\` sees it) and packet counters' \
'completions:Print the completion script for SHELL (bash, zsh, fish) on stdout' \
'man:Print the man page of podtap, or of one subcommand; --dir writes every page there' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'podtap commands' commands "$@"
}
(( $+functions[_podtap__subcmd__attach_commands] )) ||
_podtap__subcmd__attach_commands() {
    local commands; commands=()
    _describe -t commands 'podtap attach commands' commands "$@"
}
(( $+functions[_podtap__subcmd__check_commands] )) ||
_podtap__subcmd__check_commands() {
    local commands; commands=()
    _describe -t commands 'podtap check commands' commands "$@"
}
(( $+functions[_podtap__subcmd__cni-install_commands] )) ||
_podtap__subcmd__cni-install_commands() {
    local commands; commands=()
    _describe -t commands 'podtap cni-install commands' commands "$@"
}
(( $+functions[_podtap__subcmd__completions_commands] )) ||
_podtap__subcmd__completions_commands() {
    local commands; commands=()
    _describe -t commands 'podtap completions commands' commands "$@"
}
(( $+functions[_podtap__subcmd__demo_commands] )) ||
_podtap__subcmd__demo_commands() {
    local commands; commands=()
    _describe -t commands 'podtap demo commands' commands "$@"
}
(( $+functions[_podtap__subcmd__detach_commands] )) ||
_podtap__subcmd__detach_commands() {
    local commands; commands=()
    _describe -t commands 'podtap detach commands' commands "$@"
}
(( $+functions[_podtap__subcmd__doctor_commands] )) ||
_podtap__subcmd__doctor_commands() {
    local commands; commands=()
    _describe -t commands 'podtap doctor commands' commands "$@"
}
(( $+functions[_podtap__subcmd__exec_commands] )) ||
_podtap__subcmd__exec_commands() {
    local commands; commands=()
    _describe -t commands 'podtap exec commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help_commands] )) ||
_podtap__subcmd__help_commands() {
    local commands; commands=(
'scan:Print the JSON network description of a netns (read-only)' \
'attach:Create one TAP per pod interface inside the netns, wire it, record a checkpoint, print the description' \
'detach:Undo exactly what attach did. Succeeds for unknown ids and for gone or reused netns' \
'check:Exit 0 only if every object of the attachment exists and is wired as recorded' \
'list:List the checkpoints in the state dir, and CNI registry entries (orphans too)' \
'render:Render a description for a VMM or guest\: qemu, cloud-hypervisor, cloud-hypervisor-api, firecracker, libvirt, cloud-init, kernel-cmdline, guest-args, kata-agent' \
'exec:Run a VMM with the TAP queue fds of sandbox ID appended to its arguments (fd handover), or run a command inside the pod netns (--enter-netns). It inherits stdio and those fds only' \
'watch:Follow sandbox ID'\''s netns\: attach interfaces that appear later, undo those that leave, hotplug them into the running VM, and print one JSON event per line. Ends on SIGTERM/SIGINT or when the sandbox is detached (exit 0), or its pod netns is deleted (exit 3)' \
'serve:Answer the DHCPv4, DHCPv6 and router solicitations of every served NIC'\''s guest, of every attachment in the state dir, from attach until detach (the node daemon); print one JSON event per line. Ends on SIGTERM/SIGINT (exit 0)' \
'oci-hook:OCI runtime hook\: reads the container state JSON on stdin' \
'cni-install:Install podtap on a node\: copy this binary into the CNI bin dir and chain podtap into the runtime'\''s network configuration (idempotent); --uninstall takes both out again' \
'demo:Build a throwaway pod netns, run podtap on it, print the result, and remove everything' \
'doctor:Preflight of this node\: one line per check (ok / warn / fail, and what to do); exit 0 only when every check the wiring mode needs passes (17 otherwise)' \
'show:The wiring of one or every attachment at a glance, like \`ip -br\`\: pod interface -> TAP -> wiring -> VM NIC, each with its live state (as \`check\` sees it) and packet counters' \
'completions:Print the completion script for SHELL (bash, zsh, fish) on stdout' \
'man:Print the man page of podtap, or of one subcommand; --dir writes every page there' \
'help:Print this message or the help of the given subcommand(s)' \
    )
    _describe -t commands 'podtap help commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__attach_commands] )) ||
_podtap__subcmd__help__subcmd__attach_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help attach commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__check_commands] )) ||
_podtap__subcmd__help__subcmd__check_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help check commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__cni-install_commands] )) ||
_podtap__subcmd__help__subcmd__cni-install_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help cni-install commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__completions_commands] )) ||
_podtap__subcmd__help__subcmd__completions_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help completions commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__demo_commands] )) ||
_podtap__subcmd__help__subcmd__demo_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help demo commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__detach_commands] )) ||
_podtap__subcmd__help__subcmd__detach_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help detach commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__doctor_commands] )) ||
_podtap__subcmd__help__subcmd__doctor_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help doctor commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__exec_commands] )) ||
_podtap__subcmd__help__subcmd__exec_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help exec commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__help_commands] )) ||
_podtap__subcmd__help__subcmd__help_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help help commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__list_commands] )) ||
_podtap__subcmd__help__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help list commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__man_commands] )) ||
_podtap__subcmd__help__subcmd__man_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help man commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__oci-hook_commands] )) ||
_podtap__subcmd__help__subcmd__oci-hook_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help oci-hook commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__render_commands] )) ||
_podtap__subcmd__help__subcmd__render_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help render commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__scan_commands] )) ||
_podtap__subcmd__help__subcmd__scan_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help scan commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__serve_commands] )) ||
_podtap__subcmd__help__subcmd__serve_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help serve commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__show_commands] )) ||
_podtap__subcmd__help__subcmd__show_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help show commands' commands "$@"
}
(( $+functions[_podtap__subcmd__help__subcmd__watch_commands] )) ||
_podtap__subcmd__help__subcmd__watch_commands() {
    local commands; commands=()
    _describe -t commands 'podtap help watch commands' commands "$@"
}
(( $+functions[_podtap__subcmd__list_commands] )) ||
_podtap__subcmd__list_commands() {
    local commands; commands=()
    _describe -t commands 'podtap list commands' commands "$@"
}
(( $+functions[_podtap__subcmd__man_commands] )) ||
_podtap__subcmd__man_commands() {
    local commands; commands=()
    _describe -t commands 'podtap man commands' commands "$@"
}
(( $+functions[_podtap__subcmd__oci-hook_commands] )) ||
_podtap__subcmd__oci-hook_commands() {
    local commands; commands=()
    _describe -t commands 'podtap oci-hook commands' commands "$@"
}
(( $+functions[_podtap__subcmd__render_commands] )) ||
_podtap__subcmd__render_commands() {
    local commands; commands=()
    _describe -t commands 'podtap render commands' commands "$@"
}
(( $+functions[_podtap__subcmd__scan_commands] )) ||
_podtap__subcmd__scan_commands() {
    local commands; commands=()
    _describe -t commands 'podtap scan commands' commands "$@"
}
(( $+functions[_podtap__subcmd__serve_commands] )) ||
_podtap__subcmd__serve_commands() {
    local commands; commands=()
    _describe -t commands 'podtap serve commands' commands "$@"
}
(( $+functions[_podtap__subcmd__show_commands] )) ||
_podtap__subcmd__show_commands() {
    local commands; commands=()
    _describe -t commands 'podtap show commands' commands "$@"
}
(( $+functions[_podtap__subcmd__watch_commands] )) ||
_podtap__subcmd__watch_commands() {
    local commands; commands=()
    _describe -t commands 'podtap watch commands' commands "$@"
}

if [ "$funcstack[1]" = "_podtap" ]; then
    _podtap "$@"
else
    compdef _podtap podtap
fi
