#!/bin/bash
# Smoke test of the test guest itself (no podtap involved). Needs root.
#
#   tests/guest/smoke-test.sh [CACHE_DIR]
#
# Makes two private netns (pod, peer) joined by a veth, a TAP in the pod
# netns wired to the pod veth with tc mirred redirects (both ways), and boots
# the guest twice under QEMU (TCG) inside the pod netns: once with a single
# queue TAP, once with a 2-queue TAP. Only 198.18.0.0/15 and 2001:db8::/32
# are used. Nothing is created outside the two netns; they are deleted on exit.
# Set PTG_LOG_DIR=DIR to keep the console logs.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
eval "$("$HERE/build-guest.sh" "$@" | grep -E '^(KERNEL|INITRD)=')"

POD=ptg-$$-pod
PEER=ptg-$$-peer
OUT=$(mktemp -d "${TMPDIR:-/tmp}/ptg-$$.XXXXXX")
cleanup() {
    ip netns del "$POD" 2>/dev/null || true
    ip netns del "$PEER" 2>/dev/null || true
    rm -rf "$OUT"
}
trap cleanup EXIT

pod() { ip netns exec "$POD" "$@"; }
peer() { ip netns exec "$PEER" "$@"; }

MTU=1400
fail=0
ip netns add "$POD"
ip netns add "$PEER"
pod ip link set lo up
peer ip link set lo up
# The veth is created inside the pod netns, its peer end moved straight into
# the peer netns: no link ever exists in the root netns.
pod ip link add eth0 mtu $MTU type veth peer name veth-peer mtu $MTU netns "$PEER"
peer ip link set veth-peer up
peer ip addr add 198.18.0.1/24 dev veth-peer
peer ip addr add 2001:db8:1::1/64 dev veth-peer nodad
# Extra peer addresses reached through guest routes (onlink gw / default).
peer ip addr add 198.19.0.1/32 dev lo
peer ip addr add 2001:db8:ff::1/128 dev lo
# Like a CNI: the pod veth keeps the pod IP; the guest takes its MAC and IP.
pod ip addr add 198.18.0.2/24 dev eth0
pod ip addr add 2001:db8:1::2/64 dev eth0 nodad
pod ip link set eth0 up

GMAC=$(pod cat /sys/class/net/eth0/address)
PMAC=$(peer cat /sys/class/net/veth-peer/address)

# wire_tap TAP: redirect eth0 <-> TAP with tc.
wire_tap() {
    pod ip link set "$1" mtu $MTU up
    for pair in "eth0 $1" "$1 eth0"; do
        set -- $pair
        pod tc qdisc add dev "$1" ingress
        pod tc filter add dev "$1" parent ffff: protocol all u32 match u8 0 0 \
            action mirred egress redirect dev "$2"
    done
}

APPEND="console=ttyS0 quiet panic=-1"
APPEND+=" podtap.nic=$GMAC,$MTU,198.18.0.2/24,2001:db8:1::2/64"
APPEND+=" podtap.route=198.18.0.0/24,-,$GMAC,0,0,0"            # kernel prefix route: skipped
APPEND+=" podtap.route=198.19.0.0/24,198.18.0.1,$GMAC,10,1,1300"
APPEND+=" podtap.route=::/0,2001:db8:1::1,$GMAC,1024,0,0"
APPEND+=" podtap.neigh=198.18.0.1,$PMAC,$GMAC"
APPEND+=" podtap.neigh=2001:db8:1::1,$PMAC,$GMAC"
APPEND+=" podtap.ping=198.18.0.1,2001:db8:1::1,198.19.0.1,2001:db8:ff::1"
APPEND+=" podtap.pingbig=1372:198.18.0.1,1373:198.18.0.1,1352:2001:db8:1::1,1272:198.19.0.1,1273:198.19.0.1"

