#!/bin/bash
# Run podman 4.3 (root) with every path private to WORK: storage root and
# runroot, runc's state root, its tmp dir, file locks, build scratch space (TMPDIR), the events
# log; vfs storage (no overlay mount of the host's). So the host's podman
# state can neither change the result nor be changed by it, and runs in
# parallel do not collide. The remaining arguments are podman's.
# usage: podman-private.sh WORK PODMAN_ARGS...
set -euo pipefail
W=$1; shift
# `podman build` writes containers/image's blob info cache to
# /var/lib/containers/cache whatever --root says (as root nothing points it
# elsewhere), and makes /var/lib/containers on a host that has none. So a
# build runs in a mount namespace of its own, where /var/lib is an overlay
# whose writes land under WORK: the host's /var/lib is never written. (The
# other commands the tests run write nothing there; they run as they are, so
# a detached container's mounts stay visible to the next podman.)
if [ "${1:-}" = build ] && [ -z "${PODMAN_PRIVATE_VARLIB:-}" ]; then
    exec env PODMAN_PRIVATE_VARLIB=1 unshare --mount --propagation private -- bash "$0" "$W" "$@"
fi
if [ -n "${PODMAN_PRIVATE_VARLIB:-}" ]; then
    mkdir -p "$W"
    over=$(mktemp -d "$W/varlib.XXXXXX")
    mkdir "$over/upper" "$over/work"
    mount -t overlay podman-private -o "lowerdir=/var/lib,upperdir=$over/upper,workdir=$over/work" /var/lib
fi
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
