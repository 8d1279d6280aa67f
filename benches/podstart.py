#!/usr/bin/env python3
"""Pod start under real runtimes: the driver of benches/podstart.sh.

  podstart.py cri --work W --pods N --warmup K --out FILE
      inside the private mount namespace and node netns of tests/runtimes/cri-env.sh,
      with W's containerd running: RunPodSandbox, StopPodSandbox, RemovePodSandbox
      per pod, the runtime handlers of CHAINS interleaved pod by pod
  podstart.py podman --work W --pods N --warmup K --out FILE
      inside podman-env.sh's run_private: `podman run --rm` per container, the
      networks of CHAINS interleaved ($PODSTART_P is the podman command line)
  podstart.py report --cri FILE --podman FILE
      the Markdown section on stdout

Each chain is a CNI conflist set up by podstart.sh: "plain" is bridge + host-local,
"podtap" the same + podtap (tc mode, as `podtap cni-install` chains it);
"plain-timed" and "podtap-timed" are those two with every plugin run through
benches/podstart-wrap.c (each plugin's wall and CPU time, appended to
W/bin/podstart-timing.log), and "podtap-waited" the podtap chain with each
plugin's time running until every process it left has exited (podtap's
DEL child, which then waits out its bound for the next plugin): a diagnostic
of where the time goes, never compared with the untimed chains.
Exit status: 0 when every pod started and left nothing behind, 1 otherwise.
"""
import argparse
import glob
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import pct  # noqa: E402  (the same interpolated percentile as bench.py)

CHAINS = ["plain", "podtap", "plain-timed", "podtap-timed", "podtap-waited"]
TIMED = ["plain-timed", "podtap-timed", "podtap-waited"]
LABEL = {
    "plain": "bridge + host-local",
    "podtap": "bridge + host-local + podtap",
    "plain-timed": "bridge + host-local, each plugin timed",
    "podtap-timed": "bridge + host-local + podtap, each plugin timed",
    "podtap-waited": "bridge + host-local + podtap, each plugin timed until its last process exits",
}


def log(msg):
    print(f"podstart: {msg}", file=sys.stderr, flush=True)


def procs_matching(pred):
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if pred(pid):
                out.append(pid)
        except OSError:
            pass
    return out


def wait_quiet(work, podtap):
    """Until no podtap process of ours (a detach's deleter child) and no shim
    serving W is left: each start begins on a quiet node. Returns False on timeout."""
    def ours(pid):
        if os.readlink(f"/proc/{pid}/exe") == podtap:
            return True
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
        return b"containerd-shim" in cmd and work.encode() in cmd

    deadline = time.monotonic() + 10
    while procs_matching(ours):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class TimingLog:
    """New lines of podstart-wrap's log since the last read, each tagged with `during`."""

    def __init__(self, work):
        self.path, self.pos = f"{work}/bin/podstart-timing.log", 0

    def read(self, during):
        out = []
        if not os.path.exists(self.path):
            return out
        with open(self.path) as f:
            f.seek(self.pos)
            for line in f:
                name, cmd, _id, t0, t1, cpu, code = line.split()
                out.append({"plugin": name, "cmd": cmd, "during": during,
                            "start_ns": int(t0), "end_ns": int(t1),
                            "ms": (int(t1) - int(t0)) / 1e6, "cpu_ms": int(cpu) / 1e3,
                            "status": int(code)})
            self.pos = f.tell()
        return out


def checkpoints(work, chain):
    return sorted(glob.glob(f"{work}/state-{chain}/*.json"))


def attach_total_ms(files):
    totals = []
    for p in files:
        with open(p) as f:
            d = json.load(f)
        t = ((d.get("description") or {}).get("attachment") or {}).get("timings_us") or {}
        if "total" in t:
            totals.append(t["total"] / 1e3)
    return totals


