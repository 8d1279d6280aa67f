# Sourced by tests/runtimes/cri.sh and benches/podstart.sh: a private containerd
# 1.6 with CRI on, every path private to WORK, driven over gRPC by cri/cri.py.
#
# Outside (in the host's mount namespace):
#   cri_env WORK PODTAP             rootfs and CNI bin dir (cri_rootfs below),
#                                   the two images in WORK/image.tar, WORK/config.toml
#                                   (default handler runc, CNI conf dir WORK/net.d)
#   cri_conflist FILE NAME BRIDGE SUBNET IPAM_DIR [PLUGIN_JSON]
#                                   a conflist: bridge + host-local, then PLUGIN_JSON
#                                   (',{...}' or nothing) at the chain's end
#   cri_handler WORK NAME CONF_DIR  one more runtime handler (runc) whose pods get
#                                   the CNI chain of CONF_DIR
#   cri_private WORK NODE ARGS...   run `bash ARGS...` in a private mount namespace
#                                   (private /run/netns, /run/containerd, CNI dirs and
#                                   libcni cache) and the node netns NODE
# Inside (after cri_private): CRI ARGS... (cri.py on WORK's socket),
# cri_start WORK, cri_stop WORK, cri_cleanup WORK (pods stopped and removed,
# containerd stopped, any shim or pod process left killed, cgroups removed).
# The pods' cgroups (cgroupfs) live under /podtap-cri-<basename of WORK>.
CRI_ENV_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

cri_env() {
    local W=$1 PODTAP=$2
    mkdir -p "$W"/cni-cache
    cri_rootfs "$W" "$PODTAP"
    cri_images "$W"
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
J
    cri_handler "$W" runc ""
}

# The busybox rootfs (sh ip cat ls sleep, and `links`: a line per link, TAP or
# LINK, and its name) in WORK/rootfs, the CNI bin dir WORK/bin (Debian's plugins
# + PODTAP), and the empty dirs WORK/net.d, state, ipam, img/blobs/sha256.
# Also used by ctr-cni.sh.
cri_rootfs() {
    local W=$1 PODTAP=$2 a p
    mkdir -p "$W"/rootfs/bin "$W"/bin "$W"/net.d "$W"/state "$W"/ipam "$W"/img/blobs/sha256
    cp /bin/busybox "$W"/rootfs/bin/busybox
    for a in sh ip cat ls sleep; do ln -sf busybox "$W"/rootfs/bin/$a; done
    cat >"$W"/rootfs/bin/links <<'S'
#!/bin/sh
for d in /sys/class/net/*; do n=${d##*/}; if [ -e $d/tun_flags ]; then echo TAP $n; else echo LINK $n; fi; done
S
    chmod +x "$W"/rootfs/bin/links
    for p in /usr/lib/cni/*; do ln -sf "$p" "$W"/bin/; done
    ln -sf "$PODTAP" "$W"/bin/podtap
}

# OCI image layout: one layer (the rootfs) and two images on it, each with its
# own config: the sandbox ("pause") image sleeps, the app image runs sh.
cri_images() {
    local W=$1 LS LD PAUSE APP
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
}

cri_conflist() {
    local FILE=$1 NAME=$2 BRIDGE=$3 SUBNET=$4 IPAM=$5 PLUGIN=${6:-}
    cat > "$FILE" <<J
{"cniVersion":"1.0.0","name":"$NAME","plugins":[
 {"type":"bridge","bridge":"$BRIDGE","isGateway":true,"ipMasq":false,
  "ipam":{"type":"host-local","dataDir":"$IPAM","ranges":[[{"subnet":"$SUBNET"}]]}}
 $PLUGIN]}
J
}

cri_handler() {
    local W=$1 NAME=$2 CONF=$3
    cat >> "$W"/config.toml <<J
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$NAME]
      runtime_type = "io.containerd.runc.v2"
J
    if [ -n "$CONF" ]; then
        cat >> "$W"/config.toml <<J
      cni_conf_dir = "$CONF"
      cni_max_conf_num = 1
J
    fi
    cat >> "$W"/config.toml <<J
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.$NAME.options]
        BinaryName = "$(command -v runc)"
        Root = "$W/runc"
        SystemdCgroup = false
J
}

# /run/netns (where the CRI plugin mounts pod netns) and /run/containerd (shim
# sockets, whatever the config says) are private tmpfs; the CNI dirs and
# libcni's result cache are WORK's. The node netns is reached through fd 9.
cri_private() {
    local W=$1 NODE=$2
    shift 2
    unshare -m --propagation private bash -c '
set -e
W=$1; shift
mkdir -p /run/netns /run/containerd /etc/cni/net.d /opt/cni/bin /var/lib/cni
mount -t tmpfs tmpfs /run/netns
mount -t tmpfs tmpfs /run/containerd
mount --bind "$W"/net.d /etc/cni/net.d
mount --bind "$W"/bin /opt/cni/bin
mount --bind "$W"/cni-cache /var/lib/cni
exec nsenter --net=/proc/self/fd/9 bash "$@"
' cri_private "$W" "$@" 9<"/run/netns/$NODE"
}

CRI() { CRI_STUBS=$CRI_W/stubs python3 "$CRI_ENV_HERE"/cri/cri.py "$CRI_W"/c.sock "$@"; }

cri_start() {
    local W=$1
    CRI_W=$W
    export CRI_CGROUP_PARENT=/podtap-cri-${W##*/}
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

cri_stop() {
    local W=$1 pid
    pid=$(cat "$W"/containerd.pid 2>/dev/null) || return 0
    # SIGTERM, then wait for it to be gone (SIGKILL after 10 s).
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null && echo "containerd ignored SIGTERM" >&2
    wait "$pid" 2>/dev/null || true
    rm -f "$W"/containerd.pid
}

# Whatever a failed step left: pods stopped and removed, containerd stopped,
# then any shim or container process still recorded in WORK.
cri_cleanup() {
    local W=$1 p f d
    CRI_W=$W
    if [ -e "$W"/containerd.pid ]; then
        for p in $(CRI list-pods 2>/dev/null | cut -d' ' -f1); do
            CRI stop-pod "$p" >/dev/null 2>&1 || true
            CRI remove-pod "$p" >/dev/null 2>&1 || true
        done
    fi
    cri_stop "$W"
    for f in $(find "$W"/run -name init.pid -o -name shim.pid 2>/dev/null); do
        kill -9 "$(cat "$f")" 2>/dev/null || true
    done
    cri_cgroups_rm "/podtap-cri-${W##*/}"
}

# Remove the cgroup PARENT and every cgroup under it (a pod's own is left when
# its shim was killed before `runc delete`), deepest first, after killing what
# still runs in them (only this run's pods live there: a `runc init` caught
# half-way has no pid file to find it by).
cri_cgroups_rm() {
    local d
    for _ in 1 2 3 4 5; do
        for d in /sys/fs/cgroup/*"$1"; do
            [ -d "$d" ] || continue
            find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u | xargs -r kill -9 2>/dev/null
            find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
        done
        ls -d /sys/fs/cgroup/*"$1" >/dev/null 2>&1 || return 0
        sleep 0.2
    done
}
