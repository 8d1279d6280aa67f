# Sourced by the podman scripts: a podman 4.3 (CNI backend, runc) whose every
# path is private to WORK: root, runroot, tmp dir, file
# locks, events log, CNI conf and
# plugin dirs; run_private (below) adds a private /run/netns and /var/lib (libcni's
# result cache). The host's podman state can neither change a result nor be changed.
# podman_env WORK PODTAP SUBNET PODTAP_PLUGIN_JSON   (PODTAP_PLUGIN_JSON: ',{...}' or '')
# sets P (the podman command line) and exports CONTAINERS_CONF.
podman_env() {
    local W=$1 PODTAP=$2 SUBNET=$3 PLUGIN=$4
    mkdir -p "$W"/rootfs/bin "$W"/bin "$W"/net.d "$W"/state "$W"/ipam "$W"/root "$W"/runroot "$W"/tmp
    cp /bin/busybox "$W"/rootfs/bin/busybox
    for a in sh ip cat ls sleep; do ln -sf busybox "$W"/rootfs/bin/$a; done
    for p in /usr/lib/cni/*; do ln -sf "$p" "$W"/bin/; done
    ln -sf "$PODTAP" "$W"/bin/podtap
    cat > "$W"/net.d/podtap.conflist <<J
{"cniVersion":"1.0.0","name":"ptrt","plugins":[
 {"type":"bridge","bridge":"ptrtbr0","isGateway":true,"ipMasq":false,
  "ipam":{"type":"host-local","dataDir":"$W/ipam","ranges":[[{"subnet":"$SUBNET"}]]}}
 $PLUGIN]}
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
events_logfile_path = "$W/events.log"
tmp_dir = "$W/tmp"
# File locks under tmp_dir: the host's /dev/shm/libpod_lock (another
# num_locks, another podman's containers) can neither fail nor see this run.
lock_type = "file"
num_locks = 64
J
    export CONTAINERS_CONF=$W/containers.conf
    P="podman --root $W/root --runroot $W/runroot --runtime runc --network-backend cni --cgroup-manager cgroupfs --events-backend file"
}

# run_private NODE SCRIPT: run bash SCRIPT in a private mount namespace (private
# /run/netns and /var/lib tmpfs) and in the node netns NODE, reached through fd 9.
run_private() {
    local NODE=$1 SCRIPT=$2
    unshare -m --propagation private bash -c "
set -e
mkdir -p /run/netns
mount -t tmpfs tmpfs /run/netns
# libcni caches every result under /var/lib/cni: a private tmpfs over /var/lib
# keeps the host's cache untouched (podman's own state is under WORK).
mount -t tmpfs tmpfs /var/lib
exec nsenter --net=/proc/self/fd/9 bash '$SCRIPT'
" 9<"/run/netns/$NODE"
}
