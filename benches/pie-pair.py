#!/usr/bin/env python3
"""What position independence costs an attach: two podtap binaries, interleaved.

    sudo python3 benches/pie-pair.py OLD_BINARY NEW_BINARY [--pairs 30] [--ifaces 8]

Builds one pod netns with N veths (the fixture of benches/bench.py), then for
each pair runs `attach` + `detach` (tc mode) with both binaries, the order
alternating from pair to pair, each started once the last
detach's deleter child is gone; and `--version` likewise (process start alone). Wall
time is fork to reap (os.wait4), as benches/bench.py measures it; CPU time is
the process's user + system time (rusage), which other load on the machine
disturbs less. Prints, for each, the medians, the median of the per-pair
differences (NEW - OLD) and its range over the middle half of the pairs.
Removes everything it made.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import benchlib  # benches/, this script's own folder


def sh(args, input=None):
    r = subprocess.run(args, input=input, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def timed(args, env):
    t0 = time.perf_counter_ns()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    t1 = time.perf_counter_ns()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {p.stderr.read().decode()}")
    return (t1 - t0) / 1e6, (ru.ru_utime + ru.ru_stime) * 1000


def summary(name, old, new):
    diffs = sorted(b - a for a, b in zip(old, new))
    q = len(diffs) // 4
    mo, mn = statistics.median(old), statistics.median(new)
    print(f"| {name} | {mo:.2f} | {mn:.2f} | {statistics.median(diffs):+.2f} "
          f"({diffs[q]:+.2f} .. {diffs[-q - 1]:+.2f}) | {mn / mo:.3f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--ifaces", type=int, default=8)
    a = ap.parse_args()
    bins = [os.path.realpath(a.old), os.path.realpath(a.new)]
    tag = f"ptpie{os.getpid()}"
    pod, peer, state = tag, f"{tag}-peer", f"/run/{tag}-state"
    env = dict(os.environ, PODTAP_STATE_DIR=state, RUST_LOG="warn")
    kinds = [f"{k} {m}" for k in ("version", "attach", "detach") for m in ("wall", "CPU")]
    samples = {(k, b): [] for k in kinds for b in (0, 1)}

    def run(kind, b, rep, args):
        wall, cpu = timed(args, env)
        if rep >= 0:
            samples[(f"{kind} wall", b)].append(wall)
            samples[(f"{kind} CPU", b)].append(cpu)

    try:
        for ns in (pod, peer):
            sh(["ip", "netns", "add", ns])
            sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        benchlib.wire_pod(pod, peer, a.ifaces)
        for rep in range(-2, a.pairs):          # two untimed warm-up pairs
            order = (0, 1) if rep % 2 == 0 else (1, 0)
            for b in order:
                benchlib.wait_idle(bins, None)
                run("version", b, rep, [bins[b], "--version"])
                benchlib.wait_idle(bins, None)
                cid = f"{tag}-{rep}-{b}"
                run("attach", b, rep, [bins[b], "attach", "--netns", f"/run/netns/{pod}",
                                       "--id", cid])
                run("detach", b, rep, [bins[b], "detach", "--id", cid])
        print(f"{a.pairs} pairs, {a.ifaces} interfaces, tc mode; ms, fork to reap")
        print("| | old median | new median | new - old, median of pairs (middle half) | new / old |")
        print("|---|---|---|---|---|")
        for k in kinds:
            summary(k, samples[(k, 0)], samples[(k, 1)])
        json.dump({f"{k}-{'old' if b == 0 else 'new'}": v for (k, b), v in samples.items()},
                  sys.stderr)
        print(file=sys.stderr)
    finally:
        benchlib.ignore_signals()
        benchlib.wait_idle(bins, 30.0)
        for ns in (pod, peer):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["rm", "-rf", state])


if __name__ == "__main__":
    main()