# boot NAME QUEUES [APPEND]
boot() {
    local name=$1 q=$2 append=${3:-$APPEND} tapflags=(mode tap vnet_hdr) netq= devq=
    if ((q > 1)); then
        tapflags+=(multi_queue)
        netq=",queues=$q"
        devq=",mq=on,vectors=$((2 * q + 2))"
    fi
    pod ip tuntap add dev "$name" "${tapflags[@]}"
    wire_tap "$name"
    local t0=$SECONDS
    pod timeout 120 qemu-system-x86_64 -accel tcg -smp "$q" -nographic -no-reboot -m 256 \
        -kernel "$KERNEL" -initrd "$INITRD" -append "$append" \
        -netdev "tap,id=n0,ifname=$name,script=no,downscript=no,vhost=off$netq" \
        -device "virtio-net-pci,netdev=n0,mac=$GMAC,romfile=$devq" \
        </dev/null >"$OUT/$name.log" 2>&1 || true
    echo "== $name (queues=$q): $((SECONDS - t0)) s"
    grep -a '^PODTAP-' "$OUT/$name.log" | tr -d '\r'
    [[ -z "${PTG_LOG_DIR:-}" ]] || cp "$OUT/$name.log" "$PTG_LOG_DIR/"
    # Unwire so the next TAP can take over eth0.
    pod tc qdisc del dev eth0 ingress
    pod ip link del "$name"
}

check() { grep -aq "^$2" "$OUT/$1.log" || { echo "MISSING in $1: $2"; fail=1; }; }

# Count, in the peer, 1400-byte ICMP echo requests with DF set, and fragments.
peer nft -f - <<EOF
table inet ptg {
    chain in {
        type filter hook input priority 0;
        ip protocol icmp icmp type echo-request ip length 1400 ip frag-off & 0x4000 != 0 counter
        ip frag-off & 0x3fff != 0 counter
    }
}
EOF
counters() { peer nft list chain inet ptg in | grep -o 'packets [0-9]*' | awk '{print $2}' | paste -sd' '; }

boot tap0 1
boot tap1 2
read -r df frags <<<"$(counters)"
echo "peer saw $df DF 1400-byte echo requests, $frags fragments"
((df >= 2 && frags == 0)) || { echo "DF check failed"; fail=1; }
# Guest NIC MTU (1500) larger than the pod veth's (1400): the precheck passes,
# the path must drop the 1500-byte packet.
boot tap2 1 "${APPEND/podtap.nic=$GMAC,$MTU,/podtap.nic=$GMAC,1500,} podtap.pingbig=1472:198.18.0.1"
check tap2 "PODTAP-PINGBIG FAIL 1472 198.18.0.1"
check tap2 "PODTAP-NIC $GMAC eth0 mtu=1500 queues=1"
for n in tap0 tap1; do
    check $n "PODTAP-PING OK 198.18.0.1"
    check $n "PODTAP-PING OK 2001:db8:1::1"
    check $n "PODTAP-PING OK 198.19.0.1"
    check $n "PODTAP-PING OK 2001:db8:ff::1"
    check $n "PODTAP-PINGBIG OK 1372 198.18.0.1"
    check $n "PODTAP-PINGBIG FAIL 1373 198.18.0.1"
    check $n "PODTAP-PINGBIG OK 1352 2001:db8:1::1"
    check $n "PODTAP-PINGBIG OK 1272 198.19.0.1"
    check $n "PODTAP-PINGBIG FAIL 1273 198.19.0.1"
    check $n "PODTAP-DONE"
    if grep -aq '^PODTAP-ERROR' "$OUT/$n.log"; then echo "errors in $n"; fail=1; fi
done
check tap0 "PODTAP-NIC $GMAC eth0 mtu=$MTU queues=1"
check tap1 "PODTAP-NIC $GMAC eth0 mtu=$MTU queues=2"
if ((fail)); then tail -n 60 "$OUT"/*.log; echo "SMOKE FAILED"; exit 1; fi
echo "SMOKE OK"
