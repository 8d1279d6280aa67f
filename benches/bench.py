#!/usr/bin/env python3
"""podtap benchmark driver. Run it through benches/run.sh, which builds podtap,
compiles the stand-in, and cleans up with a trap even if this script dies.

Everything happens in network namespaces named PREFIX-*: the root netns is
never touched (every `ip`/`tc` call uses -n NS or runs under `ip netns exec`).
Addresses come from 198.18.0.0/15 and 2001:db8::/32 only.

Timings are reported, never asserted. The exit status is 1 when a contender
failed or left objects behind (links, qdiscs, checkpoints), 0 otherwise.
"""
import argparse
import fcntl
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import benchlib  # benches/, this script's own folder

HERE = os.path.dirname(os.path.abspath(__file__))
PERSTEP = os.path.join(HERE, "iproute2-perstep.sh")
BATCH = os.path.join(HERE, "iproute2-batch.sh")
SCRIPT_GROUP = 4242          # link group the shell contenders use
FLOOR_GROUP = 4343           # link group of the TAPs the kernel-floor deletion removes
SCRIPT_PRIO = 49152          # tc prio of the shell contenders' filters
# data-path variants, in the order of the report, with their labels
DP_VARIANTS = {
    "veth": "bare veth (packet socket)",
    "tc": "tc: u32 + mirred (podtap)",
    "bridge": "bridge (podtap)",
    "macvtap": "macvtap (podtap)",
    "tc4": "tc: u32 + mirred, IPv4/UDP frames (podtap)",
    "l3": "l3: routed, IPv4/UDP frames (podtap)",
}
# The podtap mode of each variant (the bare veth has none), and the variants whose
# generator sends IPv4/UDP frames (standin gen4) to a stand-in that echoes them as
# a routed guest would (echo4: IPv4 addresses and UDP ports swapped too). l3 needs
# them: the pod netns routes, so the frames must be addressed to the pod's IPv4
# address and eth0's MAC. tc4 sends the same frames through the tc wiring, so that
# l3 is compared with tc on the same frames and the same stand-in loop.
DP_MODE = {"tc": "tc", "bridge": "bridge", "macvtap": "macvtap", "tc4": "tc", "l3": "l3"}
DP_IP = ("tc4", "l3")
# gen4's source: an address the peer netns does not have, with the generator's MAC
# as a permanent neighbour of the data-path pod's eth0. The routed echo then comes
# back to the peer as the tc echo does, to a MAC that is not the peer veth's
# (PACKET_OTHERHOST): the peer's IP stack drops it on arrival in both cases.
GEN4_SRC = "198.18.0.9"
GEN_MAC = "06:00:c6:12:00:01"   # standin.c's generator source MAC

last_cpu_ms = 0.0            # CPU time of the last timed() process tree
problems = []                # failures and leftovers: any entry makes the exit status 1
log_file = None


def log(msg):
    line = time.strftime("%H:%M:%S ") + msg
    print(line, file=sys.stderr, flush=True)
    if log_file:
        log_file.write(line + "\n")
        log_file.flush()


