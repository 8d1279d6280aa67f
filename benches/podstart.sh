#!/usr/bin/env bash
# Pod start under real runtimes: what podtap adds to
# RunPodSandbox under containerd's CRI plugin and to `podman run`, against the same
# CNI chain without podtap, interleaved pod by pod (benches/podstart.py).
#
#   bash benches/podstart.sh [--smoke] [--pods N] [--out FILE] [--bin PODTAP]
#
#   --smoke    3 pods per chain and runtime after 1 warm-up round: proves the
#              harness works, says nothing about speed.
#   --pods N   timed pods per chain and runtime (default 50), after 2 warm-up rounds.
#   --out FILE write the Markdown section there (default: stdout).
#   --bin P    the podtap binary (default: $PODTAP_BIN, else the release build).
#
# Needs root, containerd 1.6 + ctr, podman 4.3, runc, gcc, python3 with grpcio and
# grpcio-tools (tests/install-deps.sh installs them); without them it prints why,
# skips and exits 0 (2 under CI=true). Everything lives in a netns named pst<PID>-node,
# private mount namespaces and a work dir under /tmp; a trap removes it all on any
# exit. Exit status: 0 when every pod started and nothing was left, 1 otherwise.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
rt=$repo/tests/runtimes
pods=50 warmup=2 out="" bin=${PODTAP_BIN:-}
while [ $# -gt 0 ]; do
    case $1 in
    --smoke) pods=3 warmup=1 ;;
    --pods) pods=$2; shift ;;
    --out) out=$2; shift ;;
    --bin) bin=$2; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "podstart.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
case $pods in
''|*[!0-9]*|0) echo "podstart.sh: --pods needs a positive number, not '$pods'" >&2; exit 2 ;;
esac
if [ "$(id -u)" -ne 0 ]; then
    echo "podstart.sh: needs root (network and mount namespaces, containerd)" >&2
    exit 2
fi
missing=""
for t in containerd ctr podman runc gcc python3 ip; do
    command -v "$t" >/dev/null || missing="$missing $t"
done
python3 -c 'import grpc, grpc_tools' 2>/dev/null || missing="$missing python3-grpcio/grpcio-tools"
if [ -n "$missing" ]; then
    echo "podstart.sh: skipped, missing:$missing (tests/install-deps.sh installs them)" >&2
    [ "${CI:-}" = true ] && exit 2
    exit 0
fi
if [ -z "$bin" ]; then
    (cd "$repo" && cargo build --release --quiet --bin podtap)
    bin=${CARGO_TARGET_DIR:-$repo/target}/$(rustc -vV | sed -n 's/^host: //p')/release/podtap
fi
[ -x "$bin" ] || { echo "podstart.sh: no podtap binary at $bin" >&2; exit 2; }
bin=$(realpath "$bin")

. "$rt"/cri-env.sh
. "$rt"/podman-env.sh

prefix=pst$$
node=$prefix-node
work=$(mktemp -d "/tmp/$prefix.XXXXXX")
# The host's podman and libcni state (as tests/runtimes.rs checks it): path and mtime.
host_state() {
    local p
    for p in /dev/shm/libpod_lock /var/lib/containers /run/containers /run/libpod /var/lib/cni/results; do
        echo "$p $(stat -c %Y "$p" 2>/dev/null || echo absent)"
    done
}
host_before=$(host_state)