def new_samples():
    return {c: {"run": [], "stop": [], "remove": [], "attach_ms": [], "plugins": [], "phases": {}}
            for c in CHAINS}


def phases(sc, call, t_start, t_end, plugins):
    """Split one call of a timed chain at its plugin runs (ms): before the first ADD
    or DEL plugin, the plugins of each command (first start to last end, the
    runtime's work between them included), between the commands, after the last
    (other commands, such as podman's VERSION probes, are not split out)."""
    plugins = [p for p in plugins if p["cmd"] in ("ADD", "DEL")]
    if not plugins:
        return
    groups = {}
    for p in plugins:
        g = groups.setdefault(p["cmd"], [p["start_ns"], p["end_ns"]])
        g[0], g[1] = min(g[0], p["start_ns"]), max(g[1], p["end_ns"])
    order = sorted(groups.items(), key=lambda kv: kv[1][0])
    seg = sc["phases"].setdefault(call, {})
    last, prev = t_start, None
    for cmd, (a, b) in order:
        seg.setdefault(f"before {cmd}" if prev is None else f"{prev} to {cmd}", []).append((a - last) / 1e6)
        seg.setdefault(f"{cmd} plugins", []).append((b - a) / 1e6)
        last, prev = b, cmd
    seg.setdefault(f"after {prev}", []).append((t_end - last) / 1e6)


def record(s, chain, key, ms, kept):
    if kept:
        s[chain][key].append(ms)


def rounds(a):
    """Yield (round, chain, kept): every chain once a round, order rotated each round;
    the warm-up rounds' samples are not kept."""
    for i in range(a.warmup + a.pods):
        k = i % len(CHAINS)
        for c in CHAINS[k:] + CHAINS[:k]:
            yield i, c, i >= a.warmup


def links():
    out = subprocess.run(["ip", "-d", "-j", "link", "show"], capture_output=True, text=True,
                         check=True).stdout
    return [(li["ifname"], li.get("linkinfo", {}).get("info_kind", "-")) for li in json.loads(out)]


def node_leftovers(work):
    """What a finished run must not leave: checkpoints, TAPs or veths in the node netns."""
    left = [f"checkpoint {p}" for c in CHAINS for p in checkpoints(work, c)]
    left += [f"link {n} ({k})" for n, k in links() if k in ("tun", "veth")]
    return left


def cri_bench(a):
    import grpc
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "runtimes", "cri"))
    import cri
    pb, pbg = cri.stubs()
    rt = pbg.RuntimeServiceStub(grpc.insecure_channel(f"unix://{a.work}/c.sock"))
    podtap = os.path.realpath(f"{a.work}/bin/podtap")
    tl = TimingLog(a.work)
    s, failures = new_samples(), []
    for i, c, kept in rounds(a):
        if not wait_quiet(a.work, podtap):
            failures.append(f"round {i} {c}: a podtap process or shim did not exit in 10 s")
        config = cri.pod_config(pb, f"ps-{c}-{i}", f"uid-{c}-{i}", "default", {})
        t0 = time.perf_counter_ns()
        pod = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=config, runtime_handler=c)).pod_sandbox_id
        t1 = time.perf_counter_ns()
        record(s, c, "run", (t1 - t0) / 1e6, kept)
        run_p = tl.read("RunPodSandbox")
        files = checkpoints(a.work, c)
        if "podtap" in c:
            if len(files) != 1:
                failures.append(f"round {i} {c}: {len(files)} checkpoints after RunPodSandbox")
            s[c]["attach_ms"] += attach_total_ms(files) if kept else []
        t2 = time.perf_counter_ns()
        rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=pod))
        t3 = time.perf_counter_ns()
        stop_p = tl.read("StopPodSandbox")
        rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=pod))
        t4 = time.perf_counter_ns()
        remove_p = tl.read("RemovePodSandbox")
        record(s, c, "stop", (t3 - t2) / 1e6, kept)
        record(s, c, "remove", (t4 - t3) / 1e6, kept)
        if kept:
            s[c]["plugins"] += run_p + stop_p + remove_p
            phases(s[c], "RunPodSandbox", t0, t1, run_p)
            phases(s[c], "StopPodSandbox", t2, t3, stop_p)
            phases(s[c], "RemovePodSandbox", t3, t4, remove_p)
        if checkpoints(a.work, c):
            failures.append(f"round {i} {c}: checkpoint left after StopPodSandbox")
    wait_quiet(a.work, podtap)
    pods = rt.ListPodSandbox(pb.ListPodSandboxRequest()).items
    failures += [f"pod {p.id} left" for p in pods]
    failures += [f"netns /run/netns/{n} left" for n in os.listdir("/run/netns")]
    failures += node_leftovers(a.work)
    return s, failures


