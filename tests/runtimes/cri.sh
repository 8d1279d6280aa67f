#!/bin/bash
# Drive podtap through containerd's CRI plugin over gRPC (tests/runtimes/cri/cri.py):
# a private containerd 1.6 with CRI on (tests/runtimes/cri-env.sh), inside the node
# netns NODE and a private mount namespace, every path private to WORK. The pod sandbox image and the app
# image are built here from /bin/busybox and imported into the k8s.io namespace
# (no registry). The conflist chains bridge + podtap, and podtap declares the
# capability io.kubernetes.cri.pod-annotations.
# usage: cri.sh WORK NODE PODTAP SUBNET SCENARIO
#   lifecycle  RunPodSandbox, an app container in the pod, StopPodSandbox twice, RemovePodSandbox
#   restart    RunPodSandbox, containerd stopped and started again, then Stop/Remove
#   bridge     RunPodSandbox with the pod annotation io.podtap.mode=bridge, then Stop/Remove
#   badmode    RunPodSandbox with io.podtap.mode=no-such-mode: fails, nothing left
# Output: one fact a line (POD, NETNS, PODNS <name> <kind>, CHECKPOINT <file> <mode> created=<kinds>,
# CTR TAP|LINK <name>, HELD <name> <kind>, CHECKPOINTS-LEFT <n>, PODS-LEFT <n>, ...).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE"/cri-env.sh

if [ "${1:-}" = --inner ]; then
    # In the private mount namespace and the node netns.
    shift
    W=$1; SCENARIO=$2
    start_containerd() { cri_start "$W"; }
    stop_containerd() { cri_stop "$W"; }
    trap 'cri_cleanup "$W"' EXIT
    trap 'exit 1' TERM INT
    # Links of a netns by path: name and kind (tun for a TAP).
    links() {
        nsenter --net="$1" ip -d -j link show | python3 -c '
import json, sys
for l in json.load(sys.stdin):
    print(l["ifname"], l.get("linkinfo", {}).get("info_kind", "-"))'
    }
    checkpoints() {
        find "$W"/state -name '*.json' | while read -r f; do
            printf 'CHECKPOINT %s %s\n' "$f" "$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
mode = ((d.get("description") or {}).get("attachment") or {}).get("mode", "-")
print(mode, "created=" + ",".join(c["kind"] for c in d.get("created", [])))' "$f")"
        done
    }
    start_containerd
    ctr --address "$W"/c.sock -n k8s.io image import "$W"/image.tar >/dev/null
    ANN=()
    case $SCENARIO in
        bridge) ANN=(io.podtap.mode=bridge) ;;
        badmode) ANN=(io.podtap.mode=no-such-mode) ;;
    esac
    if [ "$SCENARIO" = badmode ]; then
        if CRI run-pod ptcri-bad uid-bad default "${ANN[@]}" 2>"$W"/run-pod.err; then
            echo "RUN-POD succeeded"
        else
            echo "RUN-POD failed"
            grep -o 'plugin type="podtap"[^:]*' "$W"/run-pod.err | head -1 | sed 's/^/ERROR /'
        fi
        echo "CHECKPOINTS-LEFT $(find "$W"/state -name '*.json' | wc -l)"
        echo "PODS-LEFT $(CRI list-pods | wc -l)"
        echo "NETNS-LEFT $(find /run/netns -mindepth 1 | wc -l)"
        exit 0
    fi
    POD=$(CRI run-pod ptcri-$SCENARIO uid-$SCENARIO default "${ANN[@]}")
    echo "POD $POD"
    echo "STATE $(CRI pod-state "$POD")"
    NETNS=$(CRI pod-netns "$POD")
    echo "NETNS $NETNS"
    # Hold the pod netns open, to look into it after containerd removed its file.
    exec 8<"$NETNS"
    links "$NETNS" | sed 's/^/PODNS /'
    checkpoints
    if [ "$SCENARIO" = lifecycle ]; then
        # An app container beside the pause container: it joins the pod netns.
        C=$(CRI create "$POD" app localhost/podtap-busybox:test /bin/sleep 600)
        CRI start "$C"
        CRI exec-sync "$C" /bin/links | sed 's/^/CTR /'
        CPID=$(cat "$W"/run/io.containerd.runtime.v2.task/k8s.io/"$C"/init.pid)
        if [ "$(stat -L -c %i /proc/"$CPID"/ns/net)" = "$(stat -L -c %i "$NETNS")" ]; then
            echo "CTR-NETNS same"
        else
            echo "CTR-NETNS different"
        fi
    fi
    if [ "$SCENARIO" = restart ]; then
        stop_containerd
        echo "CONTAINERD stopped"
        start_containerd
        echo "CONTAINERD restarted"
        echo "STATE $(CRI pod-state "$POD")"
        links "$NETNS" | sed 's/^/RESTARTED-PODNS /'
    fi
    CRI stop-pod "$POD"
    echo "STOP ok"
    echo "STATE $(CRI pod-state "$POD")"
    # podtap's DEL leaves its TAP to a child that deletes it just after the
    # bridge plugin has deleted the veth, holding the netns lock until then.
    flock -w 10 /proc/$$/fd/8 true
    links /proc/$$/fd/8 | sed 's/^/HELD /'
    echo "CHECKPOINTS-LEFT $(find "$W"/state -name '*.json' | wc -l)"
    echo "NETNS-FILE $( [ -e "$NETNS" ] && echo present || echo gone)"
    CRI stop-pod "$POD"
    echo "STOP2 ok"
    CRI remove-pod "$POD"
    echo "REMOVE ok"
    echo "PODS-LEFT $(CRI list-pods | wc -l)"
    echo "NETNS-LEFT $(find /run/netns -mindepth 1 | wc -l)"
    exec 8<&-
    exit 0
fi

W=$1; NODE=$2; PODTAP=$3; SUBNET=$4; SCENARIO=$5
cri_env "$W" "$PODTAP"
cri_conflist "$W"/net.d/10-podtap.conflist ptcri ptcribr0 "$SUBNET" "$W"/ipam \
    ',{"type":"podtap","mode":"tc","queues":1,"stateDir":"'"$W"'/state","podPolicy":{"modes":["bridge"]},
  "capabilities":{"io.kubernetes.cri.pod-annotations":true}}'
cri_private "$W" "$NODE" "$0" --inner "$W" "$SCENARIO"
