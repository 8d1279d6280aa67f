#!/usr/bin/env python3
"""podtap with big routing tables: the cost of scan, attach
and detach as the route count grows, next to the floor of a scan.

    sudo python3 benches/routes.py [--smoke] [--reps N] [--sizes 1000,10000,100000]
                                   [--bin PODTAP] [--floor FLOOR] [--out FILE]

For each size N: one pod netns (`<prefix>-pN`) holding eth0 (a veth whose
peer lives in `<prefix>-qN`) with an IPv4 and an IPv6 address, a default
route, N host routes in main and N/5 in table 100 that a policy rule points
to (N = 10 000 gives a pod of 10 000 + 2 000 routes), built with
one `ip -n NS -batch FILE`. Then, per repetition and size, in an order
rotated every repetition: `floor dump` (benches/floor.c: the dumps scan
makes, bytes read and dropped, nothing parsed), `floor attach-read` (those
dumps, then one TAP and its u32 + mirred redirect: the kernel work of an attach, in
C) with an untimed `floor detach`, `podtap scan`, `podtap attach` (tc mode)
and `podtap detach`. Printed Markdown: the table and the
method. Every namespace and the state dir are removed on any exit (SIGINT
and SIGTERM too). Exit 0 when every command succeeded, 1 otherwise, 2 for
bad usage. Timings are reported, never asserted.

Called by benches/run.sh (with the binaries it built); on its own it
compiles benches/floor.c into a temp dir and uses PODTAP_BIN or
target/<triple>/release/podtap.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import benchlib  # benches/, this script's own folder

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def sh(*cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


def default_bin():
    if os.environ.get("PODTAP_BIN"):
        return os.environ["PODTAP_BIN"]
    triple = sh("rustc", "-vV").stdout.split("host: ")[1].split()[0]
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    return os.path.join(target, triple, "release", "podtap")


class Bench:
    def __init__(self, a):
        self.a = a
        self.netns = []
        self.samples = {}  # (size, what) -> [(wall ms, cpu ms)]
        self.sizes_info = {}  # size -> {...}
        self.failures = []

    # ---- fixtures -------------------------------------------------------

    def fixture(self, n):
        pod, peer = f"{self.a.prefix}-p{n}", f"{self.a.prefix}-q{n}"
        for ns in (pod, peer):
            sh("ip", "netns", "add", ns)
            self.netns.append(ns)
        lines = [
            f"link add eth0 type veth peer name p0 netns {peer}",
            "addr add 198.18.0.2/16 dev eth0",
            "addr add 2001:db8::2/64 dev eth0 nodad",
            "link set lo up",
            "link set eth0 up",
            "route add default via 198.18.0.1 dev eth0",
        ]
        lines += [f"route add 10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}/32"
                  " via 198.18.0.1 dev eth0" for i in range(n)]
        lines += [f"route add 11.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}/32"
                  " via 198.18.0.1 dev eth0 table 100" for i in range(n // 5)]
        lines.append("rule add from 198.18.5.0/24 table 100 pref 100")
        path = os.path.join(self.a.workdir, f"routes-{n}.batch")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        sh("ip", "-n", pod, "-batch", path)
        sh("ip", "-n", peer, "link", "set", "p0", "up")
        return pod

    def cleanup(self):
        for ns in self.netns:
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        self.netns = []
        shutil.rmtree(self.a.state_dir, ignore_errors=True)

    # ---- timing ---------------------------------------------------------

    def quiet(self):
        """Wait until no podtap process of ours is left (detach returns before
        its deleter child has finished the kernel's clean-up)."""
        exe = os.path.realpath(self.a.bin)
        for _ in range(500):
            busy = False
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    try:
                        busy |= os.readlink(f"/proc/{pid}/exe") == exe
                    except OSError:
                        pass
            if not busy:
                return
            time.sleep(0.01)

    def timed(self, size, what, argv, out=subprocess.DEVNULL):
        self.quiet()
        t0 = time.perf_counter_ns()
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE)
        _, status, ru = os.wait4(p.pid, 0)
        ms = (time.perf_counter_ns() - t0) / 1e6
        p.returncode = os.waitstatus_to_exitcode(status)
        err = p.stderr.read().decode(errors="replace").strip()
        p.stderr.close()
        if p.returncode != 0:
            self.failures.append(f"{what} at {size}: exit {p.returncode}: {err[-300:]}")
            return False
        cpu = (ru.ru_utime + ru.ru_stime) * 1e3
        self.samples.setdefault((size, what), []).append((ms, cpu))
        return True

    def rss(self, argv):
        """Peak RSS (KiB) of one untimed run, from /usr/bin/time -f %M."""
        if not shutil.which("time") and not os.path.exists("/usr/bin/time"):
            return None
        r = subprocess.run(["/usr/bin/time", "-f", "%M"] + argv,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            return int(r.stderr.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return None

    # ---- the run --------------------------------------------------------

    def podtap(self, *args):
        return [self.a.bin, *args]

    def one(self, size, ns, what, sid):
        path = f"/run/netns/{ns}"
        st = ["--state-dir", self.a.state_dir]
        if what == "dump":
            return self.timed(size, what, [self.a.floor, "dump", ns])
        if what == "scan":
            return self.timed(size, what, self.podtap("scan", "--netns", path))
        if what == "floor":
            ok = self.timed(size, what, [self.a.floor, "attach-read", ns, "1"])
            r = subprocess.run([self.a.floor, "detach", ns], capture_output=True, text=True)
            if r.returncode != 0:
                self.failures.append(f"floor detach at {size}: {r.stderr[-300:]}")
            return ok and r.returncode == 0
        # attach then detach, each timed
        ok = self.timed(size, "attach", self.podtap("attach", *st, "--netns", path, "--id", sid))
        ok = self.timed(size, "detach", self.podtap("detach", *st, "--id", sid)) and ok
        return ok

    def measure_sizes(self, size, ns):
        """Untimed: bytes printed and recorded, peak RSS."""
        path = f"/run/netns/{ns}"
        st = ["--state-dir", self.a.state_dir]
        sid = f"rt-size-{size}"
        info = {}
        r = subprocess.run([self.a.floor, "dump", ns], capture_output=True, text=True)
        info["dump_bytes"] = json.loads(r.stdout)["bytes"] if r.returncode == 0 else None
        r = subprocess.run(self.podtap("scan", "--netns", path), capture_output=True)
        info["scan_json"] = len(r.stdout)
        info["routes"] = len(json.loads(r.stdout)["routes"]) if r.returncode == 0 else None
        r = subprocess.run(self.podtap("attach", *st, "--netns", path, "--id", sid),
                           capture_output=True)
        info["attach_json"] = len(r.stdout)
        if r.returncode != 0:
            self.failures.append(f"untimed attach at {size}: {r.stderr.decode()[-300:]}")
        cp = os.path.join(self.a.state_dir, f"{sid}.json")
        info["checkpoint"] = os.path.getsize(cp) if os.path.exists(cp) else None
        r = subprocess.run(self.podtap("detach", *st, "--id", sid), capture_output=True)
        if r.returncode != 0:
            self.failures.append(f"untimed detach at {size}: {r.stderr.decode()[-300:]}")
        self.quiet()
        info["rss_scan"] = self.rss(self.podtap("scan", "--netns", path))
        info["rss_attach"] = self.rss(self.podtap("attach", *st, "--netns", path, "--id", sid))
        self.quiet()
        info["rss_detach"] = self.rss(self.podtap("detach", *st, "--id", sid))
        self.quiet()
        info["rss_dump"] = self.rss([self.a.floor, "dump", ns])
        self.sizes_info[size] = info

    def leftovers(self, ns):
        links = json.loads(sh("ip", "-n", ns, "-j", "link", "show").stdout)
        extra = [l["ifname"] for l in links if l["ifname"] not in ("lo", "eth0")]
        qd = [q for q in json.loads(sh("tc", "-n", ns, "-j", "qdisc", "show").stdout)
              if q.get("kind") in ("ingress", "clsact")]
        files = [f for f in os.listdir(self.a.state_dir) if f.endswith(".json")] \
            if os.path.isdir(self.a.state_dir) else []
        return extra + [f"qdisc {q['kind']} on {q.get('dev')}" for q in qd] + files

    def run(self):
        os.makedirs(self.a.state_dir, mode=0o700, exist_ok=True)
        pods = {}
        for n in self.a.sizes:
            t0 = time.monotonic()
            pods[n] = self.fixture(n)
            self.sizes_info.setdefault(n, {})
            print(f"routes.py: fixture of {n} routes built in {time.monotonic() - t0:.2f} s",
                  file=sys.stderr)
        for n in self.a.sizes:
            self.measure_sizes(n, pods[n])
        kinds = ["dump", "floor", "scan", "attach"]
        for rep in range(-1, self.a.reps):  # rep -1: untimed warm-up
            keep = dict(self.samples)
            for n in self.a.sizes:
                k = rep % len(kinds)
                order = kinds[k:] + kinds[:k]
                for what in order:
                    self.one(n, pods[n], what, f"rt-{n}-{rep + 1}")
            if rep < 0:
                self.samples = keep
            print(f"routes.py: repetition {rep + 1}/{self.a.reps} done", file=sys.stderr)
        self.quiet()
        for n in self.a.sizes:
            left = self.leftovers(pods[n])
            if left:
                self.failures.append(f"left behind at {n}: {', '.join(left)}")

    # ---- report ---------------------------------------------------------

    def stat(self, size, what, idx=0):
        xs = sorted(s[idx] for s in self.samples.get((size, what), []))
        if not xs:
            return None
        return statistics.median(xs), xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]

    def report(self):
        def f(v):
            if v is None:
                return "–"
            return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"

        def ms(size, what):
            s = self.stat(size, what)
            return "–" if s is None else f"{f(s[0])} / {f(s[1])}"

        def mib(kib):
            return "–" if kib is None else f"{kib / 1024:.1f}"

        def size_of(b):
            if b is None:
                return "–"
            return f"{b / 1e6:.2f} MB" if b >= 1e6 else f"{b / 1e3:.1f} kB"

        out = ["#### Routing size: scan, attach and detach as the route count grows", ""]
        out.append("Wall time (ms), median / p95 over "
                   f"{self.a.reps} repetitions; routes = main-table routes "
                   "(plus a fifth as many in table 100).")
        out.append("")
        out.append("| routes | bare dump (floor.c) | floor.c attach-read | podtap scan | "
                   "podtap attach | attach / dump | floor.c attach-read / dump | "
                   "podtap detach |")
        out.append("|---|---|---|---|---|---|---|---|")

        def over_dump(size, what):
            # With its 95% interval (benchlib.ratio_ci).
            walls = [w for w, _ in self.samples.get((size, what), [])]
            dumps = [w for w, _ in self.samples.get((size, "dump"), [])]
            return benchlib.ratio_text(walls, dumps)
        for n in self.a.sizes:
            out.append(f"| {n:,} | {ms(n, 'dump')} | {ms(n, 'floor')} | {ms(n, 'scan')} | "
                       f"{ms(n, 'attach')} | {over_dump(n, 'attach')} | "
                       f"{over_dump(n, 'floor')} | {ms(n, 'detach')} |".replace(",", " "))
        out.append("")
        out.append("CPU time (user + sys, ms, median) of the same runs:")
        out.append("")
        out.append("| routes | bare dump | floor.c attach-read | scan | attach | detach |")
        out.append("|---|---|---|---|---|---|")
        for n in self.a.sizes:
            cells = []
            for what in ("dump", "floor", "scan", "attach", "detach"):
                s = self.stat(n, what, 1)
                cells.append("–" if s is None else f(s[0]))
            out.append(f"| {n:,} | ".replace(",", " ") + " | ".join(cells) + " |")
        out.append("")
        out.append("Sizes (one untimed run each):")
        out.append("")
        out.append("| routes | routes in the description | netlink bytes dumped | "
                   "checkpoint | scan JSON | attach JSON | peak RSS MiB: dump / scan / "
                   "attach / detach |")
        out.append("|---|---|---|---|---|---|---|")
        for n in self.a.sizes:
            i = self.sizes_info.get(n, {})
            rss = " / ".join(mib(i.get(k)) for k in ("rss_dump", "rss_scan", "rss_attach",
                                                       "rss_detach"))
            out.append(f"| {n:,} | {i.get('routes', '–'):,} | ".replace(",", " ")
                       + f"{size_of(i.get('dump_bytes'))} | {size_of(i.get('checkpoint'))} | "
                       f"{size_of(i.get('scan_json'))} | {size_of(i.get('attach_json'))} | "
                       f"{rss} |")
        out.append("")
        if self.failures:
            out.append(f"**Failures: {len(self.failures)}**")
            out += [f"- {x}" for x in self.failures]
            out.append("")
        out.append(
            "Method (`benches/routes.py`): for each size one pod netns holds `eth0` (a "
            "veth, peer in a second netns) with 198.18.0.2/16, 2001:db8::2/64, a default "
            "route, N /32 routes via the gateway in main and N/5 in table 100 with a "
            "`from 198.18.5.0/24` rule pointing there (N = 10 000: 12 000 routes), "
            "built by one `ip -n NS -batch`. Contenders, each a process timed from fork to "
            "reap (`perf_counter_ns` around `Popen` + `wait4`, whose rusage gives the CPU "
            "time), stdout to /dev/null: *bare dump* is `floor dump` from "
            "`benches/floor.c`: the six dumps `podtap scan` makes (links, addresses, "
            "neighbours, routes of every family and table, IPv4 and IPv6 rules), one after "
            "another on one netlink socket, every datagram read into a 64 KiB buffer and "
            "dropped, nothing parsed; it is the floor for a scan (and for attach's survey). "
            "*floor.c attach-read* is the floor of the attach itself: in one process, the "
            "same dumps, then what `floor attach-tc` does for one interface (its link dump, "
            "a persistent TAP, link settings, two ingress qdiscs, the u32 + mirred redirect each "
            "way, the TAP up), nothing parsed or printed; an untimed `floor detach` undoes "
            "it. *scan* is `podtap scan`, *attach* `podtap attach --mode tc` (one TAP, its "
            "wiring, the checkpoint, the description printed) and *detach* `podtap detach`. "
            f"One untimed warm-up round, then {self.a.reps} repetitions; in each, every "
            "size runs dump, floor.c attach-read, scan and attach+detach, in an order "
            "rotated every "
            "repetition; each command starts once no podtap process is left (detach "
            "returns before its deleter child). Reported: median and p95 (nearest rank) "
            "of the wall times, median CPU time; a ratio to the dump with its 95% interval "
            "in parentheses (a percentile bootstrap of the ratio of medians, each "
            "contender's repetitions resampled on their own, 2 000 times, seeded: "
            "`benchlib.ratio_ci`). Sizes come from one untimed run per size: "
            "the bytes the dumps read, the checkpoint file right after attach, the bytes "
            "scan and attach print; peak RSS from `/usr/bin/time -f %M`, one untimed run "
            "each. After the run the pod netns must hold only `lo` and `eth0`, no ingress "
            "qdisc, and the state dir no checkpoint.")
        out.append("")
        return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=None)
    p.add_argument("--floor", default=None, help="compiled benches/floor.c")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--smoke", action="store_true", help="2 reps at 1000 routes only")
    p.add_argument("--prefix", default=f"ptr{os.getpid()}")
    p.add_argument("--state-dir", default=None)
    p.add_argument("--out", default=None, help="append the Markdown there (default stdout)")
    a = p.parse_args()
    if os.geteuid() != 0:
        print("routes.py: needs root (network namespaces, TAPs)", file=sys.stderr)
        return 2
    try:
        a.sizes = [int(x) for x in a.sizes.split(",") if x]
    except ValueError:
        print(f"routes.py: --sizes: not a list of numbers: {a.sizes}", file=sys.stderr)
        return 2
    if a.smoke:
        a.reps, a.sizes = 2, [1000]
    if a.reps < 1 or not a.sizes or any(n < 1 or n > 1_000_000 for n in a.sizes):
        print("routes.py: --reps must be at least 1, sizes between 1 and 1000000",
              file=sys.stderr)
        return 2
    a.bin = a.bin or default_bin()
    if not os.access(a.bin, os.X_OK):
        print(f"routes.py: no podtap binary at {a.bin}", file=sys.stderr)
        return 2
    a.state_dir = a.state_dir or f"/run/{a.prefix}-state"
    a.workdir = tempfile.mkdtemp(prefix=f"{a.prefix}.")
    bench = Bench(a)

    def stop(sig, _frame):
        raise SystemExit(128 + sig)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        if a.floor is None:
            a.floor = os.path.join(a.workdir, "floor")
            sh("gcc", "-O2", "-Wall", "-Wno-stringop-overflow", "-o", a.floor,
               os.path.join(HERE, "floor.c"))
        bench.run()
        benchlib.emit(bench.report(), a.out, append=True)
    finally:
        benchlib.ignore_signals()
        bench.cleanup()
        shutil.rmtree(a.workdir, ignore_errors=True)
    if bench.failures:
        print("routes.py: failures:\n  " + "\n  ".join(bench.failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
