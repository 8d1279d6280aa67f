#!/usr/bin/env bash
# Regenerate .cargo/symbol-order.txt: the functions podtap's common commands
# run, which build.rs has the linker (LLD) place first in .text.
#
#   sudo bash benches/symbol-order.sh [--bin PODTAP]
#
# --bin: a release binary built beforehand (by the toolchain CI uses: the
# names depend on the rustc); without it, `cargo build --release` here.
#
# Why: a podtap process lives a few milliseconds, and most of its code page
# faults are first touches of functions spread over 5 MB of text (each fault
# maps 64 KiB around it, `fault_around_bytes`). With the functions a command
# runs packed together, an 8-interface attach takes less than half the code
# faults and was 0.14-0.19 ms faster here (docs/benchmarks.md, "Where the
# time goes").
#
# Method: a throwaway pod netns (two veths with addresses and a default
# route, peers in a second netns), a private state dir, and each command run
# once under valgrind's callgrind (every function executed is named, however
# short): attach, detach, CNI ADD and DEL, the OCI hook's attach and detach,
# check, list, show, scan, render, --version. Detach hands the link deletion
# to a CLONE_VM child, which valgrind cannot run: callgrind dumps what ran
# before it (--dump-before), and a plain detach then cleans up. A command
# that fails otherwise stops the script, with its stderr. The symbol names
# are mangled: a dependency update or another rustc renames them, and
# .ci/check-symbol-order.sh then asks for this script; the list's header
# names the rustc that built the binary.
#
# Needs root, valgrind, iproute2, readelf and python3 (and cargo without
# --bin). The root netns is never touched; the two netns are named
# pso<PID>-*, and only those this run made are removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=
case "${1:-}" in
    --bin) bin=$(realpath -e -- "${2:?--bin needs a path}") ;;
    "") ;;
    *) echo "usage: sudo bash benches/symbol-order.sh [--bin PODTAP]" >&2; exit 2 ;;
esac
[[ $(id -u) -eq 0 ]] || { echo "symbol-order: needs root (it makes a pod netns)" >&2; exit 1; }
for tool in valgrind ip readelf python3; do
    command -v "$tool" >/dev/null || { echo "symbol-order: $tool is missing" >&2; exit 1; }
done
if [[ -z $bin ]]; then
    cargo build --release --bin podtap
    bin="$PWD/target/$(rustc --print host-tuple)/release/podtap"
