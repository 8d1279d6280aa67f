#!/usr/bin/env bash
# Contender (a): the iproute2 way with one `ip`/`tc` process per step, the way
# Kuasar and many launch scripts do it. Builds the same objects as
# `podtap attach --mode tc`: per pod veth a persistent vnet_hdr TAP named
# tap_<if> (same MTU, up, in a link group, alias podtap:<id>), ingress qdiscs on
# both, and u32 match-all mirred egress redirect filters both ways.
#
#   iproute2-perstep.sh attach NETNS_NAME ID GROUP PRIO
#   iproute2-perstep.sh detach NETNS_NAME ID
#
# Discovery is done with `ip -j` (+ jq), as such scripts do.
set -euo pipefail
op=$1 ns=$2 id=$3

case $op in
attach)
    group=$4 prio=$5
    ip -n "$ns" -d -j link show |
        jq -r '.[] | select(.linkinfo.info_kind == "veth") | "\(.ifname) \(.mtu)"' |
        while read -r ifname mtu; do
            tap=tap_$ifname
            ip -n "$ns" tuntap add dev "$tap" mode tap vnet_hdr
            ip -n "$ns" link set dev "$tap" mtu "$mtu" group "$group" alias "podtap:$id" up
            tc -n "$ns" qdisc add dev "$ifname" ingress
            tc -n "$ns" qdisc add dev "$tap" ingress
            tc -n "$ns" filter add dev "$ifname" ingress prio "$prio" protocol all \
                u32 match u8 0 0 action mirred egress redirect dev "$tap"
            tc -n "$ns" filter add dev "$tap" ingress prio "$prio" protocol all \
                u32 match u8 0 0 action mirred egress redirect dev "$ifname"
        done
    ;;
detach)
    ip -n "$ns" -d -j link show |
        jq -r --arg a "podtap:$id" '.[] | select(.linkinfo.info_kind == "tun" and .ifalias == $a) | .ifname' |
        while read -r tap; do
            tc -n "$ns" qdisc del dev "${tap#tap_}" ingress
            ip -n "$ns" link delete dev "$tap"
        done
    ;;
*)
    echo "usage: $0 attach|detach NETNS ID [GROUP PRIO]" >&2
    exit 2
    ;;
esac
