#!/bin/bash
# Run podman 4.3 (root) with every path private to WORK: storage root and
# runroot, runc's state root, its tmp dir, file locks, build scratch space (TMPDIR), the events
# log; vfs storage (no overlay mount of the host's). So the host's podman
# state can neither change the result nor be changed by it, and runs in
# parallel do not collide. The remaining arguments are podman's.
# usage: podman-private.sh WORK PODMAN_ARGS...
set -euo pipefail
W=$1; shift
mkdir -p "$W"/root "$W"/runroot "$W"/tmp
if [ ! -e "$W"/containers.conf ]; then
    cat >"$W"/containers.conf <<J
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$W/events.log"
tmp_dir = "$W/tmp"
image_copy_tmp_dir = "$W/tmp"
# File locks under tmp_dir: the host's /dev/shm/libpod_lock (another
# num_locks, another podman's containers) can neither fail nor see this run.
lock_type = "file"
num_locks = 64
J
fi
export CONTAINERS_CONF=$W/containers.conf
export TMPDIR=$W/tmp
exec podman --root "$W"/root --runroot "$W"/runroot --storage-driver vfs \
    --runtime runc --runtime-flag "root=$W/runc" --cgroup-manager cgroupfs \
    --events-backend file "$@"
