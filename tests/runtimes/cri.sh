#!/bin/bash
# Drive podtap through containerd's CRI plugin over gRPC (tests/runtimes/cri/cri.py):
# a private containerd 1.6 with CRI on, inside the node netns NODE and a private
# mount namespace, every path private to WORK. The pod sandbox image and the app
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

if [ "${1:-}" = --inner ]; then
    # In the private mount namespace and the node netns.
    shift
    W=$1; SCENARIO=$2
    export CRI_STUBS=$W/stubs
    # The pods' cgroups (cgroupfs, v1 here) under a parent of this run's own.
    export CRI_CGROUP_PARENT=/podtap-cri-${W##*/}
    CRI() { python3 "$HERE"/cri/cri.py "$W"/c.sock "$@"; }
    start_containerd() {
        containerd --config "$W"/config.toml >>"$W"/containerd.log 2>&1 8<&- 9<&- &
        echo $! >"$W"/containerd.pid
        for _ in $(seq 100); do
            [ -S "$W"/c.sock ] && CRI list-pods >/dev/null 2>&1 && return 0
            sleep 0.1
        done
        echo "containerd did not come up; containerd.log:" >&2
        tail -30 "$W"/containerd.log >&2
        return 1
    }
    stop_containerd() {
        local pid
        pid=$(cat "$W"/containerd.pid 2>/dev/null) || return 0
        # SIGTERM, then wait for it to be gone (SIGKILL after 10 s).
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null && echo "containerd ignored SIGTERM" >&2
        wait "$pid" 2>/dev/null || true
        rm -f "$W"/containerd.pid
    }
    cleanup() {
        # Whatever a failed step left: pods stopped and removed, containerd
        # stopped, then any shim or container process still recorded in WORK.
        if [ -e "$W"/containerd.pid ]; then
            for p in $(CRI list-pods 2>/dev/null | cut -d' ' -f1); do
                CRI stop-pod "$p" >/dev/null 2>&1 || true
                CRI remove-pod "$p" >/dev/null 2>&1 || true
            done
        fi
        stop_containerd
        for f in $(find "$W"/run -name init.pid -o -name shim.pid 2>/dev/null); do
            kill -9 "$(cat "$f")" 2>/dev/null || true
        done
        for d in /sys/fs/cgroup/*"$CRI_CGROUP_PARENT"; do
            [ -d "$d" ] && rmdir "$d" 2>/dev/null || true
        done
    }
    trap cleanup EXIT
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
mkdir -p "$W"/rootfs/bin "$W"/bin "$W"/net.d "$W"/state "$W"/ipam "$W"/cni-cache "$W"/img/blobs/sha256
cp /bin/busybox "$W"/rootfs/bin/busybox
for a in sh ip cat ls sleep; do ln -sf busybox "$W"/rootfs/bin/$a; done
cat >"$W"/rootfs/bin/links <<'S'
#!/bin/sh
for d in /sys/class/net/*; do n=${d##*/}; if [ -e $d/tun_flags ]; then echo TAP $n; else echo LINK $n; fi; done
S
chmod +x "$W"/rootfs/bin/links
for p in /usr/lib/cni/*; do ln -sf "$p" "$W"/bin/; done
ln -sf "$PODTAP" "$W"/bin/podtap
cat > "$W"/net.d/10-podtap.conflist <<J
{"cniVersion":"1.0.0","name":"ptcri","plugins":[
 {"type":"bridge","bridge":"ptcribr0","isGateway":true,"ipMasq":false,
  "ipam":{"type":"host-local","dataDir":"$W/ipam","ranges":[[{"subnet":"$SUBNET"}]]}},
 {"type":"podtap","mode":"tc","queues":1,"stateDir":"$W/state","podPolicy":{"modes":["bridge"]},
  "capabilities":{"io.kubernetes.cri.pod-annotations":true}}]}
J
# OCI image layout: one layer (the rootfs) and two images on it, each with its
# own config: the sandbox ("pause") image sleeps, the app image runs sh.
blob() { local d; d=$(sha256sum "$1" | cut -d' ' -f1); mv "$1" "$W/img/blobs/sha256/$d"; echo "$d"; }
tar -C "$W"/rootfs -cf "$W"/layer.tar .
LS=$(stat -c %s "$W"/layer.tar); LD=$(blob "$W"/layer.tar)
manifest() { # CMD-JSON REF -> one index entry
    printf '{"architecture":"amd64","os":"linux","config":{"Cmd":%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$1" "$LD" >"$W"/cfg
    local cs cd ms md
    cs=$(stat -c %s "$W"/cfg); cd=$(blob "$W"/cfg)
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' "$cd" "$cs" "$LD" "$LS" >"$W"/man
    ms=$(stat -c %s "$W"/man); md=$(blob "$W"/man)
    printf '{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}}' "$md" "$ms" "$2"
}
PAUSE=$(manifest '["/bin/sleep","2147483647"]' localhost/podtap-pause:test)
APP=$(manifest '["/bin/sh"]' localhost/podtap-busybox:test)
printf '{"schemaVersion":2,"manifests":[%s,%s]}' "$PAUSE" "$APP" >"$W"/img/index.json
echo '{"imageLayoutVersion":"1.0.0"}' >"$W"/img/oci-layout
tar -C "$W"/img -cf "$W"/image.tar oci-layout index.json blobs
cat > "$W"/config.toml <<J
version = 2
root = "$W/lib"
state = "$W/run"
[grpc]
  address = "$W/c.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/podtap-pause:test"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # The pause container's oom_score_adj -998 is refused here: keep at most ours.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$W/bin"
    conf_dir = "$W/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "$W/runc"
        SystemdCgroup = false
J
# /run/netns (where the CRI plugin mounts pod netns) and /run/containerd (shim
# sockets, whatever the config says) are private tmpfs; the CNI dirs and
# libcni's result cache are WORK's. The node netns is reached through fd 9.
unshare -m --propagation private bash -c "
set -e
mkdir -p /run/netns /run/containerd /etc/cni/net.d /opt/cni/bin /var/lib/cni
mount -t tmpfs tmpfs /run/netns
mount -t tmpfs tmpfs /run/containerd
mount --bind $W/net.d /etc/cni/net.d
mount --bind $W/bin /opt/cni/bin
mount --bind $W/cni-cache /var/lib/cni
exec nsenter --net=/proc/self/fd/9 bash $0 --inner $W $SCENARIO
" 9<"/run/netns/$NODE"
