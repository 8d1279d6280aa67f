#!/bin/bash
# Run a system-mode libvirtd (QEMU driver) the way KubeVirt's virt-launcher
# does: inside the pod's network namespace. It also runs in a private mount
# namespace in which every directory libvirtd writes is a bind of a directory
# under WORK, so the host's libvirt state (but its config, copied) is never
# read or written and parallel runs do not collide (/sys is the pod netns's
# sysfs, as in a pod):
#   WORK/etc   -> /etc/libvirt        (a copy of the package's config, edited below)
#   WORK/run   -> /run/libvirt        (sockets, domain status; /var/run is /run on
#                                      Debian. /run itself is a private tmpfs, so
#                                      no /run/libvirt is made on the host and
#                                      libvirtd does not see the host's D-Bus)
#   WORK/lib   -> /var/lib/libvirt
#   WORK/log   -> /var/log/libvirt    (QEMU's own log: WORK/log/qemu/NAME.log)
#   WORK/cache -> /var/cache/libvirt  (QEMU capabilities cache)
# Clients reach it from outside through WORK/run/libvirt-sock:
#   virsh -c "qemu:///system?socket=WORK/run/libvirt-sock"
# libvirtd runs in the foreground (exec: this script's pid becomes libvirtd's);
# its log goes to stderr.
#
# usage: libvirtd.sh WORK NETNS_PATH
set -euo pipefail
W=$1; NETNS=$2
case $W in /run/* | /var/run/*) echo "libvirtd.sh: WORK must not be under /run" >&2; exit 2 ;; esac
if [ ! -d /etc/libvirt ] || ! command -v libvirtd >/dev/null; then
    echo "libvirtd.sh: libvirt is not installed (tests/install-deps.sh)" >&2
    exit 2
fi
for d in /var/lib/libvirt /var/log/libvirt /var/cache/libvirt; do
    [ -d $d ] || { echo "libvirtd.sh: $d is missing (libvirt-daemon-system)" >&2; exit 2; }
done
mkdir -p "$W"/run "$W"/lib "$W"/log "$W"/cache
rm -rf "$W"/etc
cp -a /etc/libvirt "$W"/etc
# No network definitions: the package's "default" network (virbr0, dnsmasq)
# must never come up in the pod netns.
rm -rf "$W"/etc/qemu/networks
cat >>"$W"/etc/libvirtd.conf <<'EOF'

# podtap test (tests/libvirt/libvirtd.sh): only root on this socket, no polkit.
unix_sock_group = "root"
unix_sock_ro_perms = "0700"
unix_sock_rw_perms = "0700"
unix_sock_admin_perms = "0700"
auth_unix_ro = "none"
auth_unix_rw = "none"
log_outputs = "3:stderr"
EOF
cat >>"$W"/etc/qemu.conf <<'EOF'

# podtap test (tests/libvirt/libvirtd.sh): virt-launcher runs QEMU as its own
# user with no privileges; this test runs it as root (the test is root).
user = "root"
group = "root"
# Off: with it, libvirt chowns the guest kernel and initramfs (the shared
# test-guest cache) and, with remember_owner, writes trusted.libvirt.*
# xattrs on them: files outside this run's directories.
dynamic_ownership = 0
remember_owner = 0
# Off: no AppArmor/SELinux here, and the test checks the network, not confinement.
security_driver = "none"
# Off: with no systemd-machined to ask, libvirt would create machine/*.libvirt-qemu
# directories in the host's own cgroup tree, outside this run's directories.
cgroup_controllers = [ ]
# QEMU's stdout/stderr go straight to WORK/log/qemu/NAME.log: no virtlogd,
# which would be a second daemon with its own sockets and state.
stdio_handler = "file"
EOF
# Enter the pod netns first: /run (where /run/netns lives) is a private tmpfs
# inside the mount namespace. WORK must not be under /run.
exec nsenter --net="$NETNS" unshare -m --propagation private bash -c '
set -e
W=$1
mount --bind "$W/etc" /etc/libvirt
# sysfs of the pod netns, as in a pod (and as `ip netns exec` does).
mount -t sysfs sysfs /sys
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir /run/libvirt
mount --bind "$W/run" /run/libvirt
mount --bind "$W/lib" /var/lib/libvirt
mount --bind "$W/log" /var/log/libvirt
mount --bind "$W/cache" /var/cache/libvirt
exec libvirtd --pid-file "$W/libvirtd.pid"
' libvirtd-sh "$W"
