#!/usr/bin/env python3
"""Where a podtap attach and detach spend their time, next to benches/floor.c.

    sudo python3 benches/phases.py --bin PODTAP [--floor FLOOR] [--reps 20] [--sizes 8,64]
                                   [--old OLD_PODTAP] [--smoke] [--out FILE]
                                   [--prefix P] [--state-dir DIR] [--workdir DIR]

For each size one pod netns with N veths (the fixture of benches/bench.py).
Each repetition runs, per size and in an order rotated every repetition:
floor.c `attach-tc` + `detach-early` (the floor: podtap's tc-mode kernel work in
one C process, pipelined netlink, no checkpoint), floor.c `attach-read` (the
same attach after the dumps podtap's scan makes; informational), `podtap attach` + `podtap
detach` with PODTAP_PHASES=1 (each prints its phases on stderr, see
src/phases.rs), and, with --old, the same two commands of another binary
(before/after, same run). Once per repetition it also runs `podtap --version`,
an empty static C program (`true.c`) and, on x86_64, a static program without
a C library (`bare.c`: `_start` calls exit_group), fork to reap: what starting
and ending a process costs here, and how much of that is glibc's start-up and
exit. Once, before the repetitions, it times the CPUID instruction on x86_64
(`cpuid.c`), which glibc's start-up runs to learn the CPU's features and cache
sizes: on a VM each one traps to the hypervisor. Every process starts once the
last one's children (detach's deleter) are gone. Wall time is fork to reap (os.wait4);
`process start` is fork to podtap's `main` and `exit` is podtap's last mark to
reap (both from CLOCK_MONOTONIC, which the driver and podtap share).

Prints one Markdown section (tables and a Method paragraph) on stdout or into
--out. --smoke: 2 repetitions at 1 and 8 interfaces (shows the harness works).
Removes every netns and state dir it made, on any exit. Exit status 0 when every
command succeeded and left nothing behind, 1 otherwise, 2 for a usage error.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import benchlib  # benches/, this script's own folder

PREFIX = "podtap-phases "
ATTACH = ["args", "logging", "netns_open", "netns_thread", "locks", "runtime",
          "checkpoint_read", "sockets", "scan", "plan", "checkpoint_intent", "taps",
          "wiring", "describe", "checkpoint_complete", "runtime_drop", "release", "print"]
DETACH = ["args", "logging", "locks", "checkpoint_read", "netns_open", "netns_thread",
          "runtime", "sockets", "observe", "undo", "runtime_drop", "checkpoint_remove",
          "release", "registry"]
WHAT = {
    "start": "process start: fork to `main` (exec, static-pie self-relocation, libc init)",
    "args": "argument parsing (attach and detach: src/doors/cli/quick.rs; else clap)", "logging": "tracing subscriber",
    "netns_open": "open the netns file", "netns_thread": "start the netns thread",
    "locks": "id lock (state dir) and netns lock", "runtime": "tokio runtime created",
    "checkpoint_read": "read the checkpoint (none for attach)",
    "sockets": "wait for the netns thread's netlink sockets",
    "scan": "scan: six dumps on two threads, qdiscs, ingress filters, description",
    "plan": "plan (pure)", "checkpoint_intent": "intent checkpoint written",
    "taps": "TAPs: TUNSETIFF, owner, persist, close (on fds the netns thread opened)",
    "wiring": "wiring: one batch of link changes, qdiscs, filters",
    "describe": "description built", "checkpoint_complete": "final checkpoint written",
    "runtime_drop": "runtime, sockets and netns thread released",
    "release": "locks and netns released", "print": "JSON printed",
    "observe": "link and filter dumps (what to undo, proven ours)",
    "undo": "pod side batch, group delete sent, RTM_DELLINK seen for every TAP",
    "checkpoint_remove": "checkpoint removed", "registry": "CNI registry entry forgotten",
    "exit": "exit: last mark to reap (destructors, exit_group, the parent's wait)",
}


def sh(args, input=None, check=True):
    r = subprocess.run(args, input=input, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def timed(args, env=None):
    """Fork to reap: (ms, rc, stderr, t0_ns, t1_ns, cpu_ms), CPU time being user + system."""
    err = tempfile.TemporaryFile()
    t0 = time.perf_counter_ns()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err,
                         stdin=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    t1 = time.perf_counter_ns()
    err.seek(0)
    text = err.read().decode(errors="replace")
    err.close()
    cpu = (ru.ru_utime + ru.ru_stime) * 1e3
    return (t1 - t0) / 1e6, os.waitstatus_to_exitcode(status), text, t0, t1, cpu


def phases_of(stderr, t0, t1):
    """podtap's phase line as {phase: us}, with start and exit from the driver's clock."""
    for line in stderr.splitlines():
        if line.startswith(PREFIX):
            rec = json.loads(line[len(PREFIX):])
            out = {"start": (rec["main_ns"] - t0) / 1e3, "exit": (t1 - rec["end_ns"]) / 1e3}
            for name, us in rec["phases"]:
                out[name] = out.get(name, 0) + us
            return out
    return None


def med(xs):
    return statistics.median(xs) if xs else float("nan")


class Run:
    def __init__(self, a):
        self.a = a
        self.samples = {}      # key -> list
        self.phases = {}       # (cmd, n) -> list of dicts
        self.failures = []
        self.timing = False
        self.made_ns = []
        self.exes = {os.path.realpath(p) for p in (a.bin, a.floor, a.old) if p}

    def record(self, key, v):
        if self.timing:
            self.samples.setdefault(key, []).append(v)

    def fail(self, what, rc, err):
        self.failures.append(f"{what}: exit {rc}: {err.strip()[-300:]}")

    def ns_add(self, name):
        sh(["ip", "netns", "add", name])
        self.made_ns.append(name)
        sh(["ip", "-n", name, "link", "set", "lo", "up"])

    def make_pod(self, n):
        return benchlib.make_pod(self.ns_add, f"{self.a.prefix}-pp{n}", f"{self.a.prefix}-pp{n}-peer", n)

    def links(self, ns):
        return sorted(l["ifname"] for l in json.loads(sh(["ip", "-n", ns, "-j", "link", "show"])))

    def settle(self, timeout=30.0):
        """Wait until no podtap or floor.c process is left (detach's deleter child)."""
        benchlib.wait_idle(self.exes, timeout, poll=0.002)

    def check_clean(self, ns, base, who):
        """The pod netns has its own links again (waits for a deleter child)."""
        for _ in range(300):
            if self.links(ns) == base:
                return
            time.sleep(0.01)
        self.failures.append(f"{who}: links left in {ns}: {sorted(set(self.links(ns)) - set(base))}")
        for name in set(self.links(ns)) - set(base):
            sh(["ip", "-n", ns, "link", "delete", name], check=False)

    def floor_step(self, key, argv, n):
        """Run one floor.c command and record its wall and CPU time under
        `key` (who, cmd), or nothing when `key` is None. Whether it succeeded."""
        ms, rc, err, _, _, cpu = timed(argv)
        if rc != 0:
            self.fail(f"floor.c {argv[1]} n={n}", rc, err)
            return False
        if key:
            self.record((key[0], key[1], n), ms)
            self.record((key[0], f"{key[1]}-cpu", n), cpu)
        return True

    def floor(self, n, ns, base):
        f = self.a.floor
        if self.floor_step(("floor", "attach"), [f, "attach-tc", ns, str(n)], n):
            self.floor_step(("floor", "detach"), [f, "detach-early", ns], n)
        self.settle()
        self.check_clean(ns, base, f"floor.c n={n}")
        # The same attach after the scan's dumps (informational: the floor
        # of an attach that reads what podtap reads); its detach is untimed.
        self.floor_step(("floor-read", "attach"), [f, "attach-read", ns, str(n)], n)
        self.floor_step(None, [f, "detach", ns], n)
        self.settle()
        self.check_clean(ns, base, f"floor.c attach-read n={n}")

    def podtap(self, who, binary, n, ns, base, rep):
        env = dict(os.environ, PODTAP_STATE_DIR=self.a.state_dir, PODTAP_PHASES="1")
        env.pop("PODTAP_LOG", None)
        sid = f"{self.a.prefix}-{who}-{n}-{rep}"
        for cmd, args in (("attach", ["attach", "--netns", f"/run/netns/{ns}", "--id", sid]),
                          ("detach", ["detach", "--id", sid])):
            self.settle()
            ms, rc, err, t0, t1, cpu = timed([binary, *args], env)
            if rc != 0:
                self.fail(f"{who} {cmd} n={n}", rc, err)
                if cmd == "attach":
                    timed([binary, "detach", "--id", sid], env)
                break
            self.record((who, cmd, n), ms)
            self.record((who, f"{cmd}-cpu", n), cpu)
            if who == "podtap":
                ph = phases_of(err, t0, t1)
                if ph is None:
                    self.fail(f"podtap {cmd} n={n}", 0, "no phase line on stderr (PODTAP_PHASES=1)")
                elif self.timing:
                    self.phases.setdefault((cmd, n), []).append(ph)
        self.settle()
        self.check_clean(ns, base, f"{who} n={n}")

    def start_costs(self):
        starters = [("version", [self.a.bin, "--version"]), ("true", [self.a.true])]
        if self.a.bare:
            starters.append(("bare", [self.a.bare]))
        for who, argv in starters:
            ms, rc, err, _, _, _ = timed(argv)
            if rc != 0:
                self.fail(who, rc, err)
            else:
                self.record((who, "start", 0), ms)

    def run(self):
        pods = {n: self.make_pod(n) for n in self.a.sizes}
        bases = {n: self.links(pods[n]) for n in self.a.sizes}
        kinds = ["floor", "podtap"] + (["old"] if self.a.old else [])
        for rep in range(-1, self.a.reps):       # one untimed warm-up round
            self.timing = rep >= 0
            for i in range(len(kinds)):
                kind = kinds[(rep + i) % len(kinds)]
                for n in self.a.sizes:
                    if kind == "floor":
                        self.floor(n, pods[n], bases[n])
                    else:
                        binary = self.a.bin if kind == "podtap" else self.a.old
                        self.podtap(kind, binary, n, pods[n], bases[n], rep)
            self.start_costs()

    def report(self):
        s, a = self.samples, self.a
        out = ["### Attach and detach per phase, next to floor.c", ""]
        head = "| | " + " | ".join(f"{n} if" for n in a.sizes) + " |"
        rule = "|---|" + "---|" * len(a.sizes)
        out += ["Wall time, fork to reap (ms, median of the repetitions), and the ratio to floor.c:", "",
                head, rule]
        rows = [("floor.c attach-tc", ("floor", "attach")),
                ("floor.c attach-read (the scan's dumps first)", ("floor-read", "attach")),
                ("podtap attach, tc", ("podtap", "attach")),
                ("floor.c detach-early", ("floor", "detach")), ("podtap detach, tc", ("podtap", "detach"))]
        if a.old:
            rows += [("old binary attach, tc", ("old", "attach")), ("old binary detach, tc", ("old", "detach"))]
        for label, (who, cmd) in rows:
            out.append(f"| {label} | " + " | ".join(
                f"{med(s.get((who, cmd, n), [])):.2f} ({len(s.get((who, cmd, n), []))})" for n in a.sizes) + " |")
        for label, who in [("podtap", "podtap")] + ([("old binary", "old")] if a.old else []):
            for cmd in ("attach", "detach"):
                out.append(f"| {label} {cmd} / floor.c | " + " | ".join(
                    benchlib.ratio_text(s.get((who, cmd, n), []), s.get(('floor', cmd, n), []))
                    for n in a.sizes) + " |")
        out.append("| podtap attach / floor.c attach-read | " + " | ".join(
            benchlib.ratio_text(s.get(('podtap', 'attach', n), []), s.get(('floor-read', 'attach', n), []))
            for n in a.sizes) + " |")
        out += ["", "CPU time of the same runs (user + system of the process and the children it "
                "waited for, ms, median); on a shared machine it moves less than wall time:", "",
                head, rule]
        for label, (who, cmd) in rows:
            out.append(f"| {label} | " + " | ".join(
                f"{med(s.get((who, cmd + '-cpu', n), [])):.2f}" for n in a.sizes) + " |")
        true_name = {"static": "empty static C program", "dynamic": "empty dynamic C program",
                     "given": "the `--true` program"}[a.true_kind]
        out += ["", f"Process start and exit alone (fork to reap, ms, median): {true_name} "
                f"{med(s.get(('true', 'start', 0), [])):.2f}; `podtap --version` "
                f"{med(s.get(('version', 'start', 0), [])):.2f}" + self.bare_line(), ""]
        for cmd, names in (("attach", ATTACH), ("detach", DETACH)):
            out += [f"`podtap {cmd}` per phase (µs, median over the repetitions; phases in order):", "",
                    "| phase | what | " + " | ".join(f"{n} if" for n in a.sizes) + " |",
                    "|---|---|" + "---|" * len(a.sizes)]
            for ph in ["start"] + names + ["exit"]:
                vals = [med([p.get(ph, 0) for p in self.phases.get((cmd, n), [])]) for n in a.sizes]
                out.append(f"| {ph} | {WHAT.get(ph, '')} | " + " | ".join(f"{v:.0f}" for v in vals) + " |")
            sums = [sum(med([p.get(ph, 0) for p in self.phases.get((cmd, n), [])])
                        for ph in ["start"] + names + ["exit"]) for n in a.sizes]
            out.append("| sum of the medians | | " + " | ".join(f"{v:.0f}" for v in sums) + " |")
            out.append(f"| floor.c {cmd} (total) | | " + " | ".join(
                f"{med(s.get(('floor', cmd, n), [])) * 1000:.0f}" for n in a.sizes) + " |")
            out.append("")
        out += ["**Method.** `benches/phases.py`: one pod netns per size (N veths, each with an IPv4 "
                "/24 and an IPv6 /64, a default route). After one untimed warm-up round, "
                f"{a.reps} repetitions; in each, every contender runs once per size, in an order "
                "rotated every repetition: floor.c `attach-tc` then `detach-early`, floor.c "
                "`attach-read` (the six dumps of `floor dump`, which podtap's scan makes, then "
                "`attach-tc`; undone by an untimed `floor detach`), `podtap attach` "
                "then `podtap detach` (tc mode)" + (", the old binary's attach and detach" if a.old else "")
                + ", then `podtap --version`, an empty static C program and (x86_64) one without a C "
                "library. On x86_64, before the repetitions, `cpuid.c` times 1 000 CPUID "
                "instructions (leaf 4) one by one; the median is reported. Each process starts once "
                "no podtap or floor.c process is left (detach returns before its deleter child "
                "ends) and the pod netns has its own links again. Wall time is fork to reap "
                "(`perf_counter_ns` around `Popen` and `os.wait4`). With `PODTAP_PHASES=1` podtap "
                "prints its phase marks (src/phases.rs): each phase is the time from the mark "
                "before it; `start` is the driver's fork to podtap's `main` and `exit` podtap's "
                "last mark to the reap, on the same CLOCK_MONOTONIC. Reported: medians per phase "
                "(so their sum differs a little from the median wall time) and medians of the "
                "wall times; ratios are between medians of the same run, each with its 95% "
                "interval in parentheses: a percentile bootstrap of the ratio of medians, each "
                "contender's repetitions resampled on their own, 2 000 times, seeded "
                "(`benchlib.ratio_ci`).", ""]
        if self.failures:
            out += ["Failures:", ""] + [f"- {f}" for f in self.failures] + [""]
        return "\n".join(out)

    def bare_line(self):
        """The libc-free program and the CPUID probe, where they ran (x86_64)."""
        if not self.a.bare:
            return "."
        line = (f"; a static program without a C library "
                f"{med(self.samples.get(('bare', 'start', 0), [])):.2f}.")
        if self.a.true_kind == "static":
            line += (" The empty static C program's extra time over the last one is glibc's "
                     "start-up and exit.")
        if self.a.cpuid_us is not None:
            line += (" glibc's start-up runs the CPUID instruction to learn the CPU's features "
                     f"and cache sizes; one CPUID took {self.a.cpuid_us:.2f} µs here (`cpuid.c`, "
                     "once before the repetitions: the median of 1 000 timed one by one; on a VM "
                     "it traps to the hypervisor).")
        return line

    def cleanup(self):
        self.settle(5.0)
        for ns in self.made_ns:
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        subprocess.run(["rm", "-rf", self.a.state_dir])


def build_helpers(a, here):
    """floor.c and true.c, compiled into the work dir unless given, and on x86_64
    bare.c and cpuid.c (which is run once here). A failure of the last two only
    leaves their figures out."""
    a.true_kind = "given"
    if not a.floor:
        a.floor = os.path.join(a.workdir, "floor")
        sh(["gcc", "-O2", "-Wall", "-Wno-stringop-overflow", "-o", a.floor,
            os.path.join(here, "floor.c")])
    if not a.true:
        try:
            a.true, a.true_kind = compile_c(a.workdir, "true", TRUE_C, ["-static"]), "static"
        except RuntimeError:    # no static libc installed
            a.true, a.true_kind = compile_c(a.workdir, "true", TRUE_C, []), "dynamic"
    a.bare, a.cpuid_us = None, None
    if os.uname().machine != "x86_64":
        return
    try:
        a.bare = compile_c(a.workdir, "bare", BARE_C, ["-static", "-nostdlib"])
        probe = compile_c(a.workdir, "cpuid", CPUID_C, [])
        a.cpuid_us = float(subprocess.run([probe], capture_output=True, text=True,
                                          check=True).stdout)
    except (RuntimeError, subprocess.CalledProcessError, ValueError) as e:
        print(f"phases.py: bare.c or cpuid.c left out: {e}", file=sys.stderr)


TRUE_C = "int main(void) { return 0; }\n"

# `_start` without a C library: the kernel's part of a process start (exec,
# exit) and nothing else.
BARE_C = r"""void _start(void) {
    __asm__ volatile("mov $231, %eax\n xor %edi, %edi\n syscall");  /* exit_group(0) */
    __builtin_unreachable();
}
"""

# Prints the median time of one CPUID instruction (leaf 4, as glibc's cache
# probe asks), in microseconds, over 1 000 timed one by one.
CPUID_C = r"""#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y);
}
int main(void) {
    static double d[1000]; unsigned a, b, c, e;
    for (int i = 0; i < 1000; i++) {
        double t = now(); __cpuid_count(4, i & 3, a, b, c, e); d[i] = now() - t;
    }
    qsort(d, 1000, sizeof d[0], cmp);
    printf("%.3f\n", d[500]);
    return 0;
}
"""


def compile_c(workdir, name, source, flags):
    src = os.path.join(workdir, name + ".c")
    with open(src, "w") as f:
        f.write(source)
    out = os.path.join(workdir, name)
    sh(["gcc", "-O2", *flags, "-o", out, src])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--old")
    ap.add_argument("--floor")
    ap.add_argument("--true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sizes", default="8,64")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--prefix", default=f"ptph{os.getpid()}")
    ap.add_argument("--state-dir")
    ap.add_argument("--workdir")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("phases.py: needs root (network namespaces, TAPs)", file=sys.stderr)
        return 2
    for p in (a.bin, a.old):
        if p and not os.access(p, os.X_OK):
            print(f"phases.py: no executable at {p}", file=sys.stderr)
            return 2
    a.sizes = [int(x) for x in a.sizes.split(",")]
    if a.smoke:
        a.reps, a.sizes = 2, [1, 8]
    a.state_dir = a.state_dir or f"/run/{a.prefix}-state"
    own_work = a.workdir is None
    a.workdir = a.workdir or tempfile.mkdtemp(prefix=f"{a.prefix}.")
    os.makedirs(a.state_dir, mode=0o700, exist_ok=True)
    r = Run(a)

    def on_term(signum, frame):
        raise SystemExit(130)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    try:
        build_helpers(a, os.path.dirname(os.path.abspath(__file__)))
        r.run()
        benchlib.emit(r.report(), a.out, append=False)
    finally:
        benchlib.ignore_signals()
        r.cleanup()
        if own_work:
            subprocess.run(["rm", "-rf", a.workdir])
    for f in r.failures:
        print(f"phases.py: {f}", file=sys.stderr)
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
