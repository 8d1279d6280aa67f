#!/bin/bash
# Run one container with podman 4.3 (CNI backend, runc) inside the node netns
# NODE, in a private mount namespace, with every path private to WORK: root,
# runroot, tmp dir, locks and the CNI cache, so the host's podman state can
# neither change the result nor be changed by it.
# The container prints its links and which of them are TAPs.
# usage: podman-cni.sh WORK NODE PODTAP SUBNET [MODE]  (MODE: podtap "mode", default tc;
# "hooks": the conflist is bridge alone and podtap runs from hooks/oci/*.json via --hooks-dir)
set -euo pipefail
W=$1; NODE=$2; PODTAP=$3; SUBNET=$4; MODE=${5:-tc}
mkdir -p "$W"/rootfs/bin "$W"/bin "$W"/net.d "$W"/state "$W"/ipam "$W"/root "$W"/runroot "$W"/tmp
cp /bin/busybox "$W"/rootfs/bin/busybox
for a in sh ip cat ls sleep; do ln -sf busybox "$W"/rootfs/bin/$a; done
for p in /usr/lib/cni/*; do ln -sf "$p" "$W"/bin/; done
ln -sf "$PODTAP" "$W"/bin/podtap
PODTAP_PLUGIN=',{"type":"podtap","mode":"'"$MODE"'","queues":1,"stateDir":"'"$W"'/state"}'
HOOKS=""
if [ "$MODE" = hooks ]; then
    PODTAP_PLUGIN=""
    mkdir -p "$W"/hooks.d
    for h in "$(dirname "$0")"/../../hooks/oci/*.json; do
        jq --arg p "$PODTAP" --arg s "PODTAP_STATE_DIR=$W/state" \
            '.hook.path = $p | .hook.env = [$s]' "$h" >"$W/hooks.d/$(basename "$h")"
    done
    HOOKS="--hooks-dir $W/hooks.d"
fi
cat > "$W"/net.d/podtap.conflist <<J
{"cniVersion":"1.0.0","name":"ptrt","plugins":[
 {"type":"bridge","bridge":"ptrtbr0","isGateway":true,"ipMasq":false,
  "ipam":{"type":"host-local","dataDir":"$W/ipam","ranges":[[{"subnet":"$SUBNET"}]]}}
 $PODTAP_PLUGIN]}
J
cat > "$W"/containers.conf <<J
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[network]
network_backend = "cni"
cni_plugin_dirs = ["$W/bin"]
network_config_dir = "$W/net.d"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "$W/tmp"
# File locks under tmp_dir: the host's /dev/shm/libpod_lock (another
# num_locks, another podman's containers) can neither fail nor see this run.
lock_type = "file"
num_locks = 64
J
export CONTAINERS_CONF=$W/containers.conf
P="podman --root $W/root --runroot $W/runroot --runtime runc --network-backend cni --cgroup-manager cgroupfs --events-backend file $HOOKS"
INNER='for d in /sys/class/net/*; do n=${d##*/}; if [ -e $d/tun_flags ]; then echo TAP $n; else echo LINK $n; fi; done'
# The node netns is reached through fd 9: /run/netns is a private tmpfs inside.
unshare -m --propagation private bash -c "
set -e
mkdir -p /run/netns
mount -t tmpfs tmpfs /run/netns
# libcni caches every result under /var/lib/cni: a private tmpfs over /var/lib
# keeps the host's cache untouched (podman's own state is under WORK).
mount -t tmpfs tmpfs /var/lib
exec nsenter --net=/proc/self/fd/9 $P run --rm --annotation io.podtap.enable=true --network ptrt --rootfs $W/rootfs /bin/sh -c '$INNER'
" 9<"/run/netns/$NODE"
