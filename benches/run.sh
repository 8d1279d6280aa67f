#!/usr/bin/env bash
# podtap benchmarks: one run, contenders interleaved per repetition.
#
#   bash benches/run.sh [--smoke] [--reps N] [--out FILE] [--pods N] [--no-tcp]
#                       [--no-podstart] [--datapath-only] [--dp-rounds N]
#
#   --smoke    2 reps, 1 and 8 interfaces, 10 concurrent pods, short data path: proves
#              the harness works (CI), says nothing about speed. Under 60 s (podstart.sh: 20-30 s more).
#   --reps N   repetitions per contender (default 20).
#   --out FILE write the Markdown results there (default: stdout); raw samples go
#              to FILE.json.
#   --pods N   pods in the concurrency test (default 100).
#   --no-tcp   skip the iperf3 TCP test (it runs only when iperf3 is installed).
#   --no-podstart  skip benches/podstart.sh (pod start under containerd CRI and podman;
#              its section is appended to the Markdown; it skips itself without them).
#   --datapath-only  only the data-path test (section 6; with --dp-rounds N rounds,
#              default 5): every wiring.
#
# Then, each with its own section (none with --datapath-only), appended to
# the Markdown: benches/routes.py (1 000 / 10 000 / 100 000 routes; --smoke: 1 000),
# benches/scale.py (1/100/500 attachments; --smoke: 1/5/10), benches/serve_scale.py
# (one podtap serve serving 500 attachments; --smoke: 5), benches/watch_rest.py
# (200 pods with a watch each; --smoke: 5) and benches/podstart.sh (containerd CRI
# and podman run).
#
# Uses target/<host triple>/release/podtap (built with `cargo build-node`, the
# static node binary; the triple is in its path) unless
# PODTAP_BIN names a binary, and examples/bench_lib (the library-call
# contender) unless PODTAP_LIB_BENCH names one. Needs root, ip/tc (iproute2), jq, gcc, python3.
# Every object lives in netns named ptb<PID>-*; the root netns is never touched;
# a trap removes everything on exit. Exit status: 0 when every contender
# succeeded and left nothing behind, 1 otherwise. Timings are never asserted.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
orig_args="$*"
reps=20 smoke=0 out="" pods=100 tcp=1 podstart=1 dponly=0 dprounds=""
while [ $# -gt 0 ]; do
    case $1 in
    --smoke) smoke=1 ;;
    --reps) reps=$2; shift ;;
    --reps=*) reps=${1#*=} ;;
    --out) out=$2; shift ;;
    --out=*) out=${1#*=} ;;
    --pods) pods=$2; shift ;;
    --no-tcp) tcp=0 ;;
    --no-podstart) podstart=0 ;;
    --datapath-only) dponly=1 ;;
    --dp-rounds) dprounds=$2; shift ;;
    -h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

if [ "$(id -u)" -ne 0 ]; then
    echo "run.sh: needs root (network namespaces, TAPs)" >&2
    exit 2
fi
for t in ip tc jq gcc python3; do
    command -v "$t" >/dev/null || { echo "run.sh: $t is required" >&2; exit 2; }
done

# The node binary (`cargo build-node`, .cargo/config.toml: static-pie, what
# nodes run) lands in target/<triple>/release.
target=${CARGO_TARGET_DIR:-$repo/target}
release=$target/$(rustc -vV | sed -n 's/^host: //p')/release
if [ -n "${PODTAP_BIN:-}" ]; then
    bin=$PODTAP_BIN
else
    (cd "$repo" && cargo build-node --quiet)
    bin=$release/podtap
fi
[ -x "$bin" ] || { echo "run.sh: no podtap binary at $bin" >&2; exit 2; }
# The library-call contender (examples/bench_lib.rs), unless PODTAP_LIB_BENCH names one.
if [ -n "${PODTAP_LIB_BENCH:-}" ]; then
    libbench=$PODTAP_LIB_BENCH
else
    (cd "$repo" && cargo build --release --quiet --example bench_lib)
    libbench=$target/release/examples/bench_lib
fi
[ -x "$libbench" ] || { echo "run.sh: no bench_lib at $libbench" >&2; exit 2; }

prefix=ptb$$
work=$(mktemp -d "/tmp/$prefix.XXXXXX")
state=/run/$prefix-state

