#!/usr/bin/env bash
# Cloud Hypervisor from the command line, one `--net` per pod NIC.
#
# Default: Cloud Hypervisor opens the TAPs by name (`podtap render
# cloud-hypervisor` gives `tap=...,mac=...,mtu=...,num_queues=...,id=...`), so
# it runs inside the pod netns through `podtap exec --enter-netns`.
# FDS=1: fd handover instead: `podtap exec --vmm cloud-hypervisor` opens the
# TAP queues itself and appends `--net fd=[...],...`; Cloud Hypervisor stays in
# the caller's netns.
#
# usage: cloud-hypervisor-cli.sh ID KERNEL INITRD [EXTRA_CH_ARGS...]
# env:   PODTAP (podtap binary), CLOUD_HYPERVISOR (cloud-hypervisor), MEM (256M),
#        FDS=1, GUEST_APPEND (more kernel arguments).
# Cloud Hypervisor needs /dev/kvm.
set -euo pipefail

if [ $# -lt 3 ]; then
    echo "usage: $0 ID KERNEL INITRD [EXTRA_CH_ARGS...]" >&2
    exit 2
fi
id=$1 kernel=$2 initrd=$3
shift 3
podtap=${PODTAP:-podtap}
ch=${CLOUD_HYPERVISOR:-cloud-hypervisor}

mapfile -t nets < <("$podtap" render cloud-hypervisor --id "$id")
guest_net=$("$podtap" render guest-args --id "$id")

# Cloud Hypervisor refuses num_queues/2 > boot vCPUs.
cpus=1
for net in "${nets[@]}"; do
    q=${net##*num_queues=}; q=${q%%,*}
    [ $((q / 2)) -gt "$cpus" ] && cpus=$((q / 2))
done

common=(--cpus "boot=$cpus" --memory "size=${MEM:-256M}"
    --kernel "$kernel" --initramfs "$initrd"
    --cmdline "console=ttyS0 quiet panic=-1 $guest_net ${GUEST_APPEND:-}"
    --serial tty --console off)

if [ "${FDS:-0}" = 1 ]; then
    exec "$podtap" exec --id "$id" --vmm cloud-hypervisor -- "$ch" "${common[@]}" "$@"
fi

net_args=()
for net in "${nets[@]}"; do
    net_args+=(--net "$net")
done
exec "$podtap" exec --id "$id" --enter-netns -- "$ch" "${common[@]}" "${net_args[@]}" "$@"