def podman_bench(a):
    p = shlex.split(os.environ["PODSTART_P"])
    podtap = os.path.realpath(f"{a.work}/bin/podtap")
    tl = TimingLog(a.work)
    late = 0
    net = {c: "ptrt" if c == "podtap" else f"ptps-{c}" for c in CHAINS}
    s, failures = new_samples(), []
    try:
        for i, c, kept in rounds(a):
            if not wait_quiet(a.work, podtap):
                failures.append(f"round {i} {c}: a podtap process did not exit in 10 s")
            cmd = p + ["run", "--rm", "--network", net[c], "--rootfs", f"{a.work}/rootfs",
                       "/bin/sh", "-c", ":"]
            t0 = time.perf_counter_ns()
            r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
            t1 = time.perf_counter_ns()
            if r.returncode != 0:
                failures.append(f"round {i} {c}: podman run exit {r.returncode}: {r.stderr.strip()[-300:]}")
            record(s, c, "run", (t1 - t0) / 1e6, kept)
            plugins = tl.read("podman run")
            late += sum(p["end_ns"] > t1 for p in plugins)
            if kept:
                s[c]["plugins"] += plugins
                phases(s[c], "podman run --rm", t0, t1, plugins)
            if checkpoints(a.work, c):
                failures.append(f"round {i} {c}: checkpoint left after podman run --rm")
    finally:
        left = subprocess.run(p + ["ps", "-aq"], capture_output=True, text=True).stdout.split()
        failures += [f"container {x} left" for x in left]
        if left:
            subprocess.run(p + ["rm", "-f"] + left, capture_output=True)
    wait_quiet(a.work, podtap)
    failures += [f"netns /run/netns/{n} left" for n in os.listdir("/run/netns")]
    failures += node_leftovers(a.work)
    if late:
        failures.append(f"{late} plugin run(s) ended after their `podman run --rm` had returned")
    return s, failures


# ---- report ----

def stats(xs):
    return {"n": len(xs), "p50": pct(xs, 0.5), "p99": pct(xs, 0.99),
            "mean": sum(xs) / len(xs) if xs else float("nan")}


def row(label, xs):
    st = stats(xs)
    return f"| {label} | {st['n']} | {st['p50']:.1f} | {st['p99']:.1f} | {st['mean']:.1f} | |"


def added_row(label, s, key):
    """podtap's chain minus the plain one: difference of p50s, p99s, means, and
    the median of the per-round differences (the two ran in the same round)."""
    a, b = s["plain"][key], s["podtap"][key]
    sa, sb = stats(a), stats(b)
    paired = pct([y - x for x, y in zip(a, b)], 0.5)
    d = [sb[k] - sa[k] for k in ("p50", "p99", "mean")]
    return (f"| **{label}** | {min(len(a), len(b))} | **{d[0]:+.1f}** | {d[1]:+.1f} | {d[2]:+.1f} |"
            f" paired median {paired:+.1f} |")


