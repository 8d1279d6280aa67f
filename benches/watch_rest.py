#!/usr/bin/env python3
"""What running `podtap watch`es cost while nothing about their pods changes.
Called from benches/run.sh; runs on its own too:

  python3 benches/watch_rest.py --bin PODTAP [--before PODTAP] [--pods N]
      [--rest-secs S] [--reps N] [--smoke] [--prefix P] [--out FILE]

N pods (default 200), each a netns with one veth (its peer in one shared peer
netns), attached with the podtap CLI into one state dir, one `podtap watch`
(no VMM) on each; the pods pinned by their bind mount only, then also by a
process inside (`--holders`, default both). Then, per binary (`--before`
first when given):
  1. CPU of all watchers together over --rest-secs (default 60) at rest;
  2. CPU of all watchers across one attach + detach of another pod, minus the
     same-length window at rest just before it, --reps times (default 10);
  3. the same across an `ip netns add` + `ip netns del` of an unrelated netns
     (a mount-table change on the node, what every pod start and stop does);
  4. per-watch RSS (VmRSS, and Pss from smaps_rollup).
CPU is each watch's process CPU clock (nanoseconds on a CPU, the
sum_exec_runtime of /proc/PID/schedstat, all threads, exited ones too), wakeups
the third field of /proc/PID/task/*/schedstat (timeslices run). --smoke: 5 pods, 3 s at rest, 2 reps.

Everything lives in netns named PREFIX-w*; the root netns is never touched.
Everything made is removed on exit, on failure and on SIGINT/SIGTERM.
Exit status: 0 when it ran and left nothing, 1 otherwise, 2 on bad usage.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import select
import sys
import threading
import time


def log(msg):
    print(time.strftime("%H:%M:%S ") + msg, file=sys.stderr, flush=True)


def sh(args, input=None, check=True, env=None):
    r = subprocess.run(args, input=input, capture_output=True, text=True, env=env)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


class Stop(Exception):
    pass


def on_signal(signum, _frame):
    raise Stop(f"signal {signum}")


def cpu_ns(pid):
    """Nanoseconds a process has run on a CPU, all its threads, exited ones
    too: its process CPU clock (CPUCLOCK_SCHED, the sum_exec_runtime that
    /proc/PID/schedstat shows per thread)."""
    return time.clock_gettime_ns(((~pid) << 3) | 2)


def runs(pid):
    """Timeslices run (the third field of /proc/PID/task/TID/schedstat),
    summed over the threads alive now."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[2])
        except OSError:
            pass
    return total


def cpu_sum(pids):
    return sum(cpu_ns(p) for p in pids), sum(runs(p) for p in pids)


def rss(pid):
    """(VmRSS, Pss) in KiB."""
    vm = pss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                vm = int(line.split()[1])
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
    return vm, pss


class MountChanges:
    """Counts changes of this mount namespace's mount table (POLLPRI on
    /proc/self/mountinfo), what wakes a watch whose pod is a bind mount: on a
    shared node other pods' netns come and go during a window at rest."""

    def __init__(self):
        self.count = 0
        self.file = open("/proc/self/mountinfo")
        t = threading.Thread(target=self.run, daemon=True)
        t.start()

    def run(self):
        p = select.poll()
        p.register(self.file, select.POLLPRI)
        while True:
            if p.poll(1000):
                self.count += 1


