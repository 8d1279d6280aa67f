#!/usr/bin/env bash
# QEMU opening the TAPs by name (`-netdev tap,ifname=...`): QEMU must run
# inside the pod netns, and needs the right to open /dev/net/tun there.
#
# usage: qemu-by-name.sh ID KERNEL INITRD [EXTRA_QEMU_ARGS...]
# env:   PODTAP (podtap binary), QEMU (qemu-system-x86_64), ACCEL (tcg),
#        MEM (256), GUEST_APPEND (more kernel arguments).
# needs: jq
set -euo pipefail

if [ $# -lt 3 ]; then
    echo "usage: $0 ID KERNEL INITRD [EXTRA_QEMU_ARGS...]" >&2
    exit 2
fi
id=$1 kernel=$2 initrd=$3
shift 3
podtap=${PODTAP:-podtap}
qemu=${QEMU:-qemu-system-x86_64}

# The pod netns recorded for this sandbox.
netns=$("$podtap" list --json | jq -er --arg id "$id" '.[] | select(.id == $id) | .netns')

# One argv element per line: -netdev, its value, -device, its value, ...
mapfile -t net_args < <("$podtap" render qemu --id "$id")
guest_net=$("$podtap" render guest-args --id "$id")

smp=1
for arg in "${net_args[@]}"; do
    case $arg in
        *,queues=*) q=${arg##*,queues=}; q=${q%%,*}; [ "$q" -gt "$smp" ] && smp=$q ;;
    esac
done

# `ip netns exec` wants a name under /run/netns; any other path (e.g.
# /proc/PID/ns/net) goes through nsenter.
case $netns in
    /run/netns/* | /var/run/netns/*) enter=(ip netns exec "${netns##*/}") ;;
    *) enter=(nsenter "--net=$netns") ;;
esac

exec "${enter[@]}" "$qemu" -accel "${ACCEL:-tcg}" -m "${MEM:-256}" -smp "$smp" \
    -nographic -no-reboot \
    -kernel "$kernel" -initrd "$initrd" \
    -append "console=ttyS0 quiet panic=-1 $guest_net ${GUEST_APPEND:-}" \
    "${net_args[@]}" "$@"
