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
#   portforward  first a pod in tc mode (the conflist's) and PortForward to its port
#              8080 (nothing there: it fails), stopped and removed; then a pod with
#              io.podtap.mode=l3, the test guest booted in its netns by
#              vmm-examples/qemu-by-name.sh ($GUEST_KERNEL, $GUEST_INITRD;
#              podtap.httpd=8080), PortForward to 8080 for / and /cgi-bin/ip,
#              QEMU killed, then Stop/Remove
# Output: one fact a line (POD, NETNS, PODNS <name> <kind>, CHECKPOINT <file> <mode> created=<kinds>,
# CTR TAP|LINK <name>, HELD <name> <kind>, CHECKPOINTS-LEFT <n>, PODS-LEFT <n>, ...;
# portforward: TC-PF-EXIT <rc>, TC-PF-ERROR <message>, NFT <family> <table>, GUEST READY,
# PF-EXIT <path> <rc>, PF-STATUS <path> <status line>, PF-BODY <path> <line>,
# HELD-NFT <table>).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE"/cri-env.sh

if [ "${1:-}" = --inner ]; then
    # In the private mount namespace and the node netns.
    shift
    W=$1; SCENARIO=$2
    start_containerd() { cri_start "$W"; }
    stop_containerd() { cri_stop "$W"; }
    # The guest's QEMU (portforward) goes first: it holds the pod's TAP.
    stop_qemu() {
        local pid
        pid=$(cat "$W"/qemu.pid 2>/dev/null) || return 0
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        rm -f "$W"/qemu.pid
    }
    trap 'stop_qemu; cri_cleanup "$W"' EXIT
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
    # port-forward POD PORT PATH PREFIX: PREFIX-EXIT <rc>, then the answer
    # (PREFIX-STATUS, PREFIX-BODY) or the error channel's message (PREFIX-ERROR).
    port_forward() {
        local rc=0
        CRI port-forward "$1" "$2" "$3" >"$W"/pf.out 2>"$W"/pf.err || rc=$?
        echo "$4-EXIT $3 $rc"
        tr -d '\r' <"$W"/pf.out | awk -v p="$4" -v path="$3" '
            NR == 1 { print p "-STATUS " path " " $0; next }
            body { print p "-BODY " path " " $0 }
            $0 == "" { body = 1 }'
        tr -d '\r' <"$W"/pf.err | sed -n "/./s|^|$4-ERROR $3 |p"
    }
    if [ "$SCENARIO" = portforward ]; then
        # tc mode: the pod netns's 127.0.0.1 is its own, nothing listens there.
        TCPOD=$(CRI run-pod ptcri-tc uid-tc default)
        echo "TC-POD $TCPOD"
        checkpoints | sed 's/^/TC-/'
        port_forward "$TCPOD" 8080 / TC-PF
        CRI stop-pod "$TCPOD"
        CRI remove-pod "$TCPOD"
        echo "TC-REMOVE ok"
        ANN=(io.podtap.mode=l3)
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
    if [ "$SCENARIO" = portforward ]; then
        nsenter --net="$NETNS" nft list tables | sed 's/^table /NFT /'
        ID=$("$W"/bin/podtap list --json --state-dir "$W"/state |
            jq -r --arg p "$POD" '.[] | select(.id | startswith($p)) | .id')
        echo "ATTACHMENT $ID"
        PODTAP="$W"/bin/podtap PODTAP_STATE_DIR="$W"/state \
            GUEST_APPEND="podtap.httpd=8080 podtap.hold=40" \
            "$HERE"/../../vmm-examples/qemu-by-name.sh "$ID" "$GUEST_KERNEL" "$GUEST_INITRD" \
            </dev/null >"$W"/console.log 2>"$W"/qemu.err 8<&- 9<&- &
        echo $! >"$W"/qemu.pid
        for _ in $(seq 300); do
            grep -q '^PODTAP-READY' "$W"/console.log && break
            kill -0 "$(cat "$W"/qemu.pid)" 2>/dev/null || break
            sleep 0.5
        done
        if grep -q '^PODTAP-READY' "$W"/console.log; then
            echo "GUEST READY"
        else
            echo "GUEST NOT-READY"
        fi
        port_forward "$POD" 8080 / PF | tee -a "$W"/pf.log
        port_forward "$POD" 8080 /cgi-bin/ip PF | tee -a "$W"/pf.log
        if grep -q '^PF-EXIT .* [1-9]' "$W"/pf.log; then
            # What the pod netns made of it, on stderr.
            {
                echo "--- port-forward failed; pod netns:"
                nsenter --net="$NETNS" nft list ruleset
                nsenter --net="$NETNS" conntrack -L 2>&1
                nsenter --net="$NETNS" ip -d addr
                nsenter --net="$NETNS" ip route show table all
                sysctl_tap=$(nsenter --net="$NETNS" sysctl net.ipv4.conf.tap_eth0.route_localnet 2>&1)
                echo "$sysctl_tap"
                echo "--- containerd.log:"
                tail -20 "$W"/containerd.log
            } >&2
        fi
        stop_qemu
        echo "QEMU stopped"
        tr -d '\r' <"$W"/console.log | grep '^PODTAP-' | sed 's/^/CONSOLE /'
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
    if [ "$SCENARIO" = portforward ]; then
        nsenter --net=/proc/$$/fd/8 nft list tables | sed 's/^table /HELD-NFT /'
    fi
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
    ',{"type":"podtap","mode":"tc","queues":1,"stateDir":"'"$W"'/state","podPolicy":{"modes":["bridge","l3"]},
  "capabilities":{"io.kubernetes.cri.pod-annotations":true}}'
if [ "$SCENARIO" = portforward ]; then
    # A pod with a default route (as a cluster's bridge conflist gives it): the
    # guest's only way back to 169.254.0.1, port-forward's SNAT source (podtap
    # gives a routed guest no route of its own to it).
    sed -i 's/"isGateway":true,/"isGateway":true,"isDefaultGateway":true,/' "$W"/net.d/10-podtap.conflist
fi
cri_private "$W" "$NODE" "$0" --inner "$W" "$SCENARIO"