CALLS = "| call, CNI chain | n | p50 | p99 | mean | |\n|---|---:|---:|---:|---:|---|"
PLUGINS = ("| plugin run (diagnostic chains) | n | wall p50 | wall p99 | wall mean | CPU p50 | CPU mean |\n"
           "|---|---:|---:|---:|---:|---:|---:|")


def plugin_rows(s, runs):
    """One row per (plugin, command, call, chain) of the timed chains: wall and CPU ms."""
    out = []
    for cmd, during in runs:
        for plugin in ("bridge", "podtap"):
            for chain in TIMED:
                ps = [p for p in s[chain]["plugins"]
                      if p["plugin"] == plugin and p["cmd"] == cmd and p["during"] == during]
                if not ps:
                    continue
                w, c = stats([p["ms"] for p in ps]), stats([p["cpu_ms"] for p in ps])
                out.append(f"| {plugin} {cmd} in {during}, {chain} chain | {w['n']} | "
                           f"{w['p50']:.2f} | {w['p99']:.2f} | {w['mean']:.2f} | {c['p50']:.2f} | {c['mean']:.2f} |")
    return out


def phase_rows(s):
    """p50 of each part of each call, diagnostic chains side by side, and the
    podtap-timed chain minus the plain-timed one."""
    out = ["| part of the call, p50 ms | plain-timed | podtap-timed | difference | podtap-waited |",
           "|---|---:|---:|---:|---:|"]
    ph = {c: s[c]["phases"] for c in TIMED}

    def p50(chain, call, seg):
        xs = ph[chain].get(call, {}).get(seg)
        return pct(xs, 0.5) if xs else None

    def fmt(x, f="{:.1f}"):
        return "-" if x is None else f.format(x)

    for call, segs in ph["podtap-timed"].items():
        for seg in segs:
            a, b, w = (p50(c, call, seg) for c in TIMED)
            diff = None if a is None or b is None else b - a
            out.append(f"| {call}: {seg} | {fmt(a)} | {fmt(b)} | {fmt(diff, '{:+.1f}')} | {fmt(w)} |")
    return out


def cri_report(d):
    s = d["samples"]
    out = [f"#### containerd {d['version']} CRI: ms per call, {d['pods']} pods per chain", "", CALLS]
    for key, call in (("run", "RunPodSandbox"), ("stop", "StopPodSandbox"), ("remove", "RemovePodSandbox")):
        for c in CHAINS:
            out.append(row(f"{call}, {LABEL[c]}", s[c][key]))
        out.append(added_row(f"{call}: added by podtap", s, key))
    out += [row("podtap attach in-process (`attachment.timings_us.total`), podtap chain",
                s["podtap"]["attach_ms"]), "", PLUGINS]
    out += plugin_rows(s, (("ADD", "RunPodSandbox"), ("DEL", "StopPodSandbox"), ("DEL", "RemovePodSandbox")))
    return out + [""] + phase_rows(s) + [""]


def podman_report(d):
    s = d["samples"]
    out = [f"#### {d['version']}: `podman run --rm … /bin/sh -c :`, ms, {d['pods']} containers per network",
           "", CALLS]
    for c in CHAINS:
        out.append(row(f"podman run --rm, {LABEL[c]}", s[c]["run"]))
    out += [added_row("podman run --rm: added by podtap (ADD + DEL)", s, "run"), "", PLUGINS]
    out += plugin_rows(s, (("ADD", "podman run"), ("DEL", "podman run")))
    # podman 4.3 probes plugins with VERSION as it loads networks, other networks' too.
    runs = sum(len(s[c]["run"]) for c in TIMED)
    ver = [p for c in TIMED for p in s[c]["plugins"] if p["plugin"] == "podtap" and p["cmd"] == "VERSION"]
    if ver:
        w, c = stats([p["ms"] for p in ver]), stats([p["cpu_ms"] for p in ver])
        out.append(f"| podtap VERSION, podman's probes (any network's; {len(ver) / runs:.1f} "
                   f"per run here) | {w['n']} | {w['p50']:.2f} | {w['p99']:.2f} | {w['mean']:.2f} | "
                   f"{c['p50']:.2f} | {c['mean']:.2f} |")
    return out + [""] + phase_rows(s) + [""]