def sh(args, check=True, input=None):
    """Run a setup/inspection command (untimed)."""
    r = subprocess.run(args, input=input, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def timed(args, env=None, out_path=None):
    """Run one contender process; return (wall_ms, rc, maxrss_kib, stdout, stderr).

    Wall time is fork to reap as seen by this driver; os.wait4 gives the child's
    own peak RSS without a wrapper process.
    """
    out = open(out_path or os.devnull, "w+")
    err = tempfile.TemporaryFile("w+")
    t0 = time.perf_counter_ns()
    p = subprocess.Popen(args, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    t1 = time.perf_counter_ns()
    p.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    err.seek(0)
    stdout = out.read() if out_path else ""
    stderr = err.read()
    out.close()
    err.close()
    global last_cpu_ms
    # CPU of the process and every descendant it waited for (user + sys)
    last_cpu_ms = (ru.ru_utime + ru.ru_stime) * 1000
    return (t1 - t0) / 1e6, p.returncode, ru.ru_maxrss, stdout, stderr


PHASES = ("scan", "tap", "wiring", "checkpoint", "total")   # attachment.timings_us


def unphased(t):
    """Microseconds of an attach's total that no phase counts (l3: the nftables table)."""
    return t.get("total", 0) - sum(t.get(f, 0) for f in PHASES[:4])


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def med(xs):
    return statistics.median(xs) if xs else float("nan")


class Bench:
    def __init__(self, a):
        self.a = a
        self.prefix = a.prefix
        self.bin = a.bin
        self.state = a.state_dir
        self.env = dict(os.environ, PODTAP_STATE_DIR=self.state, RUST_LOG="warn")
        self.samples = {}        # key -> list of ms
        self.cpu = {}            # key -> list of CPU ms (user+sys, whole process tree)
        self.phases = {}         # (mode, n) -> list of timings_us dicts
        self.rss = {}            # (what, n) -> list of KiB
        self.netns = []          # every netns made, for cleanup
        self.extra = {}
        self.stall = {}          # (contender, n) -> worst probe round trip, ms
        self.holds = {}          # (contender, n) -> every probe round trip over 5 ms

    # ---------- fixtures ----------
    def ns_add(self, name):
        sh(["ip", "netns", "add", name])
        self.netns.append(name)
        sh(["ip", "-n", name, "link", "set", "lo", "up"])

    def make_pod(self, tag, n):
        """A pod netns with n veths (eth0..) whose peers live in a peer netns."""
        return benchlib.make_pod(self.ns_add, f"{self.prefix}-{tag}", f"{self.prefix}-{tag}-peer", n)

    def snapshot_clean(self, ns):
        """Pod-side state that every contender must leave exactly as it found it."""
        links = json.loads(sh(["ip", "-n", ns, "-d", "-j", "link", "show"]).stdout)
        qd = json.loads(sh(["tc", "-n", ns, "-j", "qdisc", "show"]).stdout or "[]")
        return {
            "links": sorted(
                (l["ifname"], l.get("linkinfo", {}).get("info_kind", ""), l["address"],
                 l["mtu"], l.get("master", ""), l.get("group", ""), tuple(sorted(l["flags"])))
                for l in links),
            "qdiscs": sorted((q["dev"], q["kind"], q["handle"]) for q in qd),
        }

    def snapshot_deep(self, ns):
        """What an l3 attach changes besides links and qdiscs, and its detach must
        put back: addresses (in order, with their flags), routes and rules of
        every table, proxy and permanent neighbours, the nftables ruleset, and
        the IPv4/IPv6 conf and neigh sysctls. Taken before each l3 attach and
        compared after its detach (untimed)."""
        def j(*args):
            return json.loads(sh(["ip", "-n", ns, "-j"] + list(args)).stdout or "[]")

        def rows(xs):
            return sorted(json.dumps(x, sort_keys=True) for x in xs)
        addrs = [(i["ifname"], [(a.get("family"), a.get("local"), a.get("prefixlen"), a.get("scope"),
                                 tuple(sorted(k for k, v in a.items() if v is True)))
                                for a in i.get("addr_info", [])])
                 for i in j("address", "show")]
        sysctl = sh(["ip", "netns", "exec", ns, "grep", "-rs", ".", "/proc/sys/net/ipv4/conf",
                     "/proc/sys/net/ipv6/conf", "/proc/sys/net/ipv4/neigh", "/proc/sys/net/ipv6/neigh",
                     "/proc/sys/net/ipv4/ip_forward"], check=False).stdout.splitlines()
        return {
            "addresses": addrs,
            "routes": rows(j("-4", "route", "show", "table", "all")) + rows(j("-6", "route", "show", "table", "all")),
            "rules": rows(j("-4", "rule", "show")) + rows(j("-6", "rule", "show")),
            "neighbours": rows(j("neigh", "show", "proxy")) + rows(j("neigh", "show", "nud", "permanent")),
            "nft": sh(["ip", "netns", "exec", ns, "nft", "list", "ruleset"], check=False).stdout,
            "sysctl": sorted(sysctl),
        }

    def check_deep(self, ns, before, who):
        """An l3 detach left the pod netns as snapshot_deep found it before the
        attach; a difference is a failure (what differs goes into the report)."""
        benchlib.wait_idle((self.bin,), 10.0)  # a detach's child may still be at work
        after = self.snapshot_deep(ns)
        bad = []
        for k in before:
            if before[k] == after[k]:
                continue
            if k == "nft":
                bad.append(f"nft ruleset: before {before[k].strip()[:150]!r}, after {after[k].strip()[:150]!r}")
                continue
            if k == "addresses" and sorted(map(str, before[k])) == sorted(map(str, after[k])):
                bad.append("addresses: the same, in another order")
                continue
            b, a = list(map(str, before[k])), list(map(str, after[k]))
            gone, new = [x for x in b if x not in a], [x for x in a if x not in b]
            bad.append(f"{k}: gone {gone[:3]}{' …' if len(gone) > 3 else ''}, "
                       f"new {new[:3]}{' …' if len(new) > 3 else ''}")
        if bad:
            problems.append(f"{who}: pod netns not restored in {ns}: {'; '.join(bad)}"[:1500])
            log(problems[-1])

    def wait_drained(self, ns, timeout=5.0):
        """Bridges are deleted after detach returns (one rcu_barrier each, under RTNL,
        by a child): wait until no bridge without ports is left, then compare."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            links = json.loads(sh(["ip", "-n", ns, "-d", "-j", "link", "show"]).stdout)
            masters = {l.get("master") for l in links}
            if not any(l.get("linkinfo", {}).get("info_kind") == "bridge" and l["ifname"] not in masters
                       for l in links):
                return
            time.sleep(0.02)

    def settle(self, timeout=30.0):
        """Wait until the previous contender's background work is over: a detach
        returns early and leaves a child (podtap's, the library's or
        floor.c's) in the kernel's rcu_barrier and link deletions. Started
        next to it, a contender would share the CPUs and RCU with it, and with
        the contenders in a fixed cyclic order always the same one would."""
        if benchlib.wait_idle((self.bin, self.a.floor, self.a.lib), timeout):
            return
        problems.append(f"a contender's process was still running after {timeout:.0f} s")
        log(problems[-1])

    def check_clean(self, ns, baseline, who):
        self.wait_drained(ns)
        now = self.snapshot_clean(ns)
        cps = [f for f in os.listdir(self.state) if f.endswith(".json")]
        bad = []
        if now != baseline:
            extra_links = set(now["links"]) - set(baseline["links"])
            extra_q = set(now["qdiscs"]) - set(baseline["qdiscs"])
            missing = set(baseline["links"]) - set(now["links"])
            bad.append(f"links/qdiscs differ: extra {sorted(extra_links)} {sorted(extra_q)} changed/missing {sorted(missing)}")
        if cps:
            bad.append(f"checkpoints left: {cps}")
        if bad:
            problems.append(f"{who}: leftovers in {ns}: {'; '.join(bad)}")
            log(problems[-1])
            self.force_clean(ns, baseline)

    def force_clean(self, ns, baseline):
        """Best effort: put the fixture back so later contenders are not penalised."""
        for f in os.listdir(self.state):
            if f.endswith(".json"):
                cid = f[:-5]
                sh([self.bin, "detach", "--id", cid], check=False)
                try:
                    os.unlink(os.path.join(self.state, f))
                except FileNotFoundError:
                    pass
        links = json.loads(sh(["ip", "-n", ns, "-d", "-j", "link", "show"]).stdout)
        for l in links:
            if l.get("linkinfo", {}).get("info_kind") in ("tun", "bridge"):
                sh(["ip", "-n", ns, "link", "delete", "dev", l["ifname"]], check=False)
        lines = []
        for l in baseline["links"]:
            if l[1] == "veth":
                sh(["tc", "-n", ns, "qdisc", "del", "dev", l[0], "ingress"], check=False)
                lines.append(f"link set dev {l[0]} nomaster")
                lines.append(f"link set dev {l[0]} address {l[2]} mtu {l[3]}")
        sh(["ip", "-n", ns, "-force", "-batch", "-"], input="\n".join(lines) + "\n", check=False)
        if self.snapshot_clean(ns) != baseline:
            raise RuntimeError(f"could not restore fixture {ns} after leftovers")

    def record(self, key, ms):
        self.samples.setdefault(key, []).append(ms)
        self.cpu.setdefault(key, []).append(last_cpu_ms)

    def fail(self, who, rc, err):
        problems.append(f"{who}: exit {rc}: {err.strip()[:400]}")
        log(problems[-1])

    # ---------- contenders ----------
    def c_podtap(self, mode, n, ns, rep, base):
        cid = f"{self.prefix}-{mode}{n}-r{rep}"
        outp = os.path.join(self.a.workdir, "attach.json")
        # l3 changes addresses' routes, sysctls, neighbours and nftables too: the
        # state before is taken here, untimed, and compared after the detach
        deep = self.snapshot_deep(ns) if mode == "l3" else None
        ms, rc, rss, out, err = timed(
            [self.bin, "attach", "--netns", f"/var/run/netns/{ns}", "--id", cid, "--mode", mode],
            env=self.env, out_path=outp)
        attached = rc == 0
        if not attached:
            self.fail(f"podtap attach --mode {mode} n={n}", rc, err)
        else:
            self.record(("podtap", mode, "attach", n), ms)
            try:
                d = json.loads(out)
                self.phases.setdefault((mode, n), []).append(d["attachment"]["timings_us"])
                ntap = sum(1 for i in d["interfaces"] if i.get("tap"))
                if ntap != n:
                    problems.append(f"podtap attach --mode {mode}: {ntap} TAPs for {n} interfaces")
            except (ValueError, KeyError, TypeError) as e:
                problems.append(f"podtap attach --mode {mode} n={n}: bad JSON: {e}")
        ms, rc, rss, _, err = timed([self.bin, "detach", "--id", cid], env=self.env)
        if rc != 0:
            self.fail(f"podtap detach ({mode}) n={n}", rc, err)
        elif attached:  # after a failed attach the detach finds nothing to undo: not a sample
            self.record(("podtap", mode, "detach", n), ms)
        self.check_clean(ns, base, f"podtap {mode} n={n}")
        if deep is not None:
            self.check_deep(ns, deep, f"podtap {mode} n={n}")

    def c_lib(self, n, ns, rep, base):
        """The library call (examples/bench_lib): attach + detach in one
        process, each timed in-process, so no process start is counted."""
        cid = f"{self.prefix}-lib{n}-r{rep}"
        r = sh([self.a.lib, self.a.state_dir, f"/var/run/netns/{ns}", cid, "tc"], check=False)
        if r.returncode != 0:
            self.fail(f"library attach+detach n={n}", r.returncode, r.stderr)
        else:
            try:
                d = json.loads(r.stdout.strip().splitlines()[-1])
                self.record(("lib", "tc", "attach", n), d["attach_ms"])
                self.record(("lib", "tc", "detach", n), d["detach_ms"])
                if d["taps"] != n:
                    problems.append(f"library attach: {d['taps']} TAPs for {n} interfaces")
            except (ValueError, KeyError, IndexError) as e:
                problems.append(f"library attach n={n}: bad output: {e}")
        self.check_clean(ns, base, f"library n={n}")

    def c_cni(self, n, ns, rep, base):
        """podtap as a chained CNI plugin: ADD then DEL of one interface (eth0),
        as a runtime runs it after the bridge/ptp plugin, prevResult on stdin."""
        if n != 1:
            return
        cid = f"{rep + 2:064x}"
        mac = json.loads(sh(["ip", "-n", ns, "-j", "link", "show", "eth0"]).stdout)[0]["address"]
        netns = f"/var/run/netns/{ns}"
        conf = json.dumps({
            "cniVersion": "1.0.0", "name": "bench", "type": "podtap", "stateDir": self.a.state_dir,
            "prevResult": {"cniVersion": "1.0.0",
                           "interfaces": [{"name": "eth0", "mac": mac, "sandbox": netns}],
                           "ips": [{"address": "198.18.0.2/24", "interface": 0}]}})
        conf_path = os.path.join(self.a.workdir, "cni.json")
        with open(conf_path, "w") as f:
            f.write(conf)
        for cmd, phase in (("ADD", "attach"), ("DEL", "detach")):
            env = dict(self.env, CNI_COMMAND=cmd, CNI_CONTAINERID=cid, CNI_NETNS=netns,
                       CNI_IFNAME="eth0", CNI_PATH="/usr/lib/cni")
            with open(conf_path) as stdin:
                t0 = time.perf_counter_ns()
                r = subprocess.run([self.bin], stdin=stdin, capture_output=True, text=True, env=env)
                ms = (time.perf_counter_ns() - t0) / 1e6
            if r.returncode != 0:
                self.fail(f"podtap CNI {cmd} n={n}", r.returncode, r.stdout + r.stderr)
            else:
                self.record(("cni", "tc", phase, n), ms)
        # DEL leaves the TAP to a child that waits for the next plugin to
        # delete the pod's veth (none here: it waits out its 0.5 s bound),
        # holding the netns lock: wait for it, untimed.
        with open(netns) as held:
            fcntl.flock(held, fcntl.LOCK_EX)
        self.check_clean(ns, base, f"podtap CNI n={n}")

    def c_scan(self, n, ns, rep, base):
        ms, rc, rss, _, err = timed([self.bin, "scan", "--netns", f"/var/run/netns/{ns}"],
                                    env=self.env)
        if rc != 0:
            self.fail(f"podtap scan n={n}", rc, err)
        else:
            self.record(("podtap", "scan", "scan", n), ms)

    def peak_rss(self, argv, who):
        """Peak RSS (KiB) of one podtap process, measured by a small wrapper
        (/usr/bin/time -f %M, else the stand-in's wait4 wrapper). Not timed."""
        f = os.path.join(self.a.workdir, "rss.txt")
        if os.path.exists("/usr/bin/time"):
            cmd = ["/usr/bin/time", "-f", "%M", "-o", f] + argv
        else:
            cmd = [self.a.standin, "rss"] + argv
        r = subprocess.run(cmd, env=self.env, capture_output=True, text=True)
        if r.returncode != 0:
            self.fail(f"{who} (under the RSS wrapper)", r.returncode, r.stderr)
            return None
        txt = open(f).read() if os.path.exists("/usr/bin/time") else r.stderr
        return int(txt.strip().splitlines()[-1])

    def c_rss(self, n, ns, rep, base):
        cid = f"{self.prefix}-rss{n}-r{rep}"
        for what, argv in (
                ("attach", [self.bin, "attach", "--netns", f"/var/run/netns/{ns}", "--id", cid]),
                ("detach", [self.bin, "detach", "--id", cid]),
                ("scan", [self.bin, "scan", "--netns", f"/var/run/netns/{ns}"])):
            kib = self.peak_rss(argv, f"podtap {what} n={n}")
            if kib is not None:
                self.rss.setdefault((what, "tc" if what != "scan" else "-", n), []).append(kib)
        self.check_clean(ns, base, f"podtap (RSS run) n={n}")

    def c_script(self, kind, n, ns, rep, base):
        script = PERSTEP if kind == "perstep" else BATCH
        cid = f"{kind}{n}-r{rep}"
        ms, rc, _, _, err = timed(["bash", script, "attach", ns, cid, str(SCRIPT_GROUP),
                                   str(SCRIPT_PRIO)])
        if rc != 0:
            self.fail(f"{kind} attach n={n}", rc, err)
        else:
            self.record((kind, "tc", "attach", n), ms)
        ms, rc, _, _, err = timed(["bash", script, "detach", ns, cid])
        if rc != 0:
            self.fail(f"{kind} detach n={n}", rc, err)
        else:
            self.record((kind, "tc", "detach", n), ms)
        self.check_clean(ns, base, f"{kind} n={n}")

    def c_floor(self, n, ns, rep, base):
        """Kernel floor for detach: the same number of persistent vnet_hdr TAPs
        (made untimed), removed by ONE `ip link delete group N` (one
        RTM_DELLINK, one unregistration batch, one RCU wait)."""
        lines = []
        for i in range(n):
            lines.append(f"tuntap add dev tap_eth{i} mode tap vnet_hdr")
            lines.append(f"link set dev tap_eth{i} group {FLOOR_GROUP} up")
        sh(["ip", "-n", ns, "-batch", "-"], input="\n".join(lines) + "\n")
        ms, rc, _, _, err = timed(["ip", "-n", ns, "link", "delete", "group", str(FLOOR_GROUP)])
        if rc != 0:
            self.fail(f"kernel floor (ip link delete group) n={n}", rc, err)
        else:
            self.record(("floor", "group", "detach", n), ms)
        self.check_clean(ns, base, f"kernel floor n={n}")

    def c_cfloor(self, n, ns, rep, base):
        """benches/floor.c: podtap's tc-mode kernel work in one C process with
        pipelined netlink (window 32), then its early-return detach and, as a
        second round, its full detach (group delete acked)."""
        fl = self.a.floor
        for mode, att, what, det in (("tc", "attach-tc", "detach-early", "detach-early"),
                                     ("tc", "attach-tc", "detach", "detach"),
                                     ("bridge", "attach-bridge", "detach-early", "detach-bridge-early")):
            ms, rc, _, _, err = timed([fl, att, ns, str(n)])
            if rc != 0:
                self.fail(f"floor.c {att} n={n}", rc, err)
                self.force_clean(ns, base)
                return
            # One attach sample per repetition, as for every other contender: the
            # first, which starts after another contender as theirs do. The
            # second tc round's attach (run only to time the acked detach)
            # follows floor.c's own run, with its code and the kernel's paths
            # warm, and ran 0.5-1 ms faster at 8 interfaces.
            if what == "detach-early":
                self.record(("cfloor", mode, "attach", n), ms)
            ms, rc, _, _, err = timed([fl, det, ns])
            if rc != 0:
                self.fail(f"floor.c {det} n={n}", rc, err)
            else:
                self.record(("cfloor", mode, what, n), ms)
            # the early return leaves the deletion running in a child
            for _ in range(200):
                links = json.loads(sh(["ip", "-n", ns, "-j", "link", "show"]).stdout)
                if not any(l.get("ifname", "").startswith("ftap") for l in links):
                    break
                time.sleep(0.01)
        self.check_clean(ns, base, f"floor.c n={n}")

    # ---------- identical objects ----------
    def objects(self, ns):
        """Snapshot after 1.5 s: operstate is updated by the kernel's linkwatch
        work up to 1 s after the change, so an immediate read shows stale state.
        Normalised TAPs, qdiscs and filters: names stay, numbers that differ
        by construction (ifindex, MAC, group value, alias text, tc prio/handle
        numbers, action index) go."""
        time.sleep(1.5)
        links = json.loads(sh(["ip", "-n", ns, "-d", "-j", "link", "show"]).stdout)
        out = {"taps": [], "pods": [], "qdiscs": [], "filters": {}}
        for l in links:
            li = l.get("linkinfo", {})
            kind = li.get("info_kind")
            if kind == "tun":
                data = dict(li.get("info_data", {}))
                out["taps"].append({
                    "name": l["ifname"], "flags": sorted(l["flags"]), "mtu": l["mtu"],
                    "operstate": l.get("operstate"), "txqlen": l.get("txqlen"),
                    "min_mtu": l.get("min_mtu"), "max_mtu": l.get("max_mtu"),
                    "grouped": l.get("group") not in (None, "default"),
                    "alias_marked": str(l.get("ifalias", "")).startswith("podtap:"),
                    "master": l.get("master"), "info_data": data,
                    "gso_max_size": l.get("gso_max_size"), "numtxqueues": l.get("num_tx_queues"),
                })
            elif kind == "veth":
                out["pods"].append({"name": l["ifname"], "flags": sorted(l["flags"]),
                                    "mtu": l["mtu"], "address": l["address"],
                                    "master": l.get("master")})
        qd = json.loads(sh(["tc", "-n", ns, "-j", "qdisc", "show"]).stdout or "[]")
        out["qdiscs"] = sorted((q["dev"], q["kind"], q["handle"], q.get("parent", "")) for q in qd)
        for l in links:
            txt = sh(["tc", "-n", ns, "filter", "show", "dev", l["ifname"], "ingress"]).stdout
            txt = re.sub(r"pref \d+", "pref P", txt)
            txt = re.sub(r"index \d+ ref \d+ bind \d+", "index I ref R bind B", txt)
            txt = re.sub(r"\s+\n", "\n", txt).strip()
            if txt:
                out["filters"][l["ifname"]] = txt
        out["taps"].sort(key=lambda t: t["name"])
        out["pods"].sort(key=lambda t: t["name"])
        return out

    def identity_check(self, n, ns, base):
        snaps = {}
        cid = f"{self.prefix}-ident"
        # The iproute2 scripts build u32 + mirred redirects, as podtap does.
        r = sh([self.bin, "attach", "--netns", f"/var/run/netns/{ns}", "--id", cid], check=False)
        if r.returncode != 0:
            self.fail("identity: podtap attach", r.returncode, r.stderr)
            return
        snaps["podtap"] = self.objects(ns)
        sh([self.bin, "detach", "--id", cid], check=False)
        self.check_clean(ns, base, "identity: podtap")
        for kind, script in (("perstep", PERSTEP), ("batch", BATCH)):
            r = sh(["bash", script, "attach", ns, "ident", str(SCRIPT_GROUP), str(SCRIPT_PRIO)],
                   check=False)
            if r.returncode != 0:
                self.fail(f"identity: {kind} attach", r.returncode, r.stderr)
                continue
            snaps[kind] = self.objects(ns)
            sh(["bash", script, "detach", ns, "ident"], check=False)
            self.check_clean(ns, base, f"identity: {kind}")
        ref = snaps.get("podtap")
        with open(os.path.join(self.a.workdir, "objects.json"), "w") as f:
            json.dump(snaps, f, indent=1, default=str)
        result = {}
        for kind in ("perstep", "batch"):
            if kind not in snaps or ref is None:
                result[kind] = "not compared (contender failed)"
                continue
            diffs = [k for k in ref if ref[k] != snaps[kind][k]]
            if diffs:
                result[kind] = f"DIFFERENT in {diffs}"
                problems.append(f"identity: {kind} objects differ from podtap's in {diffs} "
                                f"(see objects.json in the work dir)")
                log(problems[-1])
            else:
                result[kind] = (f"identical ({len(ref['taps'])} TAPs, {len(ref['qdiscs'])} qdiscs, "
                                f"{len(ref['filters'])} devices with filters)")
        self.extra["identity"] = (n, result)
        log(f"identity check at n={n}: {result}")

    # ---------- concurrency ----------
    def concurrency(self, pods):
        peer = f"{self.prefix}-cc-peer"
        self.ns_add(peer)
        names = []
        lines = []
        for k in range(pods):
            pod = f"{self.prefix}-cc{k}"
            self.ns_add(pod)
            names.append(pod)
            for i in range(2):
                lines.append(f"link add c{k}v{i} type veth peer name eth{i} netns {pod}")
                lines.append(f"link set c{k}v{i} up")
        sh(["ip", "-n", peer, "-batch", "-"], input="\n".join(lines) + "\n")
        for k, pod in enumerate(names):
            sh(["ip", "-n", pod, "-batch", "-"],
               input=f"link set eth0 up\nlink set eth1 up\n"
                     f"address add 198.19.{k}.2/24 dev eth0\n"
                     f"address add 2001:db8:cc:{k:x}::2/64 dev eth1 nodad\n")
        bases = {pod: self.snapshot_clean(pod) for pod in names}

        def run_all(argvs):
            t0 = time.perf_counter()
            procs = [subprocess.Popen(a, env=self.env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True) for a in argvs]
            errs = [(p.wait(), p.stderr.read()) for p in procs]
            return (time.perf_counter() - t0) * 1000, errs

        att_ms, att = run_all([[self.bin, "attach", "--netns", f"/var/run/netns/{p}",
                                "--id", f"{p}"] for p in names])
        att_fail = [(names[i], rc, e.strip()[:200]) for i, (rc, e) in enumerate(att) if rc != 0]
        taps = 0
        for pod in names:
            links = json.loads(sh(["ip", "-n", pod, "-d", "-j", "link", "show"]).stdout)
            taps += sum(1 for l in links if l.get("linkinfo", {}).get("info_kind") == "tun")
        det_ms, det = run_all([[self.bin, "detach", "--id", f"{p}"] for p in names])
        det_fail = [(names[i], rc, e.strip()[:200]) for i, (rc, e) in enumerate(det) if rc != 0]
        left_taps = left_q = 0
        for pod in names:
            now = self.snapshot_clean(pod)
            left_taps += sum(1 for l in now["links"] if l[1] in ("tun", "bridge"))
            left_q += sum(1 for q in now["qdiscs"] if q[1] == "ingress")
        left_cp = [f for f in os.listdir(self.state) if f.endswith(".json")]
        for f in left_cp:  # counted; now out of the way of the next tests
            os.unlink(os.path.join(self.state, f))
        for f in att_fail + det_fail:
            problems.append(f"concurrency: {f}")
        if left_taps or left_q or left_cp:
            problems.append(f"concurrency: leftovers: {left_taps} links, {left_q} ingress qdiscs, "
                            f"{len(left_cp)} checkpoints")
        self.extra["concurrency"] = dict(
            pods=pods, attach_ms=att_ms, detach_ms=det_ms, taps_made=taps,
            attach_failures=len(att_fail), detach_failures=len(det_fail),
            left_links=left_taps, left_qdiscs=left_q, left_checkpoints=len(left_cp),
            first_errors=(att_fail + det_fail)[:3])
        log(f"concurrency: {self.extra['concurrency']}")
        for pod in names + [peer]:
            sh(["ip", "netns", "delete", pod], check=False)
            self.netns.remove(pod)

    # ---------- data path ----------
    def datapath(self, rounds, secs):
        standin = self.a.standin
        pod = self.make_pod("dp", 1)
        peer = pod + "-peer"
        for ns in (pod, peer):
            sh(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"],
               check=False)
        # the routed echo's way back to the generator (GEN4_SRC above)
        sh(["ip", "-n", pod, "neigh", "add", GEN4_SRC, "lladdr", GEN_MAC, "dev", "eth0", "nud", "permanent"])
        base = self.snapshot_clean(pod)
        pod_mac = json.loads(sh(["ip", "-n", pod, "-j", "link", "show", "eth0"]).stdout)[0]["address"]
        pod_ip = [a["local"] for a in json.loads(sh(["ip", "-n", pod, "-j", "-4", "address", "show", "eth0"]).stdout)[0]
                  ["addr_info"]][0]
        variants = list(DP_VARIANTS)
        res = {}
        for r in range(rounds):
            k = r % len(variants)
            order = variants[k:] + variants[:k]
            # (sink, frame size): the echo round trip at two sizes, then one way at
            # 64 B into a sink that never reads (the generator's CPU per frame is then
            # the forward path alone: send, veth, the wiring, the TAP's full queue)
            for sink, size in (("echo", 60), ("echo", 1514), ("hold", 60)):
                for v in order:
                    cid = f"{self.prefix}-dp"
                    dst = pod_mac
                    ip = v in DP_IP
                    deep = None
                    if v != "veth":
                        if v == "l3":
                            deep = self.snapshot_deep(pod)
                        rr = sh([self.bin, "attach", "--netns", f"/var/run/netns/{pod}", "--id", cid,
                                 "--mode", DP_MODE[v]], check=False)
                        if rr.returncode != 0:
                            self.fail(f"datapath attach {v}", rr.returncode, rr.stderr)
                            continue
                    try:
                        if v != "veth":
                            iface = [i for i in json.loads(rr.stdout)["interfaces"] if i.get("tap")][0]
                            guest_mac = iface.get("guest_mac", pod_mac)
                            # tc, bridge, macvtap: to the guest's MAC. l3: to eth0's, which the
                            # pod netns receives and routes to the TAP (the guest keeps the pod's
                            # MAC, and answers the netns's ARP for the pod's address with it)
                            dst = pod_mac if v == "l3" else guest_mac
                            # a macvtap is opened through its device node, as `podtap exec` does
                            tap = iface["tap"].get("device") or iface["tap"]["name"]
                            if not ip:
                                echo = [standin, sink, "tap", tap, str(secs + 1.5)]
                            elif sink == "echo":
                                echo = [standin, "echo4", "tap", tap, str(secs + 1.5), guest_mac]
                            elif v == "l3":
                                # answers the netns's one ARP request, then reads nothing
                                echo = [standin, "hold4", "tap", tap, str(secs + 1.5), guest_mac]
                            else:
                                echo = [standin, "hold", "tap", tap, str(secs + 1.5)]
                        else:
                            echo = [standin, sink, "pkt", "eth0", str(secs + 1.5)]
                        if ip:
                            gen = [standin, "gen4", "v0", str(secs), str(size), dst, GEN4_SRC, pod_ip]
                        else:
                            gen = [standin, "gen", "v0", str(secs), str(size), dst]
                        e = subprocess.Popen(["ip", "netns", "exec", pod] + echo, stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                        try:
                            ready = e.stdout.readline()
                            time.sleep(0.2)  # carrier up, bridge port forwarding
                            g = sh(["ip", "netns", "exec", peer] + gen, check=False)
                            eout, eerr = e.communicate()
                        finally:
                            if e.poll() is None:
                                e.kill()
                                e.wait()
                    finally:
                        if v != "veth":
                            rr = sh([self.bin, "detach", "--id", cid], check=False)
                            if rr.returncode != 0:
                                self.fail(f"datapath detach {v}", rr.returncode, rr.stderr)
                        self.check_clean(pod, base, f"datapath {v}")
                        if deep is not None:
                            self.check_deep(pod, deep, f"datapath {v}")
                    if g.returncode != 0 or e.returncode != 0 or not ready:
                        self.fail(f"datapath {v} {sink} size {size}", g.returncode or e.returncode,
                                  g.stderr + eerr)
                        continue
                    gj = json.loads(g.stdout.strip().splitlines()[-1])
                    ej = json.loads(eout.strip().splitlines()[-1])
                    if v == "l3" and not ej.get("arp_replies"):
                        # the netns never resolved the guest: its frames died at the neighbour entry
                        problems.append(f"datapath l3 {sink} size {size}: the stand-in answered no ARP request")
                        log(problems[-1])
                    if sink == "echo" and not gj["echoed"]:
                        problems.append(f"datapath {v} size {size}: nothing echoed (sent {gj['tx']}, "
                                        f"stand-in read {ej['rx']}, ARP replies {ej.get('arp_replies')})")
                        log(problems[-1])
                    res.setdefault((v, size if sink == "echo" else "oneway"), []).append(dict(
                        round=r,
                        sent_pps=gj["tx"] / gj["elapsed_s"],
                        rx_pps=ej["rx"] / gj["elapsed_s"],
                        echo_pps=gj["echoed"] / gj["elapsed_s"],
                        gen_ns_per_frame=gj["cpu_s"] * 1e9 / max(gj["tx"], 1),
                        echo_ns_per_frame=ej["cpu_s"] * 1e9 / max(ej["tx"], 1)))
        self.extra["datapath"] = res
        self.extra["datapath_secs"] = (rounds, secs)
        log(f"datapath: { {k: [round(x['rx_pps']) for x in v] for k, v in res.items()} }")
        return pod

    def tcp(self, secs, rounds):
        """TCP through the wiring: iperf3 client in the peer netns, server in a
        'guest' netns that the stand-in forwards to (vnet_hdr + TSO/CSUM offloads
        on the TAP and PACKET_VNET_HDR on the guest side)."""
        standin = self.a.standin
        pod = f"{self.prefix}-tcp"
        peer, guest = pod + "-peer", pod + "-guest"
        for ns in (pod, peer, guest):
            self.ns_add(ns)
        sh(["ip", "-n", peer, "-batch", "-"], input=(
            f"link add v0 type veth peer name eth0 netns {pod}\nlink set v0 up\n"
            "address add 198.18.200.1/24 dev v0\n"))
        sh(["ip", "-n", pod, "-batch", "-"], input=(
            f"link add gw0 type veth peer name g0 netns {guest}\nlink set eth0 up\nlink set gw0 up\n"))
        sh(["ip", "-n", guest, "-batch", "-"], input=(
            "link set g0 up\naddress add 198.18.200.2/24 dev g0\n"))
        # the guest uses the pod interface's MAC, as a VM NIC would
        pod_mac = json.loads(sh(["ip", "-n", pod, "-j", "link", "show", "eth0"]).stdout)[0]["address"]
        sh(["ip", "-n", guest, "link", "set", "g0", "address", pod_mac])
        base = self.snapshot_clean(pod)
        res = {}
        # `ip netns exec` execs iperf3 itself, so this pid is the server's
        srv = subprocess.Popen(["ip", "netns", "exec", guest, "iperf3", "-s", "--logfile",
                                os.path.join(self.a.workdir, "iperf3-server.log")])
        try:
            time.sleep(0.3)
            variants = ["veth", "tc", "bridge", "macvtap"]
            for r in range(rounds):
                k = r % len(variants)
                for v in variants[k:] + variants[:k]:
                    self.tcp_one(v, pod, peer, base, secs, res)
        finally:
            srv.terminate()
            srv.wait()
        self.extra["tcp"] = res
        log(f"tcp Gbit/s: {res}")

    def tcp_one(self, v, pod, peer, base, secs, res):
        standin = self.a.standin
        cid = f"{self.prefix}-tcp"
        if v != "veth":
            rr = sh([self.bin, "attach", "--netns", f"/var/run/netns/{pod}", "--id", cid,
                     "--mode", v, "--interfaces", "eth0"], check=False)
            if rr.returncode != 0:
                self.fail(f"tcp attach {v}", rr.returncode, rr.stderr)
                return
            tap = [i for i in json.loads(rr.stdout)["interfaces"] if i.get("tap")][0]["tap"]
            tapname = tap.get("device") or tap["name"]
            fwd = [standin, "fwd", "tap", tapname, "gw0", str(secs + 3)]
        else:
            fwd = [standin, "fwd", "pkt", "eth0", "gw0", str(secs + 3)]
        f = subprocess.Popen(["ip", "netns", "exec", pod] + fwd, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        f.stdout.readline()
        time.sleep(0.3)
        c = sh(["ip", "netns", "exec", peer, "iperf3", "-c", "198.18.200.2", "-t", str(secs), "-J"],
               check=False)
        f.communicate()
        if v != "veth":
            rr = sh([self.bin, "detach", "--id", cid], check=False)
            if rr.returncode != 0:
                self.fail(f"tcp detach {v}", rr.returncode, rr.stderr)
        self.check_clean(pod, base, f"tcp {v}")
        try:
            j = json.loads(c.stdout)
            res.setdefault(v, []).append(j["end"]["sum_received"]["bits_per_second"] / 1e9)
        except (ValueError, KeyError):
            problems.append(f"tcp {v}: iperf3 gave no result: {c.stdout[-200:]} {c.stderr[-200:]}")
            log(problems[-1])

    # ---------- main loop ----------
    def run(self):
        a = self.a
        if a.datapath_only:
            self.datapath(a.dp_rounds, a.dp_secs)
            return
        sizes = [1, 8] if a.smoke else [1, 8, 64]
        pods = {n: self.make_pod(f"n{n}", n) for n in sizes}
        bases = {n: self.snapshot_clean(pods[n]) for n in sizes}
        self.identity_check(8, pods[8], bases[8])
        contenders = [
            ("podtap-tc", lambda n, r: self.c_podtap("tc", n, pods[n], r, bases[n])),
            # routed: the fixture's interfaces have an IPv4 /24 and an IPv6 /64 each
            # (benchlib.wire_pod), the addresses l3 routes to the TAPs
            ("podtap-l3", lambda n, r: self.c_podtap("l3", n, pods[n], r, bases[n])),
            ("podtap-bridge", lambda n, r: self.c_podtap("bridge", n, pods[n], r, bases[n])),
            ("podtap-scan", lambda n, r: self.c_scan(n, pods[n], r, bases[n])),
            ("library", lambda n, r: self.c_lib(n, pods[n], r, bases[n])),
            ("cni", lambda n, r: self.c_cni(n, pods[n], r, bases[n])),
            ("perstep", lambda n, r: self.c_script("perstep", n, pods[n], r, bases[n])),
            ("batch", lambda n, r: self.c_script("batch", n, pods[n], r, bases[n])),
            ("floor", lambda n, r: self.c_floor(n, pods[n], r, bases[n])),
            ("cfloor", lambda n, r: self.c_cfloor(n, pods[n], r, bases[n])),
            ("rss", lambda n, r: self.c_rss(n, pods[n], r, bases[n])),
        ]
        # one untimed warm-up round (page cache, first-netns-use costs)
        for n in sizes:
            for _, fn in contenders:
                fn(n, -1)
        self.samples.clear()
        self.cpu.clear()
        self.phases.clear()
        self.rss.clear()
        t0 = time.time()
        # Timed rounds first, without the RTNL probe: on 2 vCPUs its 5000
        # requests a second perturb a contender with several threads more
        # than a single-threaded one (podtap attach at 64: 1.23x floor.c
        # without it, 1.35x with it, in interleaved pairs). Then the probe
        # rounds: the same contenders, the same rotation, the probe around
        # each, and only the stalls kept.
        for rep in range(a.reps):
            self.round(rep, sizes, contenders, None)
            log(f"rep {rep + 1}/{a.reps} done ({time.time() - t0:.0f} s)")
        probe_ns = f"{self.prefix}-probe"
        self.ns_add(probe_ns)
        # what the contenders record in the probe rounds is dropped: only stalls are kept
        kept = (self.samples, self.cpu, self.phases, self.rss)
        self.samples, self.cpu, self.phases, self.rss = {}, {}, {}, {}
        for rep in range(self.probe_reps()):
            self.round(rep, sizes, contenders, probe_ns)
            log(f"probe round {rep + 1}/{self.probe_reps()} done ({time.time() - t0:.0f} s)")
        self.samples, self.cpu, self.phases, self.rss = kept
        self.concurrency(a.pods)
        self.datapath(a.dp_rounds, a.dp_secs)
        if a.tcp:
            self.tcp(a.tcp_secs, a.tcp_rounds)

    def probe_reps(self):
        return max(2, self.a.reps // 2)

    def round(self, rep, sizes, contenders, probe_ns):
        """Every contender once per size, in an order rotated every repetition
        so that drift hits all contenders alike; with `probe_ns`, the RTNL
        probe (RTM_GETLINK round trips in a netns of our own) runs around each
        contender and its worst round trip and every one over 5 ms are kept."""
        for n in sizes:
            k = (rep + n) % len(contenders)
            for name, fn in contenders[k:] + contenders[:k]:
                self.settle()
                if probe_ns is None:
                    fn(n, rep)
                    continue
                pr = subprocess.Popen([self.a.floor, "probe", probe_ns], stdout=subprocess.PIPE, text=True)
                pr.stdout.readline()  # "ready": the probe is in its loop before the contender starts
                fn(n, rep)
                pr.terminate()
                outp, _ = pr.communicate()
                try:
                    pj = json.loads(outp.strip().splitlines()[-1])
                    key = (name, n)
                    self.stall[key] = max(self.stall.get(key, 0.0), pj["worst_ms"])
                    self.holds.setdefault(key, []).extend(pj.get("over5_ms", []))
                except (ValueError, KeyError, IndexError):
                    pass

    # ---------- report ----------
    def report(self):
        S = self.samples
        sizes = sorted({k[3] for k in S})
        L = []
        fm = lambda x: "–" if x != x else (f"{x:.1f}" if x < 100 else f"{x:.0f}")

        def stat(key):
            xs = S.get(key, [])
            return med(xs), pct(xs, 0.95), len(xs)

        L.append("### 1–2. Process wall time (ms): median / p95 (samples)\n")
        rows = [
            ("podtap attach, tc", ("podtap", "tc", "attach")),
            ("podtap detach, tc", ("podtap", "tc", "detach")),
            ("podtap attach, bridge", ("podtap", "bridge", "attach")),
            ("podtap detach, bridge", ("podtap", "bridge", "detach")),
            ("podtap attach, l3 (routed)", ("podtap", "l3", "attach")),
            ("podtap detach, l3 (routed)", ("podtap", "l3", "detach")),
            ("podtap scan", ("podtap", "scan", "scan")),
            ("library call attach, tc (in-process)", ("lib", "tc", "attach")),
            ("library call detach, tc (in-process)", ("lib", "tc", "detach")),
            ("CNI ADD, one interface (chained plugin)", ("cni", "tc", "attach")),
            ("CNI DEL, one interface (chained plugin)", ("cni", "tc", "detach")),
            ("per-step script attach", ("perstep", "tc", "attach")),
            ("per-step script detach", ("perstep", "tc", "detach")),
            ("batch script attach", ("batch", "tc", "attach")),
            ("batch script detach", ("batch", "tc", "detach")),
            ("kernel floor: `ip link delete group` (detach)", ("floor", "group", "detach")),
            ("floor.c attach-tc (pipelined netlink)", ("cfloor", "tc", "attach")),
            ("floor.c detach (group delete acked)", ("cfloor", "tc", "detach")),
            ("floor.c detach-early (RTM_DELLINK seen)", ("cfloor", "tc", "detach-early")),
            ("floor.c attach-bridge", ("cfloor", "bridge", "attach")),
            ("floor.c detach-bridge-early", ("cfloor", "bridge", "detach-early")),
        ]
        L.append("| contender | " + " | ".join(f"{n} if" for n in sizes) + " |")
        L.append("|---|" + "---|" * len(sizes))
        for name, k in rows:
            cells = []
            for n in sizes:
                m, p, c = stat(k + (n,))
                cells.append(f"{fm(m)} / {fm(p)} ({c})")
            L.append(f"| {name} | " + " | ".join(cells) + " |")

        L.append("\nCPU time of the same runs (user + sys of the process and the children it waited "
                 "for, ms, median). Wall minus CPU is time spent waiting: for a CPU on this shared "
                 "machine, for the global RTNL lock, for RCU grace periods, for fsync.\n")
        L.append("| contender | " + " | ".join(f"{n} if" for n in sizes) + " |")
        L.append("|---|" + "---|" * len(sizes))
        for name, k in rows:
            L.append(f"| {name} | " + " | ".join(fm(med(self.cpu.get(k + (n,), []))) for n in sizes) + " |")

        stall = self.stall
        if stall:
            L.append("\nWorst RTNL stall seen by the probe (RTM_GETLINK round trip in another netns, "
                     f"ms, max over {self.probe_reps()} probe rounds, untimed) while each contender ran:\n")
            names = sorted({k[0] for k in stall})
            L.append("| contender | " + " | ".join(f"{n} if" for n in sizes) + " |")
            L.append("|---|" + "---|" * len(sizes))
            for nm in names:
                L.append(f"| {nm} | " + " | ".join(fm(stall.get((nm, n), float("nan"))) for n in sizes) + " |")
            holds = self.holds
            if any(holds.values()):
                L.append("\nEvery probe round trip over 5 ms (each is one RTNL hold the probe waited for, "
                         "usually one rcu_barrier()): count over the probe rounds, median / p95 / max (ms):\n")
                L.append("| contender | " + " | ".join(f"{n} if" for n in sizes) + " |")
                L.append("|---|" + "---|" * len(sizes))
                for nm in names:
                    if not any(holds.get((nm, n)) for n in sizes):
                        continue
                    cells = []
                    for n in sizes:
                        xs = holds.get((nm, n), [])
                        cells.append(f"{len(xs)}: {fm(med(xs))} / {fm(pct(xs, 0.95))} / {fm(max(xs))}" if xs else "0")
                    L.append(f"| {nm} | " + " | ".join(cells) + " |")

        def ratio(a, b):
            ma, mb = med(S.get(a, [])), med(S.get(b, []))
            return ma / mb if mb and mb == mb and ma == ma else float("nan")

        def shown(a, b, digits):
            # The ratio with its 95% bootstrap interval (benchlib.ratio_ci).
            return benchlib.ratio_text(S.get(a, []), S.get(b, []), digits)

        L.append("\n### Ratios (medians) against the project's targets\n")
        L.append("A ratio's 95% interval (in parentheses) is a percentile bootstrap of the ratio of medians: "
                 "each contender's repetitions resampled on their own, 2 000 times, seeded "
                 "(`benchlib.ratio_ci`). A target inside the interval is not settled by this run.\n")
        L.append("| quantity | measured | target | met |")
        L.append("|---|---|---|---|")
        tgt = []
        for n, ps, bt in ((8, 25, 10), (64, 30, 3)):
            if n not in sizes:
                continue
            k1, k2, kp = ("perstep", "tc", "attach", n), ("batch", "tc", "attach", n), ("podtap", "tc", "attach", n)
            r1, r2 = ratio(k1, kp), ratio(k2, kp)
            tgt.append((f"attach {n} if: per-step script / podtap", shown(k1, kp, 1), f"≥ {ps}×", r1 >= ps))
            tgt.append((f"attach {n} if: batch script / podtap", shown(k2, kp, 1), f"≥ {bt}×", r2 >= bt))
        for n in sizes:
            kp, kf = ("podtap", "tc", "detach", n), ("floor", "group", "detach", n)
            tgt.append((f"detach {n} if: podtap / kernel floor", shown(kp, kf, 2), "≤ 1.5×", ratio(kp, kf) <= 1.5))
        for n, at, dt in ((8, 1.5, 2.5), (64, 1.25, 1.3)):
            if n in sizes:
                kp, kf = ("podtap", "tc", "attach", n), ("cfloor", "tc", "attach", n)
                tgt.append((f"attach {n} if: podtap CLI / floor.c", shown(kp, kf, 2), f"≤ {at}×", ratio(kp, kf) <= at))
                kp, kf = ("podtap", "tc", "detach", n), ("cfloor", "tc", "detach-early", n)
                tgt.append((f"detach {n} if: podtap CLI / floor.c early return", shown(kp, kf, 2), f"≤ {dt}×",
                            ratio(kp, kf) <= dt))
        if 8 in sizes:
            m = med(S.get(("podtap", "bridge", "detach", 8), []))
            tgt.append(("bridge detach 8 if, returned (median)", f"{m:.1f} ms", "≤ 60 ms", m <= 60))
            w = self.stall.get(("podtap-bridge", 8), float("nan"))
            tgt.append(("worst RTNL stall during podtap bridge attach+detach, 8 if", f"{w:.1f} ms", "≤ 25 ms", w <= 25))
        if 1 in sizes:
            m = med(S.get(("cni", "tc", "detach", 1), []))
            tgt.append(("CNI DEL of one interface, returned (median)", f"{m:.1f} ms", "≤ 6 ms", m <= 6))
        for n, t in ((8, 10), (64, 30)):
            if n in sizes:
                kr, kp = ("perstep", "tc", "detach", n), ("podtap", "tc", "detach", n)
                tgt.append((f"detach {n} if: per-step script / podtap", shown(kr, kp, 1), f"≥ {t}×", ratio(kr, kp) >= t))
        if 64 in sizes:
            for mode in ("tc", "bridge"):
                m64, m8 = med(S.get(("podtap", mode, "attach", 64), [])), med(S.get(("podtap", mode, "attach", 8), []))
                mc = (m64 - m8) / 56
                tgt.append((f"attach marginal cost per extra if ({mode}, (t64−t8)/56, wall)",
                            f"{mc:.3f} ms", "≤ 0.5 ms", mc <= 0.5))
        for n in sizes:
            if n == 1:
                continue
            kl, kt = ("podtap", "l3", "attach", n), ("podtap", "tc", "attach", n)
            tgt.append((f"attach {n} if: podtap l3 / podtap tc", shown(kl, kt, 2), "≤ 1.3×", ratio(kl, kt) <= 1.3))
            kl, kt = ("podtap", "l3", "detach", n), ("podtap", "tc", "detach", n)
            tgt.append((f"detach {n} if: podtap l3 / podtap tc", shown(kl, kt, 2), "(none)", None))
        dp = self.extra.get("datapath")
        if dp:
            for size, what in ((60, "64 B"), (1514, "1500 B")):
                for f, d in (("rx_pps", "delivered (generator → guest)"), ("echo_pps", "echoed (guest → generator)")):
                    xl = [x[f] for x in dp.get(("l3", size), [])]
                    xt = [x[f] for x in dp.get(("tc4", size), [])]
                    r = med(xl) / med(xt) if xl and xt and med(xt) else float("nan")
                    tgt.append((f"data path {what} {d}: l3 / tc, same IPv4/UDP frames",
                                benchlib.ratio_text(xl, xt, 2), "≥ 0.8×", r >= 0.8))
        for (what, mode, n), xs in sorted(self.rss.items()):
            if what == "attach" and mode == "tc" and n in (1, 64):
                tgt.append((f"peak RSS, attach {n} if (max of {len(xs)})", f"{max(xs) / 1024:.1f} MiB",
                            "≤ 16 MiB", max(xs) <= 16 * 1024))
        cc = self.extra.get("concurrency")
        if cc:
            tgt.append((f"{cc['pods']} concurrent pods: failures", str(cc["attach_failures"] + cc["detach_failures"]), "0",
                        cc["attach_failures"] + cc["detach_failures"] == 0))
            tgt.append((f"{cc['pods']} concurrent pods: leftovers (links+qdiscs+checkpoints)",
                        str(cc["left_links"] + cc["left_qdiscs"] + cc["left_checkpoints"]), "0",
                        cc["left_links"] + cc["left_qdiscs"] + cc["left_checkpoints"] == 0))
        for q, m, t, ok in tgt:
            L.append(f"| {q} | {m} | {t} | {'–' if ok is None else 'yes' if ok else '**no**'} |")

        L.append("\n### 3. podtap attach phases from `attachment.timings_us` (median µs)\n")
        L.append("*unphased* is total minus the four phases (median of each sample's): in l3 mode mostly the "
                 "nftables table's install, which comes after the wiring phase.\n")
        L.append("| mode | ifs | scan | tap | wiring | checkpoint | unphased | total (in-process) | process wall (ms) |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        for (mode, n), ts in sorted(self.phases.items()):
            c = {f: med([t.get(f, 0) for t in ts]) for f in PHASES}
            wall = med(S.get(("podtap", mode, "attach", n), []))
            L.append(f"| {mode} | {n} | " + " | ".join(f"{c[f]:.0f}" for f in PHASES[:4])
                     + f" | {med([unphased(t) for t in ts]):.0f} | {c['total']:.0f} | {fm(wall)} |")
        if 64 in sizes and 8 in sizes:
            L.append("")
            for mode in ("tc", "bridge", "l3"):
                p64, p8 = self.phases.get((mode, 64), []), self.phases.get((mode, 8), [])
                if p64 and p8:
                    parts = ", ".join(
                        f"{f} {(med([t[f] for t in p64]) - med([t[f] for t in p8])) / 56:.0f}"
                        for f in ("scan", "tap", "wiring", "checkpoint", "total"))
                    L.append(f"- marginal µs per extra interface, {mode} (in-process): {parts}")
        # where l3's attach spends what tc's does not: the phase medians' differences
        l3rows = []
        for n in sizes:
            pl, pt = self.phases.get(("l3", n), []), self.phases.get(("tc", n), [])
            if pl and pt:
                d = {f: med([t.get(f, 0) for t in pl]) - med([t.get(f, 0) for t in pt]) for f in PHASES}
                d["unphased"] = med([unphased(t) for t in pl]) - med([unphased(t) for t in pt])
                parts = ", ".join(f"{f} {d[f]:+.0f}" for f in PHASES[:4] + ("unphased", "total"))
                wl, wt = med(S.get(("podtap", "l3", "attach", n), [])), med(S.get(("podtap", "tc", "attach", n), []))
                l3rows.append(f"- l3 minus tc, {n} if (µs, differences of medians): {parts}; "
                              f"process wall {1000 * (wl - wt):+.0f}")
        if l3rows:
            L.append("\nWhere l3's attach differs from tc's. In l3 mode *scan* also reads what the routed NICs "
                     "will change (their sysctls, IPv6 addresses and the routes that use them as source), "
                     "*wiring* makes the changes (sysctls, the TAP's addresses, host routes, local routes "
                     "deleted, proxy ARP/NDP entries) instead of tc's filters, and *unphased* holds the "
                     "nftables table.\n")
            L.extend(l3rows)

        L.append("\n### 4. Peak RSS (MiB, max over runs; `/usr/bin/time -f %M`, one untimed run per rep)\n")
        L.append("| podtap command | ifs | peak RSS |")
        L.append("|---|---|---|")
        for (what, mode, n), xs in sorted(self.rss.items()):
            L.append(f"| {what} {'' if mode == '-' else mode} | {n} | {max(xs) / 1024:.1f} |")

        if cc:
            L.append(f"\n### 5. Concurrency: {cc['pods']} pods × 2 veths, all attached in parallel, then all detached\n")
            L.append("| phase | wall (ms) | failures |")
            L.append("|---|---|---|")
            L.append(f"| attach ×{cc['pods']} | {cc['attach_ms']:.0f} | {cc['attach_failures']} |")
            L.append(f"| detach ×{cc['pods']} | {cc['detach_ms']:.0f} | {cc['detach_failures']} |")
            L.append(f"\nTAPs present after the attach wave: {cc['taps_made']} (expected {2 * cc['pods']}). "
                     f"Leftovers after detach: {cc['left_links']} links, {cc['left_qdiscs']} ingress qdiscs, "
                     f"{cc['left_checkpoints']} checkpoints.")
            if cc["first_errors"]:
                L.append(f"First errors: `{cc['first_errors']}`")

        dp = self.extra.get("datapath")
        if dp:
            rounds, secs = self.extra["datapath_secs"]
            L.append(f"\n### 6. Data path: frames/s through the wiring ({rounds} round(s) × {secs} s per variant, median)\n")
            L.append("Generator in the peer netns → veth → [wiring] → stand-in (reads, swaps MACs, writes back) → "
                     "[wiring] → veth → generator. *delivered* = frames the stand-in read; *echoed* = frames back at the generator. "
                     "The *IPv4/UDP frames* rows send UDP to the pod's address (l3: to eth0's MAC, and the pod netns "
                     "routes them to the TAP and the echo back); their stand-in answers ARP and also swaps the IPv4 "
                     "addresses and UDP ports.\n")
            L.append("| frame | wiring | offered (kpps) | delivered (kpps) | echoed (kpps) | delivered vs bare veth | echoed vs bare veth | generator CPU ns / frame sent | stand-in CPU ns / frame echoed |")
            L.append("|---|---|---|---|---|---|---|---|---|")
            label = {60: "64 B (60 + FCS)", 1514: "1500 B payload (1514 + FCS)"}
            for size in (60, 1514):
                b = dp.get(("veth", size))
                for v in DP_VARIANTS:
                    xs = dp.get((v, size))
                    if not xs:
                        L.append(f"| {label[size]} | {v} | failed | | | | | | |")
                        continue
                    s, r, e = (med([x[f] for x in xs]) for f in ("sent_pps", "rx_pps", "echo_pps"))
                    rb = med([x["rx_pps"] for x in b]) if b else float("nan")
                    eb = med([x["echo_pps"] for x in b]) if b else float("nan")
                    L.append(f"| {label[size]} | {DP_VARIANTS[v]} | {s / 1e3:.0f} | {r / 1e3:.0f} | {e / 1e3:.0f} | "
                             f"{r / rb:.2f} | {e / eb:.2f} | "
                             f"{med([x['gen_ns_per_frame'] for x in xs]):.0f} | {med([x['echo_ns_per_frame'] for x in xs]):.0f} |")
            if dp.get(("l3", 60)) or dp.get(("l3", 1514)) or dp.get(("tc4", 60)):
                L.append("\n### 6d. l3 against tc: the same frames, the same host, the same run\n")
                L.append("*l3 / tc* is the ratio of the medians with its 95% bootstrap interval (as in the ratios "
                         "table); *per round* is the median (min–max) of the ratios within each round, where the "
                         "variants ran one after the other. *tc* sends the same IPv4/UDP frames through u32 + mirred "
                         "to the same stand-in loop; *tc, raw frames* is section 6's tc row.\n")
                L.append("| frame | direction | l3 (kpps) | tc (kpps) | l3 / tc | per round | tc, raw frames (kpps) | l3 / tc, raw frames |")
                L.append("|---|---|---|---|---|---|---|---|")
                for size in (60, 1514):
                    xl, xt, xr = dp.get(("l3", size), []), dp.get(("tc4", size), []), dp.get(("tc", size), [])
                    for f, d in (("rx_pps", "delivered"), ("echo_pps", "echoed")):
                        al, at, ar = ([x[f] for x in xs] for xs in (xl, xt, xr))
                        if not al or not at:
                            L.append(f"| {label[size]} | {d} | {'failed' if not al else fm(med(al) / 1e3)} | "
                                     f"{'failed' if not at else fm(med(at) / 1e3)} | | | | |")
                            continue
                        byr = {x["round"]: x[f] for x in xt}
                        rr = [x[f] / byr[x["round"]] for x in xl if byr.get(x["round"])]
                        per = f"{med(rr):.2f} ({min(rr):.2f}–{max(rr):.2f})" if rr else "–"
                        L.append(f"| {label[size]} | {d} | {med(al) / 1e3:.0f} | {med(at) / 1e3:.0f} | "
                                 f"{benchlib.ratio_text(al, at, 2)} | {per} | "
                                 f"{fm(med(ar) / 1e3) if ar else 'failed'} | "
                                 f"{benchlib.ratio_text(al, ar, 2) if ar else '–'} |")
            ow = {v: dp.get((v, "oneway"), []) for v in DP_VARIANTS}
            if any(ow.values()):
                L.append("\n### 6c. One way: the forward path's CPU per frame (64 B, sink never reads)\n")
                L.append("Generator → veth → [wiring] → a TAP (bare veth: a packet socket) held open and never "
                         "read, so frames are dropped at its full queue after the whole wiring: the generator's "
                         "CPU time per frame sent is the forward path alone, softirq included. Median (min–max) "
                         "over rounds; *vs u32 + mirred* is the median of the ratios within each round.\n")
                L.append("| wiring | generator CPU ns / frame sent | vs u32 + mirred | offered (kpps) |")
                L.append("|---|---|---|---|")
                u32 = ow.get("tc", [])
                for v, xs in ow.items():
                    if not xs:
                        L.append(f"| {DP_VARIANTS[v]} | failed | | |")
                        continue
                    ns = [x["gen_ns_per_frame"] for x in xs]
                    rel = "–"
                    if len(xs) == len(u32):
                        rr = [a["gen_ns_per_frame"] / b["gen_ns_per_frame"] for a, b in zip(xs, u32)]
                        rel = f"{med(rr):.3f} ({min(rr):.2f}–{max(rr):.2f})"
                    L.append(f"| {DP_VARIANTS[v]} | {med(ns):.0f} ({min(ns):.0f}–{max(ns):.0f}) | {rel} | "
                             f"{med([x['sent_pps'] for x in xs]) / 1e3:.0f} |")
                byr = {x["round"]: x["gen_ns_per_frame"] for x in ow.get("tc4", [])}
                rr = [x["gen_ns_per_frame"] / byr[x["round"]] for x in ow.get("l3", []) if byr.get(x["round"])]
                if rr:
                    L.append(f"\nl3 / tc on the same IPv4/UDP frames, generator CPU ns per frame sent "
                             f"(median of the per-round ratios, min–max): {med(rr):.3f} ({min(rr):.2f}–{max(rr):.2f}). "
                             "l3's one-way sink answers the netns's ARP request for the guest, then reads nothing.")
        tcp = self.extra.get("tcp")
        if tcp:
            n = max(len(v) for v in tcp.values())
            L.append(f"\n### 6b. TCP through the wiring (iperf3 -t {self.a.tcp_secs}, one stream, {n} round(s), Gbit/s)\n")
            L.append("| wiring | median Gbit/s | all rounds | median vs bare veth |")
            L.append("|---|---|---|---|")
            base = med(tcp.get("veth", []))
            for v in ("veth", "tc", "bridge", "macvtap"):
                xs = tcp.get(v, [])
                if not xs:
                    L.append(f"| {v} | failed | | |")
                    continue
                L.append(f"| {'bare veth (packet socket)' if v == 'veth' else v} | {med(xs):.2f} | "
                         f"{', '.join(f'{x:.1f}' for x in xs)} | {med(xs) / base:.2f} |")
        idn = self.extra.get("identity")
        if idn:
            L.append(f"\n### Identical kernel objects (checked once, {idn[0]} interfaces)\n")
            L.append("The iproute2 scripts build u32 + mirred redirects, podtap's default "
                     "(`podtap attach --tc-redirect u32`).\n")
            for k, v in idn[1].items():
                L.append(f"- {k} vs podtap: {v}")
        L.append(f"\n### Failures and leftovers: {len(problems)}\n")
        for p in problems:
            L.append(f"- {p}")
        return "\n".join(L) + "\n"

    def cleanup(self):
        for ns in list(self.netns):
            sh(["ip", "netns", "delete", ns], check=False)


def main():
    global log_file
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--standin", required=True)
    ap.add_argument("--floor", required=True)
    ap.add_argument("--lib", required=True, help="examples/bench_lib binary")
    ap.add_argument("--datapath-only", action="store_true", help="only the data-path test")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--pods", type=int, default=100)
    ap.add_argument("--dp-rounds", type=int, default=5)
    ap.add_argument("--dp-secs", type=float, default=1.5)
    ap.add_argument("--tcp", action="store_true")
    ap.add_argument("--tcp-secs", type=int, default=3)
    ap.add_argument("--tcp-rounds", type=int, default=3)
    ap.add_argument("--out")
    ap.add_argument("--raw")
    ap.add_argument("--header", help="file whose text starts the report")
    a = ap.parse_args()
    log_file = open(os.path.join(a.workdir, "bench.log"), "w")

    def on_term(signum, frame):
        raise SystemExit(128 + signum)  # run the finally clauses: cleanup
    signal.signal(signal.SIGTERM, on_term)
    b = Bench(a)
    t0 = time.time()
    benchlib.run_then_clean(b.run, b.cleanup, problems, log)
    md = b.report()
    if a.header:
        md = open(a.header).read() + "- load average at the end: " + " ".join(open("/proc/loadavg").read().split()[:3]) + "\n\n" + md
    md += f"\nRun took {time.time() - t0:.0f} s.\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(md)
        log(f"wrote {a.out}")
    else:
        sys.stdout.write(md)
    if a.raw:
        with open(a.raw, "w") as f:
            json.dump({"samples_ms": {"/".join(map(str, k)): v for k, v in b.samples.items()},
                       "cpu_ms": {"/".join(map(str, k)): v for k, v in b.cpu.items()},
                       "phases_us": {f"{m}/{n}": v for (m, n), v in b.phases.items()},
                       "rss_kib": {"/".join(map(str, k)): v for k, v in b.rss.items()},
                       "concurrency": b.extra.get("concurrency"),
                       "datapath": {f"{v}/{s}": x for (v, s), x in b.extra.get("datapath", {}).items()},
                       "tcp": b.extra.get("tcp"), "problems": problems}, f, indent=1, default=str)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
