#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian machine (run as root).
# Idempotent: only calls apt-get when something is missing.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1 || [ -e "$1" ]; }
have ip || need+=(iproute2)
have jq || need+=(jq)
have qemu-system-x86_64 || need+=(qemu-system-x86)
have /usr/lib/cni/bridge || need+=(containernetworking-plugins)
have /bin/busybox || need+=(busybox-static)
have cpio || need+=(cpio)
have runc || need+=(runc)
have podman || need+=(podman)
have containerd || need+=(containerd)
have setpriv || need+=(util-linux)
have python3 || need+=(python3)
have /usr/bin/time || need+=(time)
have gcc || need+=(gcc)
have iperf3 || need+=(iperf3)
have ping || need+=(iputils-ping)
# The routed mode's tests (tests/routed.rs, the CRI port-forward): the pod's
# own netfilter and the tools that read it.
have nft || need+=(nftables)
have iptables || need+=(iptables)
have conntrack || need+=(conntrack)
have socat || need+=(socat)
# The responder's tests (tests/serve*.rs): what leaves by the pod interface.
have tcpdump || need+=(tcpdump)
# libvirt (tests/libvirt.rs): a system libvirtd with the QEMU driver, run by the test
# itself in a pod netns (tests/libvirt/libvirtd.sh); its services are never started.
have libvirtd && have /etc/libvirt/qemu.conf || need+=(libvirt-daemon-system)
have /usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_qemu.so || need+=(libvirt-daemon-driver-qemu)
have virsh || need+=(libvirt-clients)

if [ ${#need[@]} -gt 0 ]; then
    echo "install-deps: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # Runtimes are installed, never started or enabled: the tests run their own.
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy"
        trap 'rm -f "$policy"' EXIT
    fi
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The CRI client (tests/runtimes/cri/cri.py) needs grpcio and grpcio-tools.
if ! python3 -c 'import grpc, grpc_tools' >/dev/null 2>&1; then
    echo "install-deps: pip installing grpcio grpcio-tools"
    python3 -m pip install -q grpcio grpcio-tools
fi

# The test guest (kernel + initramfs), cached across runs.
bash "$(dirname "$0")/guest/build-guest.sh" >/dev/null
echo "install-deps: ready"