def report(a):
    out = ["### Pod start under a real runtime", ""]
    failures = []
    for path, part in ((a.cri, cri_report), (a.podman, podman_report)):
        if path:
            with open(path) as f:
                d = json.load(f)
            out += part(d)
            failures += d["failures"]
    out.append(f"Failures and leftovers: {len(failures)}" + "".join(f"\n- {x}" for x in failures))
    out += ["", METHOD]
    print("\n".join(out))
    return 1 if failures else 0


METHOD = """**Method.** `benches/podstart.sh` runs one private containerd (CRI plugin, runc,
overlayfs; `tests/runtimes/cri-env.sh`) and then one private podman (CNI backend, runc;
`tests/runtimes/podman-env.sh`), each in a node netns and a private mount namespace of
the run's own. Five CNI chains, all with Debian's containernetworking-plugins, each on
its own bridge and subnet: *plain* (bridge + host-local) and *podtap* (the same + podtap
in tc mode, as `podtap cni-install` chains it), the two compared; and, as diagnostics of
where the time goes, never compared with those two, *plain-timed* and *podtap-timed*,
the same two with every plugin run through `benches/podstart-wrap.c`, which adds a fork
per plugin and logs each plugin's wall time (fork to reap, CLOCK_MONOTONIC) and CPU time
(user + sys, wait4), and *podtap-waited*, where the wrapper, a child subreaper, also
waits for every process the plugin left: podtap's DEL leaves a child that deletes the
TAP once the next plugin has deleted the pod's veth, which cannot happen while the
wrapper waits, so there the child waits out its 0.5 s bound. It shows what the TAP's
deletion would cost a runtime that waited for it. The plugin timestamps split
each call into the time before the first plugin, the plugins of each command (the
runtime's work between plugins included), and the runtime's work between and after
them. containerd serves the five chains as runtime handlers with their own
`cni_conf_dir`, podman as five networks.
Pods (busybox sandbox image, `sleep`) and containers (`--rootfs` busybox, `sh -c :`)
are started one at a time, the chains interleaved: every round runs each chain once,
the order rotated every round, so drift hits all alike; each start waits until no
podtap process (a detach's deleter child) and no shim of the previous pod is left.
CRI: the driver times each gRPC call in-process (`perf_counter_ns` around
RunPodSandbox, then StopPodSandbox and RemovePodSandbox as rows of their own); podman:
the whole `podman run --rm` process, fork to reap (ADD at start, DEL at removal; a
plugin run that ended after its `podman run` returned would be reported). After the
warm-up rounds (untimed), p50 and p99 are linearly interpolated percentiles (p99 of 50
samples is close to the maximum), mean the arithmetic mean; "added by podtap" is the
podtap chain's statistic minus the plain chain's, and the paired median is the median
of the per-round differences (more robust to load bursts than a difference of p50s).
After each pod and at the end the run checks that no checkpoint, pod, container, netns,
TAP or veth is left, and podstart.sh that the host's podman and libcni state is unchanged."""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["cri", "podman", "report"])
    ap.add_argument("--work")
    ap.add_argument("--pods", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out")
    ap.add_argument("--version", default="")
    ap.add_argument("--cri")
    ap.add_argument("--podman")
    a = ap.parse_args()
    if a.what == "report":
        return report(a)
    log(f"{a.what}: {a.pods} pods per chain after {a.warmup} warm-up round(s), chains {', '.join(CHAINS)}")
    s, failures = (cri_bench if a.what == "cri" else podman_bench)(a)
    for x in failures:
        log(f"FAIL {x}")
    with open(a.out, "w") as f:
        json.dump({"samples": s, "failures": failures, "pods": a.pods, "version": a.version}, f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