inner=""
cleanup() {
    local rc=$? pid f
    trap - EXIT INT TERM
    if [ -n "$inner" ] && kill -0 "$inner" 2>/dev/null; then
        kill -TERM "$inner" 2>/dev/null || true
        wait "$inner" 2>/dev/null || true
    fi
    # What the inner traps did not get to: containerd, shims and pod processes
    # recorded in the work dir, then any process still running from it. A
    # recorded pid is killed only while it is still ours (it may have been
    # reused): its command line names the work dir (containerd, the shims), or
    # it runs in this run's pod cgroups (a pod's `sleep`).
    for f in $(find "$work" -name containerd.pid -o -name shim.pid -o -name init.pid 2>/dev/null); do
        pid=$(cat "$f" 2>/dev/null) || continue
        case $pid in ''|*[!0-9]*) continue ;; esac
        if grep -qsF -- "$work" "/proc/$pid/cmdline" ||
            grep -qsE -- ":/podtap-cri-$prefix-cri(/|\$)" "/proc/$pid/cgroup"; then
            kill -9 "$pid" 2>/dev/null || true
        fi
    done
    for pid in $(grep -lsF -- "$work" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
        [ "$pid" != $$ ] && kill -9 "$pid" 2>/dev/null || true
    done
    cri_cgroups_rm /podtap-cri-"$prefix"-cri
    ip netns delete "$node" 2>/dev/null || true
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Run ARGS in the background, so that a signal reaches the trap at once.
bg() {
    "$@" &
    inner=$!
    local rc=0
    wait "$inner" || rc=$?
    inner=""
    return "$rc"
}

ip netns add "$node"
ip -n "$node" link set lo up
gcc -O2 -Wall -o "$work"/podstart-wrap "$here"/podstart-wrap.c
# The diagnostic chains' plugins: NAME-timed and NAME-waited next to NAME in a CNI bin dir.
timed_plugins() {
    local n
    for n in bridge-timed podtap-timed bridge-waited podtap-waited; do
        cp "$work"/podstart-wrap "$1/$n"
    done
}
PLUGIN='{"type":"podtap","mode":"tc","stateDir":"STATE","capabilities":{"io.kubernetes.cri.pod-annotations":true}}'
plugin() { echo ",${PLUGIN/STATE/$1}"; }
rc=0

# ---- containerd CRI: five runtime handlers, one CNI conf dir each ----
# (its basename names the pods' cgroup parent, /podtap-cri-<basename>: unique)
W=$work/$prefix-cri
cri_env "$W" "$bin"
timed_plugins "$W"/bin
subnet=210
for h in plain podtap plain-timed podtap-timed podtap-waited; do
    mkdir -p "$W/net-$h"
    p=""
    case $h in podtap*) p=$(plugin "$W/state-$h") ;; esac
    cri_conflist "$W/net-$h/10-$h.conflist" "ps-$h" "psbr$subnet" "198.18.$subnet.0/24" "$W"/ipam "$p"
    case $h in *-timed|*-waited) sed -i 's/"type":"\(bridge\|podtap\)"/"type":"\1-'"${h#*-}"'"/g' "$W/net-$h/10-$h.conflist" ;; esac
    cri_handler "$W" "$h" "$W/net-$h"
    subnet=$((subnet + 1))
done
# The default handler's conf dir (unused: every pod names its handler).
cp "$W"/net-plain/10-plain.conflist "$W"/net.d/
cat >"$W"/inner.sh <<S
set -euo pipefail
. "$rt"/cri-env.sh
trap 'cri_cleanup "$W"' EXIT
trap 'exit 1' TERM INT
export CRI_STUBS="$W"/stubs
cri_start "$W"
ctr --address "$W"/c.sock -n k8s.io image import "$W"/image.tar >/dev/null
python3 "$here"/podstart.py cri --work "$W" --pods $pods --warmup $warmup --out "$work"/cri.json \
    --version "$(containerd --version | awk '{print $3}')"
S
bg cri_private "$W" "$node" "$W"/inner.sh || rc=1

# ---- podman: five networks (podman_env's ptrt is the podtap chain) ----
W=$work/podman
podman_env "$W" "$bin" 198.18.214.0/24 "$(plugin "$W"/state-podtap)"
timed_plugins "$W"/bin
python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
base = json.load(open(f"{w}/net.d/podtap.conflist"))
for i, chain in enumerate(("plain", "plain-timed", "podtap-timed", "podtap-waited")):
    c = json.loads(json.dumps(base))
    c["name"] = f"ptps-{chain}"
    c["plugins"][0]["bridge"] = f"ptpsbr{i}"
    c["plugins"][0]["ipam"]["ranges"] = [[{"subnet": f"198.18.{215 + i}.0/24"}]]
    if chain.startswith("plain"):
        del c["plugins"][1:]
    else:
        c["plugins"][1]["stateDir"] = f"{w}/state-{chain}"
    if "-" in chain:
        for p in c["plugins"]:
            p["type"] += "-" + chain.split("-", 1)[1]
    json.dump(c, open(f"{w}/net.d/{c['name']}.conflist", "w"))
PY
cat >"$W"/inner.sh <<S
export CONTAINERS_CONF="$CONTAINERS_CONF" PODSTART_P="$P"
exec python3 "$here"/podstart.py podman --work "$W" --pods $pods --warmup $warmup --out "$work"/podman.json \
    --version "$(podman --version)"
S
bg run_private "$node" "$W"/inner.sh || rc=1

host_after=$(host_state)
if [ "$host_before" != "$host_after" ]; then
    printf 'podstart.sh: the host podman/libcni state changed:\n%s\n%s\n' "$host_before" "$host_after" >&2
    rc=1
fi
args=()
[ -e "$work"/cri.json ] && args+=(--cri "$work"/cri.json)
[ -e "$work"/podman.json ] && args+=(--podman "$work"/podman.json)
if [ -n "$out" ]; then
    python3 "$here"/podstart.py report "${args[@]}" >"$out" || rc=1
else
    python3 "$here"/podstart.py report "${args[@]}" || rc=1
fi
exit "$rc"
