#!/usr/bin/env bash
# Contender (b): the strongest shell variant, one `ip -batch` and one
# `tc -batch` process. Same objects as iproute2-perstep.sh and
# `podtap attach --mode tc`. Detach deletes the TAPs link by link in one
# `ip -batch` (as launch scripts do); the kernel floor (one group deletion) is
# measured separately by run.sh.
#
#   iproute2-batch.sh attach NETNS_NAME ID GROUP PRIO
#   iproute2-batch.sh detach NETNS_NAME ID
set -euo pipefail
op=$1 ns=$2 id=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

case $op in
attach)
    group=$4 prio=$5
    ip -n "$ns" -d -j link show |
        jq -r '.[] | select(.linkinfo.info_kind == "veth") | "\(.ifname) \(.mtu)"' >"$tmp/ifs"
    while read -r ifname mtu; do
        tap=tap_$ifname
        echo "tuntap add dev $tap mode tap vnet_hdr" >>"$tmp/ip"
        echo "link set dev $tap mtu $mtu group $group alias podtap:$id up" >>"$tmp/ip"
        echo "qdisc add dev $ifname ingress" >>"$tmp/tc"
        echo "qdisc add dev $tap ingress" >>"$tmp/tc"
        echo "filter add dev $ifname ingress prio $prio protocol all u32 match u8 0 0 action mirred egress redirect dev $tap" >>"$tmp/tc"
        echo "filter add dev $tap ingress prio $prio protocol all u32 match u8 0 0 action mirred egress redirect dev $ifname" >>"$tmp/tc"
    done <"$tmp/ifs"
    [ -s "$tmp/ip" ] || exit 0
    ip -n "$ns" -batch "$tmp/ip"
    tc -n "$ns" -batch "$tmp/tc"
    ;;
detach)
    ip -n "$ns" -d -j link show |
        jq -r --arg a "podtap:$id" '.[] | select(.linkinfo.info_kind == "tun" and .ifalias == $a) | .ifname' >"$tmp/taps"
    [ -s "$tmp/taps" ] || exit 0
    while read -r tap; do
        echo "qdisc del dev ${tap#tap_} ingress" >>"$tmp/tc"
        echo "link delete dev $tap" >>"$tmp/ip"
    done <"$tmp/taps"
    tc -n "$ns" -batch "$tmp/tc"
    ip -n "$ns" -batch "$tmp/ip"
    ;;
*)
    echo "usage: $0 attach|detach NETNS ID [GROUP PRIO]" >&2
    exit 2
    ;;
esac
