#!/bin/bash
# Run one container with podman 4.3 (CNI backend, runc) inside the node netns
# NODE, with every path private to WORK (tests/runtimes/podman-env.sh).
# The container prints its links and which of them are TAPs.
# usage: podman-cni.sh WORK NODE PODTAP SUBNET [MODE]  (MODE: podtap "mode", default tc;
# "hooks": the conflist is bridge alone and podtap runs from hooks/oci/*.json via --hooks-dir)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE"/podman-env.sh
W=$1; NODE=$2; PODTAP=$3; SUBNET=$4; MODE=${5:-tc}
PODTAP_PLUGIN=',{"type":"podtap","mode":"'"$MODE"'","queues":1,"stateDir":"'"$W"'/state"}'
HOOKS=""
if [ "$MODE" = hooks ]; then
    PODTAP_PLUGIN=""
    mkdir -p "$W"/hooks.d
    for h in "$HERE"/../../hooks/oci/*.json; do
        jq --arg p "$PODTAP" --arg s "PODTAP_STATE_DIR=$W/state" \
            '.hook.path = $p | .hook.env = [$s]' "$h" >"$W/hooks.d/$(basename "$h")"
    done
    HOOKS="--hooks-dir $W/hooks.d"
fi
podman_env "$W" "$PODTAP" "$SUBNET" "$PODTAP_PLUGIN"
INNER='for d in /sys/class/net/*; do n=${d##*/}; if [ -e $d/tun_flags ]; then echo TAP $n; else echo LINK $n; fi; done'
cat > "$W"/run.sh <<S
exec $P $HOOKS run --rm --annotation io.podtap.enable=true --network ptrt --rootfs $W/rootfs /bin/sh -c '$INNER'
S
run_private "$NODE" "$W"/run.sh
