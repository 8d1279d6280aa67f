#!/usr/bin/env bash
# Firecracker from a config file. Firecracker opens each TAP by name,
# single-queue, so it runs inside the pod netns (`podtap exec --enter-netns`;
# with the jailer, pass `--netns <the pod netns path>` to it instead).
# `podtap render firecracker` gives the `network-interfaces` part; this script
# adds boot source and machine config around it.
#
# usage: firecracker-config.sh ID VMLINUX INITRD [CONFIG_FILE]
# env:   PODTAP (podtap binary), FIRECRACKER (firecracker), MEM_MIB (256),
#        VCPUS (1), GUEST_APPEND (more kernel arguments).
# needs: jq; an uncompressed vmlinux (Firecracker does not boot bzImage on
# x86), /dev/kvm, and attach without --queues (Firecracker is single-queue).
set -euo pipefail

if [ $# -lt 3 ]; then
    echo "usage: $0 ID VMLINUX INITRD [CONFIG_FILE]" >&2
    exit 2
fi
id=$1 kernel=$2 initrd=$3
config=${4:-$(mktemp --suffix=.json)}
podtap=${PODTAP:-podtap}
fc=${FIRECRACKER:-firecracker}

# {"network-interfaces": [{"iface_id", "host_dev_name", "guest_mac"}, ...]}
net=$("$podtap" render firecracker --id "$id")
guest_net=$("$podtap" render guest-args --id "$id")

jq -n --argjson net "$net" \
    --arg kernel "$kernel" --arg initrd "$initrd" \
    --arg args "console=ttyS0 reboot=k panic=1 quiet $guest_net ${GUEST_APPEND:-}" \
    --argjson mem "${MEM_MIB:-256}" --argjson vcpus "${VCPUS:-1}" \
    '{
        "boot-source": {"kernel_image_path": $kernel, "initrd_path": $initrd, "boot_args": $args},
        "drives": [],
        "machine-config": {"vcpu_count": $vcpus, "mem_size_mib": $mem}
     } + $net' >"$config"
echo "firecracker-config: wrote $config" >&2

exec "$podtap" exec --id "$id" --enter-netns -- "$fc" --no-api --config-file "$config"
