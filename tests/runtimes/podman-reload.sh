#!/bin/bash
# `podman network reload` ROUNDS times on a running podtap pod (podman 4.3, CNI
# backend, runc), with every path private to WORK (tests/runtimes/podman-env.sh).
# A guest stand-in (guest_standin.py) holds the pod's TAP as a VMM would and is
# the "guest": a netns with the guest MAC and the pod's IP. After each reload:
# `podtap check`, a ping from the guest to the pod's gateway and one from the
# node to the guest. Then `podman restart` (checked the same way) and `podman rm`.
# usage: podman-reload.sh WORK NODE PODTAP SUBNET MODE ROUNDS
# Output: one fact a line: ROUND <n> reload=<ok|fail> tap=<name> check=<ok|fail>
# out=<ok|fail> in=<ok|fail> ifname=<what podman re-ran the chain with>,
# RESTART (the same fields), then LEFT checkpoints=<n> taps=<n> ipam=<n>.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE"/podman-env.sh
W=$1; NODE=$2; PODTAP=$3; SUBNET=$4; MODE=$5; ROUNDS=$6
podman_env "$W" "$PODTAP" "$SUBNET" \
    ',{"type":"podtap","mode":"'"$MODE"'","queues":1,"stateDir":"'"$W"'/state"}'
GW=${SUBNET%.*}.1
cat > "$W"/reload.sh <<S
set -uo pipefail
P="$P"; W=$W; PODTAP=$PODTAP; GW=$GW; HERE=$HERE; ROUNDS=$ROUNDS
S
cat >> "$W"/reload.sh <<'S'
attachment() { "$PODTAP" list --state-dir "$W"/state --json | jq -r '.[0].id // empty'; }
# Give the guest netns the guest MAC and the pod's IP, then probe both ways.
probe() {
    local id tap mac ip check=fail out=fail in=fail
    id=$(attachment)
    tap=$("$PODTAP" list --state-dir "$W"/state --json | jq -r '.[0].taps[0] // "-"')
    mac=$(jq -r '.description.interfaces[] | select(.tap) | .guest_mac' "$W/state/$id.json")
    ip=$($P inspect c1 --format '{{(index .NetworkSettings.Networks "ptrt").IPAddress}}')
    "$PODTAP" check --state-dir "$W"/state --id "$id" >/dev/null 2>>"$W"/check.err && check=ok
    ip -n g link set gtap0 down
    ip -n g link set gtap0 address "$mac"
    ip -n g addr flush dev gtap0
    ip -n g addr add "$ip"/24 dev gtap0
    ip -n g link set gtap0 up
    ip -n g route replace default via "$GW"
    ip neigh flush dev ptrtbr0 2>/dev/null || true
    ip netns exec g ping -c 1 -W 2 "$GW" >/dev/null 2>&1 \
        || ip netns exec g ping -c 2 -W 2 "$GW" >/dev/null 2>&1 && out=ok
    ping -c 1 -W 2 "$ip" >/dev/null 2>&1 || ping -c 2 -W 2 "$ip" >/dev/null 2>&1 && in=ok
    local ifname
    ifname=$(grep -ho '"ifName":"[^"]*"' /var/lib/cni/results/* | head -1)
    echo "reload=$1 tap=$tap check=$check out=$out in=$in ifname=${ifname#*:} mac=$mac"
}
# The guest stand-in on the pod's TAP; started again when the pod's netns changes.
standin() {
    local sandbox tap
    sandbox=$($P inspect c1 --format '{{.NetworkSettings.SandboxKey}}')
    tap=$("$PODTAP" list --state-dir "$W"/state --json | jq -r '.[0].taps[0]')
    python3 "$HERE"/guest_standin.py "$sandbox" /run/netns/g "$tap" gtap0 >>"$W"/standin.log 2>&1 &
    STANDIN=$!
    for _ in $(seq 100); do grep -q READY "$W"/standin.log && break; sleep 0.05; done
}
$P run -d --name c1 --network ptrt --rootfs "$W"/rootfs /bin/sleep 100000 >/dev/null
ip netns add g
standin
echo "START $(probe ok)"
for i in $(seq "$ROUNDS"); do
    r=ok; $P network reload c1 >/dev/null 2>>"$W"/reload.err || r=fail
    echo "ROUND $i $(probe $r)"
done
r=ok; $P restart -t 0 c1 >/dev/null 2>>"$W"/reload.err || r=fail
# A restart gives the pod a new netns: the stand-in follows, as a new VM would.
kill "$STANDIN"; wait "$STANDIN" 2>/dev/null
: >"$W"/standin.log
standin
echo "RESTART $(probe $r)"
kill "$STANDIN"; wait "$STANDIN" 2>/dev/null
$P rm -f -t 0 c1 >/dev/null
ip netns del g
sed "s/^/STDERR /" "$W"/reload.err | tail -n 5
echo "LEFT checkpoints=$(ls "$W"/state | grep -c '\.json$') taps=$(ip -d link show type tun 2>/dev/null | grep -c tun) ipam=$(ls "$W"/ipam/ptrt 2>/dev/null | grep -c '^[0-9]')"
S
run_private "$NODE" "$W"/reload.sh