class Bench:
    def __init__(self, a):
        self.a = a
        self.netns = []
        self.state = a.state_dir
        self.watchers = []
        self.pauses = []
        self.env = dict(os.environ, PODTAP_STATE_DIR=self.state)
        self.mounts = MountChanges()
        # A window: long enough for a round and its 100 ms settle to end in it.
        self.secs = 1.0 if a.smoke else 2.0

    # ---------- fixtures ----------
    def make_pods(self):
        p, n = self.a.prefix, self.a.pods
        self.peer = f"{p}-wpeer"
        self.pods = [f"{p}-w{i}" for i in range(n)]
        self.other = f"{p}-wx"
        names = [self.peer, self.other] + self.pods
        self.netns.extend(names)
        sh(["ip", "-batch", "-"], input="".join(f"netns add {ns}\n" for ns in names))
        lines = [f"link add v{i} type veth peer name eth0 netns {ns}\nlink set v{i} up\n"
                 for i, ns in enumerate(self.pods + [self.other])]
        sh(["ip", "-n", self.peer, "-batch", "-"], input="".join(lines))
        for ns in self.pods + [self.other]:
            sh(["ip", "-n", ns, "-batch", "-"], input=(
                "link set lo up\nlink set eth0 up\n"
                "address add 198.18.0.2/24 dev eth0\n"
                "address add 2001:db8::2/64 dev eth0 nodad\n"
                "route add default via 198.18.0.1 dev eth0\n"))
        # At rest means at rest: the link-local addresses' DAD (about 1 s)
        # announces them when it ends; attach and watch after that.
        end = time.monotonic() + 20
        for ns in self.pods + [self.other]:
            while sh(["ip", "-n", ns, "-6", "addr", "show", "tentative"]).stdout.strip():
                if time.monotonic() > end:
                    raise RuntimeError(f"{ns}: IPv6 addresses still tentative")
                time.sleep(0.1)

    def start_pauses(self):
        """A root process inside each pod netns, as a pod's pause process (or
        its VMM) is."""
        self.pauses = [subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "100000"],
                                        stdin=subprocess.DEVNULL)
                       for ns in self.pods]
        want = {ns: os.stat(f"/var/run/netns/{ns}").st_ino for ns in self.pods}
        end = time.monotonic() + 30
        for ns, p in zip(self.pods, self.pauses):
            while True:
                try:
                    if os.stat(f"/proc/{p.pid}/ns/net").st_ino == want[ns]:
                        break
                except OSError:
                    pass
                if time.monotonic() > end:
                    raise RuntimeError(f"{ns}: the pause process never got inside")
                time.sleep(0.01)

    def stop_pauses(self):
        for p in self.pauses:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.pauses = []

    def podtap(self, bin, *args):
        return sh([bin, *args], env=self.env)

    def attach_all(self, bin):
        for i, ns in enumerate(self.pods):
            self.podtap(bin, "attach", "--netns", f"/var/run/netns/{ns}", "--id", f"w{i}")

    def start_watchers(self, bin):
        for i in range(len(self.pods)):
            w = subprocess.Popen([bin, "watch", "--id", f"w{i}"], env=self.env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
            self.watchers.append(w)
        for i, w in enumerate(self.watchers):
            line = w.stdout.readline()
            event = json.loads(line) if line else {}
            if event.get("event") != "ready":
                raise RuntimeError(f"watch w{i}: expected ready, got {line!r}")
        # Settled: each has run its first round, and its start-up is over
        # (a second or two after `ready`): their CPU stands still for 1 s
        # (or 15 s have passed: a node where mounts come and go keeps
        # waking the watches that follow a bind mount).
        pids = [w.pid for w in self.watchers]
        end = time.monotonic() + 15
        while self.window(pids, 1.0)[0] and time.monotonic() < end:
            pass

    def stop_watchers(self):
        for w in self.watchers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for w in self.watchers:
            try:
                w.wait(timeout=10)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
        self.watchers = []

    def detach_all(self, bin):
        for i in range(len(self.pods)):
            self.podtap(bin, "detach", "--id", f"w{i}")

    def cleanup(self):
        self.stop_pauses()
        for w in self.watchers:
            if w.poll() is None:
                w.kill()
                w.wait()
        self.watchers = []
        for ns in self.netns:
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        self.netns = []
        shutil.rmtree(self.state, ignore_errors=True)

    # ---------- measurements ----------
    def window(self, pids, secs, work=None):
        """Watcher CPU (ns), wakeups and mount-table changes over `secs` from
        now, `work` done at its start."""
        m0 = self.mounts.count
        ns0, r0 = cpu_sum(pids)
        t0 = time.monotonic()
        if work:
            work()
        left = secs - (time.monotonic() - t0)
        if left > 0:
            time.sleep(left)
        ns1, r1 = cpu_sum(pids)
        return ns1 - ns0, r1 - r0, self.mounts.count - m0

    def excess(self, pids, work, secs):
        """Watcher CPU across `work` minus the same-length window at rest just before."""
        out = []
        for _ in range(self.a.reps):
            rest = self.window(pids, secs)
            busy = self.window(pids, secs, work)
            out.append((busy[0] - rest[0], busy[1] - rest[1], busy[2], rest[2]))
        return out

    def run_one(self, name, bin):
        log(f"{name}: {self.a.pods} pods, attach")
        os.makedirs(self.state, mode=0o700, exist_ok=True)
        self.attach_all(bin)
        log(f"{name}: start {self.a.pods} watches")
        self.start_watchers(bin)
        pids = [w.pid for w in self.watchers]
        r = {"bin": bin}
        log(f"{name}: {self.a.rest_secs} s at rest")
        r["rest"] = self.window(pids, self.a.rest_secs)
        other = f"/var/run/netns/{self.other}"

        def attach_detach():
            self.podtap(bin, "attach", "--netns", other, "--id", "wx")
            self.podtap(bin, "detach", "--id", "wx")

        def netns_add_del():
            sh(["ip", "netns", "add", f"{self.a.prefix}-wy"])
            sh(["ip", "netns", "delete", f"{self.a.prefix}-wy"])

        secs = self.secs
        log(f"{name}: {self.a.reps} × unrelated attach + detach")
        r["attach_detach"] = self.excess(pids, attach_detach, secs)
        log(f"{name}: {self.a.reps} × unrelated ip netns add + del")
        self.netns.append(f"{self.a.prefix}-wy")
        r["mounts"] = self.excess(pids, netns_add_del, secs)
        r["rss"] = [rss(p) for p in pids]
        dead = [w.pid for w in self.watchers if w.poll() is not None]
        if dead:
            raise RuntimeError(f"{name}: watches exited: {dead}")
        self.stop_watchers()
        self.detach_all(bin)
        left = [e for e in os.listdir(self.state)]
        if left:
            raise RuntimeError(f"{name}: state dir left {left}")
        return r

    # ---------- report ----------
    def report(self, results):
        a = self.a
        win = self.secs
        L = [f"\n### Watches at rest: {a.pods} pods, one `podtap watch` each\n"]
        L.append(f"| binary, pods | CPU at rest, all watches, {a.rest_secs:g} s (ms) | wakeups at rest "
                 "| mount-table change bursts on the node meanwhile | CPU per unrelated attach + detach, "
                 "all watches (ms, median) | wakeups per attach + detach (median) | mount-table change "
                 "bursts in those windows / in the windows at rest (total) | CPU per "
                 "unrelated `ip netns add` + `del`, all watches (ms, median) | VmRSS per watch "
                 "(KiB, median) | Pss per watch (KiB, median) |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        for name, r in results:
            med = lambda k, i: statistics.median(x[i] for x in r[k])  # noqa: E731
            L.append(f"| {name} | {r['rest'][0] / 1e6:.3f} | {r['rest'][1]} | {r['rest'][2]} "
                     f"| {med('attach_detach', 0) / 1e6:.3f} | {med('attach_detach', 1):g} "
                     f"| {sum(x[2] for x in r['attach_detach'])} / "
                     f"{sum(x[3] for x in r['attach_detach'])} "
                     f"| {med('mounts', 0) / 1e6:.3f} | {med('rss', 0):g} | {med('rss', 1):g} |")
        L.append("")
        L.append(
            f"Method: {a.pods} pod netns, each with one veth whose peer is in a shared peer netns, "
            "pinned by its bind mount only (*mount*), or also by a root process inside it, "
            "`ip netns exec NS sleep`, as a pod's pause process or VMM (*process*), "
            "attached (tc mode) with the podtap CLI into one state dir; one `podtap watch --id` "
            "(no VMM) per pod, waited on until it printed `ready`, then until their CPU stood still "
            "for 1 s (at most 15 s). CPU is the "
            "sum over all watch processes of their process CPU clock (`clock_gettime` of "
            "`clock_getcpuclockid(pid)`: nanoseconds on a CPU, the `sum_exec_runtime` that "
            "`/proc/PID/schedstat` shows, of every thread including exited ones); wakeups the sum "
            "of the third field of `/proc/PID/task/*/schedstat` (timeslices run). At rest: one "
            f"window of {a.rest_secs:g} s in which the benchmark does nothing; the mount-table "
            "changes seen meanwhile (POLLPRI on /proc/self/mountinfo; a burst of changes may be "
            "seen as one) are other work on the "
            "node, each of which wakes every watch that follows a bind mount (a pod with no process "
            "inside). Per unrelated "
            "attach + detach: `podtap attach` and `podtap detach` of another pod (its own netns, "
            f"same state dir) at the start of a {win:g} s window, minus the {win:g} s window at "
            f"rest just before it; {a.reps} repetitions, median. Per `ip netns add` + `del`: the "
            "same with a netns bind mount made and removed (a mount-table change, as every pod "
            "start and stop makes). RSS: `VmRSS` of /proc/PID/status and `Pss` of "
            "/proc/PID/smaps_rollup of each watch after the runs, median over the watches. "
            "Binaries run one after the other on the same pods."
        )
        return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--before", help="a second binary (e.g. main's), run first")
    ap.add_argument("--pods", type=int, default=200)
    ap.add_argument("--rest-secs", type=float, default=60.0)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--holders", choices=["mount", "process", "both"], default="both",
                    help="what pins each pod netns: its bind mount only, or also a process "
                         "inside (a pause process); default both, one after the other")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--prefix", default=f"ptw{os.getpid()}")
    ap.add_argument("--state-dir")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.smoke:
        a.pods, a.rest_secs, a.reps = 5, 3.0, 2
    if a.pods < 1 or a.reps < 1 or a.rest_secs <= 0:
        print("watch_rest.py: --pods, --reps and --rest-secs must be positive", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("watch_rest.py: needs root (network namespaces)", file=sys.stderr)
        return 2
    a.state_dir = a.state_dir or f"/run/{a.prefix}-watch-state"
    bins = ([("before", a.before)] if a.before else []) + [("podtap", a.bin)]
    for _, b in bins:
        if not os.access(b, os.X_OK):
            print(f"watch_rest.py: no podtap binary at {b}", file=sys.stderr)
            return 2
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    b = Bench(a)
    rc = 0
    try:
        b.make_pods()
        results = []
        for holder in (["mount", "process"] if a.holders == "both" else [a.holders]):
            if holder == "process":
                b.start_pauses()
            for name, binary in bins:
                results.append((f"{name}, pods pinned by {holder}",
                                b.run_one(f"{name}/{holder}", binary)))
            b.stop_pauses()
        text = b.report(results)
        if a.out:
            with open(a.out, "a") as f:
                f.write(text)
        else:
            sys.stdout.write(text)
    except (Exception, Stop) as e:
        log(f"watch_rest.py: {e}")
        rc = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        b.cleanup()
    return rc


if __name__ == "__main__":
    sys.exit(main())