py=""
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$py" ] && kill -0 "$py" 2>/dev/null; then
        kill -TERM "$py" 2>/dev/null || true
        wait "$py" 2>/dev/null || true
    fi
    # Only our own namespaces: exact prefix match on names this run created.
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$prefix-" || true); do
        ip netns delete "$ns" 2>/dev/null || true
    done
    rm -rf "$state" "$state-scale" "$state-scale-rss.txt" "$state-rt" "/run/$prefix-watch"
    if [ "${BENCH_KEEP_WORK:-0}" = 1 ]; then
        echo "run.sh: work dir kept: $work" >&2
    else
        rm -rf "$work"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p -m 0700 "$state"
gcc -O2 -pthread -Wall -o "$work/standin" "$here/standin.c"
gcc -O2 -Wall -o "$work/floor" "$here/floor.c"

args=(--bin "$bin" --prefix "$prefix" --state-dir "$state" --workdir "$work"
      --standin "$work/standin" --floor "$work/floor" --lib "$libbench" --reps "$reps" --pods "$pods")
if [ "$smoke" = 1 ]; then
    args+=(--smoke --reps 2 --pods 10 --dp-rounds 1 --dp-secs 0.5)
    tcp=0
fi
if [ "$tcp" = 1 ] && command -v iperf3 >/dev/null; then
    args+=(--tcp)
fi
if [ "$dponly" = 1 ]; then
    args+=(--datapath-only)
fi
if [ -n "$dprounds" ]; then
    args+=(--dp-rounds "$dprounds")
fi
if [ -n "$out" ]; then
    args+=(--out "$out" --raw "${out%.md}.json")
fi

{
    echo "podtap benchmark run $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo
    echo "- command: \`bash benches/run.sh $orig_args\`${PODTAP_BIN:+ with PODTAP_BIN=$PODTAP_BIN}"
    echo "- machine: nproc=$(nproc), kernel $(uname -r), CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "- binary: $("$bin" --version 2>/dev/null), sha256 $(sha256sum "$bin" | cut -c1-12); work tree HEAD $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "- $(ip -V), jq $(jq --version), $(iperf3 --version 2>/dev/null | head -1 || echo 'no iperf3')"
    echo "- state dir $state on $(stat -f -c %T "$(dirname "$state")")"
    echo "- load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$work/header.md"
cat "$work/header.md" >&2
args+=(--header "$work/header.md")

# In the background so that a signal reaches the trap at once; the trap stops
# the driver (which cleans up after itself) and then removes what is left.
python3 "$here/bench.py" "${args[@]}" &
py=$!
rc=0
wait "$py" || rc=$?
py=""
if [ "$dponly" = 1 ]; then
    exit "$rc"
fi

# One more part of the run, in the background like bench.py; its failure
# makes the run's exit status 1.
part() {
    "$@" &
    py=$!
    wait "$py" || rc=1
    py=""
}


# Routing size: benches/routes.py, its Markdown after bench.py's.
rargs=(--bin "$bin" --floor "$work/floor" --prefix "$prefix-rt" --state-dir "$state-rt")
[ "$smoke" = 1 ] && rargs+=(--smoke)
[ -n "$out" ] && rargs+=(--out "$out")
part python3 "$here/routes.py" "${rargs[@]}"
rm -rf "$state-rt"

# Node scale: N attachments on the node, its own script and section.
scale=(--bin "$bin" --prefix "$prefix-scale" --state-dir "$state-scale" --standin "$work/standin")
[ "$smoke" = 1 ] && scale+=(--smoke) || scale+=(--reps "$reps")
part python3 "$here/scale.py" "${scale[@]}" ${out:+--out "$out"}
# Watches at rest: benches/watch_rest.py, its own netns and state dir.
watch_args=(--bin "$bin" --prefix "$prefix-wr" --state-dir "/run/$prefix-watch")
if [ "$smoke" = 1 ]; then watch_args+=(--smoke); fi
if [ -n "$out" ]; then watch_args+=(--out "$out"); fi
part python3 "$here/watch_rest.py" "${watch_args[@]}"
# The responder at node scale: benches/serve_scale.py (one podtap serve, 500
# attachments; --smoke: 5), its own netns and state dir.
serve_args=(--bin "$bin" --prefix "$prefix-sv")
if [ "$smoke" = 1 ]; then serve_args+=(--smoke); fi
if [ -n "$out" ]; then serve_args+=(--out "$out" --append); fi
part python3 "$here/serve_scale.py" "${serve_args[@]}"

# Pod start under a real runtime: its own script, its section appended.
if [ "$podstart" = 1 ]; then
    ps_args=(--bin "$bin")
    [ "$smoke" = 1 ] && ps_args+=(--smoke)
    part bash "$here/podstart.sh" "${ps_args[@]}" >>"${out:-/dev/stdout}"
fi
exit "$rc"
