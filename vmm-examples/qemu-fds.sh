#!/usr/bin/env bash
# QEMU with TAP fd handover: `podtap exec` opens every TAP (or macvtap) queue inside the pod
# netns and execs QEMU with `-netdev tap,fds=...` appended. QEMU runs in the
# caller's netns and never opens /dev/net/tun itself.
#
# usage: qemu-fds.sh ID KERNEL INITRD [EXTRA_QEMU_ARGS...]
# env:   PODTAP (podtap binary), QEMU (qemu-system-x86_64), ACCEL (tcg),
#        MEM (256), VHOST=1 (also hand over /dev/vhost-net fds),
#        GUEST_APPEND (more kernel arguments). needs: jq
set -euo pipefail

if [ $# -lt 3 ]; then
    echo "usage: $0 ID KERNEL INITRD [EXTRA_QEMU_ARGS...]" >&2
    exit 2
fi
id=$1 kernel=$2 initrd=$3
shift 3
podtap=${PODTAP:-podtap}
qemu=${QEMU:-qemu-system-x86_64}

# The guest configures its NICs from podtap's rendering of the pod network:
# here the test guest's podtap.* kernel arguments. A cloud-init guest would get
# `podtap render cloud-init --id ID` as its NoCloud network-config instead.
guest_net=$("$podtap" render guest-args --id "$id")

# virtio-net uses min(queues, vCPUs) queue pairs: give QEMU as many vCPUs as
# the largest TAP has queues.
# One vCPU per queue of the widest NIC (a guest uses min(queues, vCPUs) queue pairs).
smp=$("$podtap" list --json | jq -er --arg id "$id" '.[] | select(.id == $id) | .queues // 1')

vhost=()
[ "${VHOST:-0}" = 1 ] && vhost=(--vhost)

# podtap appends one `-netdev tap,id=netN,fds=...` + `-device virtio-net-pci,...`
# pair per NIC, with the pod interface's MAC and MTU.
exec "$podtap" exec --id "$id" --vmm qemu "${vhost[@]}" -- \
    "$qemu" -accel "${ACCEL:-tcg}" -m "${MEM:-256}" -smp "$smp" \
    -nographic -no-reboot \
    -kernel "$kernel" -initrd "$initrd" \
    -append "console=ttyS0 quiet panic=-1 $guest_net ${GUEST_APPEND:-}" \
    "$@"