fi
ns="pso$$-pod"
peer="pso$$-peer"
made=()
holder=
work=$(mktemp -d)
export PODTAP_STATE_DIR="$work/state"
cleanup() {
    if [[ -n $holder ]]; then kill "$holder" 2>/dev/null || true; fi
    "$bin" detach --id pso >/dev/null 2>&1 || true
    for netns in "${made[@]}"; do ip netns del "$netns" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

for netns in "$ns" "$peer"; do
    ip netns add "$netns"
    made+=("$netns")
done
ip -n "$ns" link set lo up
for i in 0 1; do
    ip -n "$ns" link add "eth$i" type veth peer name "p$i" netns "$peer"
    ip -n "$ns" addr add "198.18.$i.2/24" dev "eth$i"
    ip -n "$ns" addr add "2001:db8:$i::2/64" dev "eth$i" nodad
    ip -n "$ns" link set "eth$i" up
    ip -n "$peer" link set "p$i" up
done
ip -n "$ns" route add default via 198.18.0.1

n=0
# traced NAME [ENV=V...] -- ARGS...: run podtap under callgrind, stdin from $work/stdin.
traced() {
    local name=$1
    shift
    local env=()
    while [[ $1 != -- ]]; do env+=("$1"); shift; done
    shift
    n=$((n + 1))
    local out
    out="$work/$(printf %02d $n)-$name.out"
    # A run that valgrind ended at the deleter's clone left its dump in $out.1.
    if ! env "${env[@]}" valgrind --tool=callgrind --demangle=no \
        --dump-before='*unlist_child*start*' --callgrind-out-file="$out" "$bin" "$@" \
        <"$work/stdin" >/dev/null 2>"$work/$name.err" && [[ ! -s $out.1 ]]; then
        echo "symbol-order: podtap $* failed under callgrind:" >&2
        grep -v '^==' "$work/$name.err" >&2 || true
        exit 1
    fi
}
: >"$work/stdin"
traced attach -- attach --netns "/run/netns/$ns" --id pso
traced detach -- detach --id pso
"$bin" detach --id pso >/dev/null

cat >"$work/stdin" <<EOF
{"cniVersion":"1.0.0","name":"pso","type":"podtap","stateDir":"$PODTAP_STATE_DIR",
 "prevResult":{"cniVersion":"1.0.0",
   "interfaces":[{"name":"eth0","sandbox":"/run/netns/$ns"}],
   "ips":[{"address":"198.18.0.2/24","interface":0}]}}
EOF
cni=(CNI_CONTAINERID=pso CNI_NETNS="/run/netns/$ns" CNI_IFNAME=eth0 CNI_PATH=/nonexistent)
traced cni-add CNI_COMMAND=ADD "${cni[@]}" --
traced cni-del CNI_COMMAND=DEL "${cni[@]}" --
env CNI_COMMAND=DEL "${cni[@]}" "$bin" <"$work/stdin" >/dev/null
: >"$work/stdin"

# The OCI hook as a runtime runs it: the state of a container whose process
# lives in the pod netns on stdin (createRuntime, then poststop).
ip netns exec "$ns" sleep 600 &
holder=$!
# The hook finds the netns through the process: wait until it is inside.
for _ in $(seq 100); do
    [[ $(stat -L -c %i "/proc/$holder/ns/net" 2>/dev/null) == $(stat -L -c %i "/run/netns/$ns") ]] && break
    sleep 0.05
done
echo "{\"ociVersion\":\"1.0.2\",\"id\":\"pso\",\"status\":\"creating\",\"pid\":$holder,\"bundle\":\"$work\"}" >"$work/stdin"
traced hook-attach -- oci-hook attach
traced hook-detach -- oci-hook detach
"$bin" oci-hook detach <"$work/stdin" >/dev/null
kill "$holder"
wait "$holder" 2>/dev/null || true
holder=
: >"$work/stdin"

"$bin" attach --netns "/run/netns/$ns" --id pso >/dev/null
traced check -- check --id pso
traced list -- list
traced show -- show --id pso
traced scan -- scan --netns "/run/netns/$ns"
traced render -- render --id pso qemu
traced version -- --version
"$bin" detach --id pso >/dev/null

# Each callgrind file names a function once, at its first `fn=(N) name` or
# `cfn=(N) name`; "'2" marks a recursion level, hex names are code without a
# symbol and "(below main)" is valgrind's own. A function scores the weights
# of the commands that ran it (attach and detach 8, CNI ADD and DEL and the
# OCI hook's attach and detach 4, check and list 2, the rest 1), and the list
# runs from the highest score down, so what every command runs comes first
# and what one rare command runs last.
# glibc picks its string functions by the CPU's features, and valgrind's CPU
# is not this one's: for a string function the list holds, every variant the
# binary has goes in beside the one valgrind ran.
nm "$bin" | awk '$2 ~ /^[tTiW]$/ { print $3 }' >"$work/symbols"
rustc_of_bin=$(bash .ci/rustc-of.sh "$bin")
python3 - "$work" .cargo/symbol-order.txt "$("$bin" --version | awk '{print $2}')" "$rustc_of_bin" <<'PY'
import glob, os, re, sys
work, out, version, rustc = sys.argv[1:]
weights = {"attach": 8, "detach": 8, "cni-add": 4, "cni-del": 4, "hook-attach": 4,
           "hook-detach": 4, "check": 2, "list": 2}
score, first = {}, {}
for path in sorted(glob.glob(os.path.join(work, "*.out*"))):
    command = re.sub(r"^\d+-|\.out.*$", "", os.path.basename(path))
    names = set()
    for line in open(path, errors="replace"):
        m = re.match(r"c?fn=\(\d+\) (.*)$", line.rstrip("\n"))
        if m:
            names.add(re.sub(r"'\d+$", "", m.group(1)))
    for name in sorted(names):
        if re.fullmatch(r"0x[0-9a-f]+|\(below main\)", name):
            continue
        first.setdefault(name, len(first))
        score[name] = score.get(name, 0) + weights.get(command, 1)
variant = re.compile(r"__([a-z0-9_]+?)_(?:sse|ssse|avx|evex|erms)")
bases = {m.group(1) for n in score if (m := variant.fullmatch(n) or variant.match(n))}
for name in open(os.path.join(work, "symbols")).read().split():
    m = variant.match(name)
    if m and m.group(1) in bases and name not in score:
        first[name] = len(first)
        score[name] = max(score[n] for n in score if variant.match(n) and variant.match(n).group(1) == m.group(1))
order = sorted(score, key=lambda n: (-score[n], first[n]))
with open(out + ".tmp", "w") as f:
    f.write("# The functions podtap's common commands run, those of the most and the\n")
    f.write("# commonest commands first: build.rs has LLD place them first in .text.\n")
    f.write(f"# Generated by benches/symbol-order.sh from podtap {version}; do not edit.\n")
    f.write(f"# made by {rustc}\n")
    f.writelines(n + "\n" for n in order)
os.replace(out + ".tmp", out)
print(f"symbol-order: {len(order)} functions in {out}")
PY
