#!/usr/bin/env python3
"""Node scale: podtap's commands with N attachments on the node.

    sudo python3 benches/scale.py --bin PODTAP [--levels 1,100,500] [--reps 20]
                                  [--prefix P] [--state-dir DIR] [--out FILE] [--smoke]

Builds N pod netns (each one veth, `eth0`, with a 198.18.0.0/16 address and a
default route; the other ends sit in one hub netns of the bench's own), all
attached (tc mode) with the podtap CLI into one state dir, growing N through
the levels. At each level it times, in every repetition, one after the other:
`attach` of one more pod (netns made once, not counted in N), `check --id` of
the first and of the last pod attached, `list`, `list --json`, `detach` of the
extra pod, `detach` of the first pod and `attach` of it again; after each
detach it waits until detach's deleter child is gone. Prints a Markdown section (tables
and a Method paragraph) on stdout, or appends it to --out.

--smoke: levels 1,5,10 and 3 repetitions (shows the harness works, not speed).

Every netns is named <prefix>-*; the root netns is never touched. Everything
made (netns, state dir) is removed on exit, also on SIGINT/SIGTERM. Exit
status: 0 when every command succeeded and nothing was left, 1 otherwise,
2 for a usage error. Timings are never asserted.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import benchlib  # benches/, this script's own folder

problems = []


def log(msg):
    print(f"scale.py: {msg}", file=sys.stderr, flush=True)


sh, pct = benchlib.sh, benchlib.pct


def fmt(ms):
    if ms != ms:
        return "–"
    return f"{ms:.1f}" if ms < 100 else f"{ms:.0f}"


class Scale:
    def __init__(self, a):
        self.a = a
        self.bin = os.path.realpath(a.bin)
        self.env = dict(os.environ, PODTAP_STATE_DIR=a.state_dir)
        self.env.pop("PODTAP_LOG", None)
        self.hub = f"{a.prefix}-hub"
        self.netns = []       # every netns this run made, for cleanup
        self.pods = 0         # fixture pods made and attached (p0 .. p{pods-1})
        self.made_state = False
        # (command, N) -> list of (wall ms, cpu ms, maxrss KiB)
        self.samples = {}
        self.levels = {}      # N -> facts about the state dir at that level
        self.build_s = {}     # N -> seconds to make and attach the pods added for it
        self.rss = {}         # (command, N) -> peak RSS KiB, max of 3 untimed runs

    def pod(self, i):
        return f"{self.a.prefix}-p{i:04d}"

    # ---- fixture -------------------------------------------------------
    def make_netns(self, names):
        sh(["ip", "-batch", "-"], input="".join(f"netns add {n}\n" for n in names))
        self.netns += names

    def make_pods(self, idx):
        """Pods idx (ints; -1 is the extra pod): netns, veth, address, route."""
        names = [self.extra if i < 0 else self.pod(i) for i in idx]
        self.make_netns(names)
        hub = []
        for i, n in zip(idx, names):
            h = "hx" if i < 0 else f"h{i}"
            hub += [f"link add {h} type veth peer name eth0 netns {n}", f"link set {h} up"]
        sh(["ip", "-n", self.hub, "-batch", "-"], input="\n".join(hub) + "\n")

        def conf(pair):
            i, n = pair
            k = 4099 if i < 0 else i + 2
            lines = ["link set lo up", "link set eth0 up",
                     f"address add 198.18.{k // 256}.{k % 256}/16 dev eth0",
                     "route add default via 198.18.0.1 dev eth0"]
            sh(["ip", "-n", n, "-batch", "-"], input="\n".join(lines) + "\n")
        self.pool(conf, list(zip(idx, names)))

    def pool(self, fn, items):
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as ex:
            for f in [ex.submit(fn, x) for x in items]:
                f.result()

    def attach_cmd(self, ns, pid):
        return [self.bin, "attach", "--netns", f"/run/netns/{ns}", "--id", pid, "--mode", "tc"]

    def grow(self, n):
        """Make and attach pods until there are n."""
        t0 = time.monotonic()
        new = list(range(self.pods, n))
        if not new:
            return
        self.make_pods(new)

        def attach(i):
            r = subprocess.run(self.attach_cmd(self.pod(i), self.pod(i)), env=self.env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"fixture attach {self.pod(i)}: {r.stderr.strip()}")
        self.pool(attach, new)
        self.pods = n
        self.settle()
        self.build_s[n] = time.monotonic() - t0

    # ---- measurement ---------------------------------------------------
    def timed(self, args, expect=0):
        t0 = time.perf_counter_ns()
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, env=self.env)
        # Read first (the output of list at 500 is bigger than a pipe), then reap.
        out, err = p.stdout.read(), p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
        t1 = time.perf_counter_ns()
        p.stdout.close()
        p.stderr.close()
        rc = os.waitstatus_to_exitcode(status)
        if rc != expect:
            problems.append(f"{' '.join(args[1:])}: exit {rc}: {err.decode().strip()[:300]}")
            log(problems[-1])
        return (t1 - t0) / 1e6, (ru.ru_utime + ru.ru_stime) * 1000, ru.ru_maxrss, out

    def settle(self, timeout=30.0):
        """Wait until no process runs our binary (detach's deleter child)."""
        if benchlib.wait_idle((self.bin,), timeout):
            return
        problems.append(f"a podtap process was still running after {timeout:.0f} s")
        log(problems[-1])

    def peak_rss(self, argv):
        """Peak RSS (KiB) of one process, by a wrapper that waits for it
        (/usr/bin/time -f %M, else the stand-in's wait4 wrapper): wait4 of
        this driver's own child would count the Python process it was forked
        from. Not timed."""
        f = self.a.state_dir + "-rss.txt"
        if os.path.exists("/usr/bin/time"):
            cmd = ["/usr/bin/time", "-f", "%M", "-o", f] + argv
        elif self.a.standin:
            cmd = [self.a.standin, "rss"] + argv
        else:
            return 0
        r = subprocess.run(cmd, env=self.env, capture_output=True, text=True)
        if r.returncode != 0:
            problems.append(f"{' '.join(argv[1:])} (under the RSS wrapper): exit {r.returncode}")
            return 0
        txt = open(f).read() if cmd[0] == "/usr/bin/time" else r.stderr
        if os.path.exists(f):
            os.remove(f)
        return int(txt.strip().splitlines()[-1])

    def record(self, cmd, n, sample):
        self.samples.setdefault((cmd, n), []).append(sample[:2])

    def measure(self, n):
        xid = f"{self.a.prefix}-x"
        first = self.pod(0)
        for _ in range(self.a.reps):
            s = self.timed(self.attach_cmd(self.extra, xid))
            self.record("attach", n, s)
            try:
                eth0 = [i for i in json.loads(s[3])["interfaces"] if i["name"] == "eth0"]
                if not eth0[0].get("tap"):
                    raise ValueError("no tap")
            except (ValueError, KeyError, IndexError) as e:
                problems.append(f"attach at N={n}: output without a TAP ({e})")
            self.record("check", n, self.timed([self.bin, "check", "--id", first]))
            self.record("check last", n, self.timed([self.bin, "check", "--id", self.pod(n - 1)]))
            s = self.timed([self.bin, "list"])
            self.record("list", n, s)
            rows = s[3].decode().count("\n") - 1
            if rows != n + 1:
                problems.append(f"list at N={n}: {rows} rows, expected {n + 1}")
            s = self.timed([self.bin, "list", "--json"])
            self.record("list --json", n, s)
            self.list_json_bytes = len(s[3])
            self.record("detach", n, self.timed([self.bin, "detach", "--id", xid]))
            self.settle()
            # The pod attached first: its netns's /proc/sys/net entries are the oldest.
            self.record("detach first", n, self.timed([self.bin, "detach", "--id", first]))
            self.settle()
            self.record("attach first", n, self.timed(self.attach_cmd(first, first)))
        for c in ("list", "list --json"):
            self.rss[(c, n)] = max(self.peak_rss([self.bin] + c.split()) for _ in range(3))
        files = [os.path.join(self.a.state_dir, f) for f in os.listdir(self.a.state_dir)]
        cps = [f for f in files if f.endswith(".json")]
        du = sh(["du", "-sk", self.a.state_dir]).stdout.split()[0]
        self.levels[n] = {"checkpoints": len(cps), "files": len(files),
                          "bytes": sum(os.path.getsize(f) for f in files if os.path.isfile(f)),
                          "cp_bytes": sum(os.path.getsize(f) for f in cps),
                          "du_kib": int(du), "list_json_bytes": self.list_json_bytes}

    def run(self):
        if os.path.exists(self.a.state_dir):
            raise RuntimeError(f"{self.a.state_dir} exists; refusing to use it")
        os.makedirs(self.a.state_dir, mode=0o700)
        self.made_state = True
        self.extra = f"{self.a.prefix}-x"
        self.make_netns([self.hub])
        sh(["ip", "-n", self.hub, "link", "set", "lo", "up"])
        self.make_pods([-1])
        for n in self.a.levels:
            log(f"growing to {n} attachments")
            self.grow(n)
            log(f"measuring at {n} ({self.a.reps} reps)")
            self.measure(n)

    def cleanup(self):
        self.settle(timeout=10)
        if self.netns:
            sh(["ip", "-batch", "-"], check=False,
               input="".join(f"netns delete {n}\n" for n in self.netns))
        left = [n for n in sh(["ip", "netns", "list"], check=False).stdout.split()
                if n.startswith(f"{self.a.prefix}-")]
        for n in left:
            sh(["ip", "netns", "delete", n], check=False)
        if left:
            problems.append(f"netns left after the batch delete: {len(left)}")
        if self.made_state:
            shutil.rmtree(self.a.state_dir, ignore_errors=True)
            if os.path.exists(self.a.state_dir + "-rss.txt"):
                os.remove(self.a.state_dir + "-rss.txt")
        self.netns = []

    # ---- report ----------------------------------------------------------
    def report(self, seconds):
        a, ns = self.a, self.a.levels
        cmds = ["attach", "detach", "detach first", "attach first", "check", "check last",
                "list", "list --json"]
        label = {"attach": "`attach` (one more pod, 1 if, tc)", "detach": "`detach` (that pod)",
                 "detach first": "`detach` (the first pod attached)",
                 "attach first": "`attach` (that pod again)",
                 "check": "`check --id` (the first pod attached)",
                 "check last": "`check --id` (the last pod attached)", "list": "`list`",
                 "list --json": "`list --json`"}
        head = "| command | " + " | ".join(f"N = {n}" for n in ns) + " |\n|---|" + "---|" * len(ns) + "\n"
        md = ["#### 7. Node scale: commands with N attachments on the node\n\n",
              f"Process wall time (ms), median / p90 ({a.reps} reps each):\n\n", head]
        for c in cmds:
            cells = []
            for n in ns:
                w = [s[0] for s in self.samples.get((c, n), [])]
                cells.append(f"{fmt(pct(w, 50))} / {fmt(pct(w, 90))}")
            md.append(f"| {label[c]} | " + " | ".join(cells) + " |\n")
        md += ["\nCPU time (user + sys, ms, median) of the same runs:\n\n", head]
        for c in cmds:
            cells = [fmt(pct([s[1] for s in self.samples.get((c, n), [])], 50)) for n in ns]
            md.append(f"| {label[c]} | " + " | ".join(cells) + " |\n")
        lo, hi = ns[0], ns[-1]
        if hi > lo:
            md.append(f"\nMarginal wall time per extra attachment on the node, "
                      f"(median at {hi} − median at {lo}) / {hi - lo}, µs: ")
            md.append(", ".join(
                f"{c} {1000 * (pct([s[0] for s in self.samples[(c, hi)]], 50) - pct([s[0] for s in self.samples[(c, lo)]], 50)) / (hi - lo):.1f}"
                for c in cmds) + ".\n")
        md += ["\nThe state dir and `list` at each level:\n\n",
               "| N | checkpoints | files | bytes in files (checkpoints) | du (KiB) | `list --json` output (bytes) | `list` peak RSS (MiB) | `list --json` peak RSS (MiB) | pods made + attached for this level (s) |\n",
               "|---|---|---|---|---|---|---|---|---|\n"]
        for n in ns:
            lv = self.levels.get(n, {})
            rss = lambda c: self.rss.get((c, n), 0) / 1024
            md.append(f"| {n} | {lv.get('checkpoints', '–')} | {lv.get('files', '–')} | "
                      f"{lv.get('bytes', 0)} ({lv.get('cp_bytes', 0)}) | {lv.get('du_kib', '–')} | "
                      f"{lv.get('list_json_bytes', '–')} | {rss('list'):.1f} | {rss('list --json'):.1f} | "
                      f"{self.build_s.get(n, 0):.1f} |\n")
        w = [s[0] for s in self.samples.get(("list", hi), [])]
        met = "yes" if w and pct(w, 50) < 50 else "**no**"
        md += ["\n| quantity | measured | target | met |\n|---|---|---|---|\n",
               f"| `list` at {hi} attachments (median) | {fmt(pct(w, 50))} ms | < 50 ms | {met} |\n"]
        md.append(
            "\n**Method.** `benches/scale.py`: N pod netns, each with one veth (`eth0`, "
            "an address in 198.18.0.0/16, a default route; the peers in one hub netns), "
            "all attached in tc mode with the podtap CLI into one state dir on "
            f"{fs_type(os.path.dirname(a.state_dir))}, N growing through {', '.join(map(str, ns))} "
            "(fixtures built with `ip -batch` and 4 parallel attaches, not timed). At each level, "
            f"{a.reps} repetitions of, in this order: `attach` of one more pod (its netns made "
            "once, outside N), `check --id` of the first pod and of the last one attached, `list`, "
            "`list --json`, `detach` of the extra pod, `detach` of the first pod attached and "
            "`attach` of it again (the pod whose netns's `/proc/sys/net` entries are the oldest "
            "on the node); after each `detach` the bench waits until no podtap "
            "process is left (detach's deleter child). Each time is one process, fork to reap (`os.wait4`), with "
            "the CPU time of the process and of the children it waited for from the same call; "
            "the tables give the median and p90 (nearest rank) of the wall times and the "
            "median CPU time. Peak RSS: the most of 3 untimed runs under `/usr/bin/time -f %M` "
            "(else the stand-in's wait4 wrapper). Every exit status and the row count of `list` "
            "are checked. "
            f"Section took {seconds:.0f} s.\n")
        return "".join(md)


def fs_type(path):
    r = sh(["stat", "-f", "-c", "%T", path], check=False)
    return r.stdout.strip() or "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="the podtap binary")
    ap.add_argument("--prefix", default=f"pts{os.getpid()}", help="netns name prefix")
    ap.add_argument("--state-dir", help="state dir to create (default /run/PREFIX-state)")
    ap.add_argument("--levels", default="1,100,500")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--standin", help="benches/standin.c built: its `rss` wrapper, "
                    "when /usr/bin/time is missing")
    ap.add_argument("--out", help="append the Markdown here (default: stdout)")
    a = ap.parse_args()
    if a.smoke:
        a.levels, a.reps = "1,5,10", 3
    try:
        a.levels = sorted({int(x) for x in a.levels.split(",")})
        if not a.levels or a.levels[0] < 1 or a.levels[-1] > 4000 or a.reps < 1:
            raise ValueError
    except ValueError:
        print("scale.py: --levels takes 1..4000, comma-separated; --reps at least 1", file=sys.stderr)
        sys.exit(2)
    if os.geteuid() != 0:
        print("scale.py: needs root (network namespaces, TAPs)", file=sys.stderr)
        sys.exit(2)
    if not os.access(a.bin, os.X_OK):
        print(f"scale.py: no podtap binary at {a.bin}", file=sys.stderr)
        sys.exit(2)
    a.state_dir = a.state_dir or f"/run/{a.prefix}-state"

    def on_term(signum, frame):
        raise SystemExit(128 + signum)  # runs the finally clause: cleanup
    signal.signal(signal.SIGTERM, on_term)
    # Also when started in the background (which ignores SIGINT): Ctrl-C cleans up.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    s = Scale(a)
    t0 = time.time()
    try:
        # a second Ctrl-C during the clean-up must not leave hundreds of netns
        benchlib.run_then_clean(s.run, s.cleanup, problems, log)
    except KeyboardInterrupt:
        log("interrupted; removed what it made")
        sys.exit(130)
    md = s.report(time.time() - t0)
    if problems:
        md += "\nProblems: " + "; ".join(problems) + "\n"
    if a.out:
        with open(a.out, "a") as f:
            f.write("\n" + md)
        log(f"appended to {a.out}")
    else:
        sys.stdout.write(md)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
