#!/usr/bin/env python3
"""The responder at node scale: one `podtap serve` daemon serving N attachments.

    sudo python3 benches/serve_scale.py --bin PODTAP [--pods 500] [--rest 60]
                 [--samples 200] [--reps 30] [--prefix P] [--out FILE] [--smoke]

Builds N pod netns (each one veth, `eth0`, 198.18.0.0/16 and 2001:db8:1::/64
addresses and default routes through a hub bridge of the bench's own that
holds both gateways), starts one `podtap serve` on a state dir of its own,
and attaches every pod with `--serve` (tc mode), four at a time. Then:

- **at rest**: after a settling pause (the initial router advertisements,
  RFC 4861's three at most 16 s apart, are over by then), the daemon's CPU
  time (utime + stime of all its threads, /proc/PID/stat), its context
  switches (voluntary + involuntary over /proc/PID/task/*/status: each is a
  wakeup or a preemption) and its RSS (VmRSS) over --rest seconds, with no
  guest at all;
- **request to answer**: for --samples pods spread over the N, the bench opens
  the pod's TAP as a VMM would (a queue fd, TUNSETIFF in the pod netns) and,
  as a guest, sends a DHCPDISCOVER, a DHCPv6 Solicit and a router
  solicitation, each timed from the write of the request to the read of the
  matching OFFER, ADVERTISE and unicast RA (perf_counter_ns in this process);
- **what serving adds to attach**: on one extra pod, --reps pairs of
  `attach` and `attach --serve` (in alternating order, each followed by a
  detach), timed as whole processes with N attachments served.

Prints a Markdown section (tables and a Method paragraph) on stdout, or
appends it to --out. --smoke: 5 pods, 3 s at rest, 5 samples, 3 reps (shows
the harness works, not speed).

Every netns is named <prefix>-*; the root netns is never touched; everything
made (netns, state dir, the daemon) is removed on exit, also on SIGINT and
SIGTERM. Exit status: 0 when every step succeeded and nothing was left, 1
otherwise, 2 for a usage error. Timings are never asserted.
"""
import argparse
import concurrent.futures
import ctypes
import fcntl
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

import benchlib  # benches/, this script's own folder

problems = []
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI, IFF_MULTI_QUEUE = 0x0002, 0x1000, 0x0100


def log(msg):
    print(f"serve_scale.py: {msg}", file=sys.stderr, flush=True)


sh, pct = benchlib.sh, benchlib.pct


# ---- frames a guest sends ----------------------------------------------------
def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def mac_bytes(mac):
    return bytes(int(x, 16) for x in mac.split(":"))


def link_local(mac):
    m = bytearray(mac_bytes(mac))
    m[0] ^= 2
    return b"\xfe\x80" + b"\0" * 6 + bytes(m[:3]) + b"\xff\xfe" + bytes(m[3:])


def ipv6_frame(dst_mac, src_mac, src, dst, nh, payload, hlim=255):
    ip = struct.pack("!IHBB", 6 << 28, len(payload), nh, hlim) + src + dst
    return dst_mac + src_mac + b"\x86\xdd" + ip + payload


def pseudo6(src, dst, nh, payload):
    return src + dst + struct.pack("!IxxxB", len(payload), nh) + payload


def discover(mac, xid):
    chaddr = mac_bytes(mac)
    bootp = struct.pack("!BBBBIHH4s4s4s4s16s64s128s", 1, 1, 6, 0, xid, 0, 0x8000, b"\0" * 4,
                        b"\0" * 4, b"\0" * 4, b"\0" * 4, chaddr, b"", b"")
    bootp += b"\x63\x82\x53\x63" + b"\x35\x01\x01" + b"\x37\x04\x01\x03\x06\x79" + b"\xff"
    udp = struct.pack("!HHHH", 68, 67, 8 + len(bootp), 0) + bootp
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, b"\0" * 4, b"\xff" * 4)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return b"\xff" * 6 + chaddr + b"\x08\x00" + ip + udp


def solicit6(mac, xid):
    src, dst = link_local(mac), bytes.fromhex("ff020000000000000000000000010002")
    duid = struct.pack("!HH", 3, 1) + mac_bytes(mac)
    msg = bytes([1]) + xid.to_bytes(3, "big")
    msg += struct.pack("!HH", 1, len(duid)) + duid
    msg += struct.pack("!HHIII", 3, 12, 1, 0, 0)
    msg += struct.pack("!HHH", 8, 2, 0) + struct.pack("!HHHH", 6, 4, 23, 24)
    udp = struct.pack("!HHHH", 546, 547, 8 + len(msg), 0) + msg
    udp = udp[:6] + struct.pack("!H", csum(pseudo6(src, dst, 17, udp))) + udp[8:]
    return ipv6_frame(b"\x33\x33\x00\x01\x00\x02", mac_bytes(mac), src, dst, 17, udp, hlim=1)


def router_solicitation(mac):
    src, dst = link_local(mac), bytes.fromhex("ff020000000000000000000000000002")
    icmp = struct.pack("!BBHI", 133, 0, 0, 0) + b"\x01\x01" + mac_bytes(mac)
    icmp = icmp[:2] + struct.pack("!H", csum(pseudo6(src, dst, 58, icmp))) + icmp[4:]
    return ipv6_frame(b"\x33\x33\x00\x00\x00\x02", mac_bytes(mac), src, dst, 58, icmp)


def is_offer(f, xid):
    if len(f) < 14 + 20 + 8 + 240 or f[12:14] != b"\x08\x00" or f[23] != 17:
        return False
    ihl = (f[14] & 15) * 4
    bootp = f[14 + ihl + 8:]
    return (struct.unpack("!H", f[14 + ihl + 2:14 + ihl + 4])[0] == 68 and bootp[0] == 2
            and struct.unpack("!I", bootp[4:8])[0] == xid and b"\x35\x01\x02" in bootp[240:])


def is_advertise(f, xid):
    return (len(f) > 14 + 40 + 8 + 4 and f[12:14] == b"\x86\xdd" and f[20] == 17
            and struct.unpack("!H", f[56:58])[0] == 546 and f[62] in (2, 7)
            and f[63:66] == xid.to_bytes(3, "big"))


def is_unicast_ra(f, mac):
    return (len(f) > 14 + 40 + 16 and f[:6] == mac_bytes(mac) and f[12:14] == b"\x86\xdd"
            and f[20] == 58 and f[54] == 134)


# ---- the guest's side of a TAP ----------------------------------------------
class TapQueue:
    """One queue fd of the TAP NAME in the netns at NETNS, opened as a VMM does."""

    def __init__(self, netns, name, multi_queue):
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(netns, os.O_RDONLY)
        try:
            if libc.setns(target, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns {netns}")
            self.fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
            flags = IFF_TAP | IFF_NO_PI | (IFF_MULTI_QUEUE if multi_queue else 0)
            fcntl.ioctl(self.fd, TUNSETIFF, struct.pack("16sH22x", name.encode(), flags))
        finally:
            libc.setns(own, CLONE_NEWNET)
            os.close(own)
            os.close(target)

    def drain(self):
        try:
            while os.read(self.fd, 65536):
                pass
        except BlockingIOError:
            pass

    def ask(self, frame, matches, timeout=2.0):
        """Write FRAME, read until a frame MATCHES; ms from write to read, or None."""
        self.drain()
        t0 = time.perf_counter_ns()
        os.write(self.fd, frame)
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            if not select.select([self.fd], [], [], left)[0]:
                break
            try:
                f = os.read(self.fd, 65536)
            except BlockingIOError:
                continue
            if matches(f):
                return (time.perf_counter_ns() - t0) / 1e6
        return None

    def close(self):
        os.close(self.fd)


def proc_counters(pid):
    """(CPU seconds, context switches, RSS KiB) of process PID and its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    switches = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/status") as f:
            for line in f:
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    switches += int(line.split()[1])
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
    return cpu, switches, rss


class ServeScale:
    def __init__(self, a):
        self.a = a
        self.bin = os.path.realpath(a.bin)
        self.state = f"/run/{a.prefix}-state"
        self.env = dict(os.environ, PODTAP_STATE_DIR=self.state, PODTAP_LOG="warn")
        self.hub = f"{a.prefix}-hub"
        self.netns = []
        self.daemon = None
        self.attached = {}      # pod netns -> eth0's description entry
        self.rss = {}           # when -> KiB
        self.rest = None        # (seconds, cpu s, switches)
        self.latency = {"DHCPDISCOVER → OFFER": [], "DHCPv6 Solicit → Advertise": [],
                        "router solicitation → RA": []}
        self.unanswered = {k: 0 for k in self.latency}
        self.attach_ms = {"attach": [], "attach --serve": []}
        self.events = {}        # the daemon's event lines, by kind

    def pod(self, i):
        return f"{self.a.prefix}-p{i:04d}"

    def pool(self, fn, items):
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as ex:
            return [f.result() for f in [ex.submit(fn, x) for x in items]]

    # ---- fixture -----------------------------------------------------------
    def make_pods(self, names):
        sh(["ip", "-batch", "-"], input="".join(f"netns add {n}\n" for n in names))
        self.netns += names
        hub = []
        for k, n in enumerate(names):
            hub += [f"link add h{k} type veth peer name eth0 netns {n}",
                    f"link set h{k} master br0", f"link set h{k} up"]
        sh(["ip", "-n", self.hub, "-batch", "-"], input="\n".join(hub) + "\n")

        def conf(item):
            k, n = item
            k += 2
            lines = ["link set lo up", "link set eth0 up",
                     f"address add 198.18.{k // 256}.{k % 256}/16 dev eth0",
                     f"address add 2001:db8:1::{k:x}/64 dev eth0 nodad",
                     "route add default via 198.18.0.1 dev eth0",
                     "route add default via 2001:db8:1::1 dev eth0"]
            sh(["ip", "-n", n, "-batch", "-"], input="\n".join(lines) + "\n")
        self.pool(conf, list(enumerate(names)))

    def build(self):
        sh(["ip", "netns", "add", self.hub])
        self.netns.append(self.hub)
        sh(["ip", "-n", self.hub, "-batch", "-"], input="\n".join([
            "link set lo up", "link add br0 type bridge", "link set br0 up",
            "address add 198.18.0.1/16 dev br0", "address add 2001:db8:1::1/64 dev br0 nodad"]) + "\n")
        self.make_pods([self.pod(i) for i in range(self.a.pods)] + [f"{self.a.prefix}-x"])

    def start_daemon(self):
        os.makedirs(self.state, mode=0o700, exist_ok=True)
        self.daemon = subprocess.Popen([self.bin, "serve"], env=self.env, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        line = self.daemon.stdout.readline()
        if '"ready"' not in line:
            raise RuntimeError(f"podtap serve did not get ready: {line!r} {self.daemon.stderr.read()[:300]}")
        # Its event lines from then on, read as they come (as a container
        # runtime reads a daemon's log): a full pipe would stop the daemon.
        threading.Thread(target=self.read_events, daemon=True).start()
        self.rss["started, nothing served"] = proc_counters(self.daemon.pid)[2]

    def read_events(self):
        for line in self.daemon.stdout:
            try:
                kind = json.loads(line).get("event", "?")
            except ValueError:
                kind = "unparsed"
            self.events[kind] = self.events.get(kind, 0) + 1

    def attach(self, ns, pid, serve=True):
        args = [self.bin, "attach", "--netns", f"/run/netns/{ns}", "--id", pid, "--mode", "tc"]
        t0 = time.perf_counter_ns()
        r = subprocess.run(args + (["--serve"] if serve else []), env=self.env, capture_output=True, text=True)
        ms = (time.perf_counter_ns() - t0) / 1e6
        if r.returncode != 0:
            raise RuntimeError(f"attach {ns}: {r.stderr.strip()}")
        eth0 = [i for i in json.loads(r.stdout)["interfaces"] if i["name"] == "eth0"][0]
        return ms, eth0

    def attach_all(self):
        def one(i):
            _, eth0 = self.attach(self.pod(i), self.pod(i))
            self.attached[self.pod(i)] = eth0
        self.pool(one, range(self.a.pods))
        self.rss[f"{self.a.pods} attachments served"] = proc_counters(self.daemon.pid)[2]

    # ---- measurements ------------------------------------------------------
    def measure_rest(self):
        time.sleep(self.a.settle)
        c0, s0, _ = proc_counters(self.daemon.pid)
        t0 = time.monotonic()
        time.sleep(self.a.rest)
        c1, s1, rss = proc_counters(self.daemon.pid)
        self.rest = (time.monotonic() - t0, c1 - c0, s1 - s0)
        self.rss[f"after {self.a.rest:.0f} s at rest"] = rss

    def measure_latency(self):
        n = self.a.pods
        picks = sorted({i * n // self.a.samples for i in range(min(self.a.samples, n))})
        for k, i in enumerate(picks):
            ns = self.pod(i)
            eth0 = self.attached[ns]
            mac = eth0.get("guest_mac") or eth0["mac"]
            q = TapQueue(f"/run/netns/{ns}", eth0["tap"]["name"], eth0["tap"].get("multi_queue", False))
            try:
                # the carrier is up from the open on: give the link a moment, as a guest's boot does
                time.sleep(0.05)
                xid = 0x5E000000 + k
                asks = [("DHCPDISCOVER → OFFER", discover(mac, xid), lambda f: is_offer(f, xid)),
                        ("DHCPv6 Solicit → Advertise", solicit6(mac, xid & 0xFFFFFF),
                         lambda f: is_advertise(f, xid & 0xFFFFFF)),
                        ("router solicitation → RA", router_solicitation(mac), lambda f: is_unicast_ra(f, mac))]
                for what, frame, match in asks:
                    ms = q.ask(frame, match)
                    if ms is None:
                        self.unanswered[what] += 1
                    else:
                        self.latency[what].append(ms)
            finally:
                q.close()
        for what, missed in self.unanswered.items():
            if missed:
                problems.append(f"{what}: {missed} of {len(picks)} requests unanswered within 2 s")
                log(problems[-1])
        self.rss[f"after {len(picks)} guests' requests"] = proc_counters(self.daemon.pid)[2]

    def measure_attach(self):
        ns, pid = f"{self.a.prefix}-x", f"{self.a.prefix}-x"
        for r in range(self.a.reps):
            for serve in ((False, True) if r % 2 == 0 else (True, False)):
                ms, eth0 = self.attach(ns, pid, serve)
                self.attach_ms["attach --serve" if serve else "attach"].append(ms)
                d = subprocess.run([self.bin, "detach", "--id", pid], env=self.env, capture_output=True, text=True)
                if d.returncode != 0:
                    problems.append(f"detach of the extra pod: {d.stderr.strip()}")
                self.wait_for_deleter()

    def wait_for_deleter(self, timeout=10.0):
        """Wait until no podtap process but the daemon runs (a detach's
        deleter child); benchlib.wait_idle would wait for the daemon too."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            others = []
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    if os.readlink(f"/proc/{pid}/exe") == self.bin and int(pid) != self.daemon.pid:
                        others.append(pid)
                except OSError:
                    pass
            if not others:
                return
            time.sleep(0.005)
        problems.append(f"a podtap process was still running {timeout:.0f} s after a detach")

    def run(self):
        t0 = time.monotonic()
        self.build()
        self.start_daemon()
        self.attach_all()
        self.build_s = time.monotonic() - t0
        log(f"{self.a.pods} pods attached and served in {self.build_s:.0f} s")
        self.measure_rest()
        self.measure_latency()
        self.measure_attach()

    def cleanup(self):
        if self.attached:
            self.pool(lambda ns: subprocess.run([self.bin, "detach", "--id", ns], env=self.env,
                                                capture_output=True), list(self.attached))
            if self.daemon:
                self.wait_for_deleter(30.0)
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(10)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                problems.append("podtap serve did not stop within 10 s of SIGTERM")
        for ns in reversed(self.netns):
            sh(["ip", "netns", "del", ns], check=False)
        left = [n for n in sh(["ip", "netns", "list"]).stdout.split() if n.startswith(self.a.prefix + "-")]
        if left:
            problems.append(f"netns left: {left[:5]}")
        shutil.rmtree(self.state, ignore_errors=True)

    # ---- report ------------------------------------------------------------
    def report(self):
        a, L = self.a, []
        L.append(f"## The responder at node scale: one `podtap serve`, {a.pods} attachments\n")
        if self.rest:
            secs, cpu, switches = self.rest
            L.append("| at rest, no guest | value |")
            L.append("|---|---|")
            L.append(f"| CPU | {cpu * 1000 / secs:.2f} ms/s ({cpu / secs * 100:.3f} % of one core) |")
            L.append(f"| wakeups (context switches) | {switches / secs:.2f} /s |")
            L.append("")
        L.append("| daemon RSS | KiB |")
        L.append("|---|---|")
        L += [f"| {k} | {v} |" for k, v in self.rss.items()]
        L.append("\n| request → answer (ms) | n | p50 | p99 | max |")
        L.append("|---|---|---|---|---|")
        for what, xs in self.latency.items():
            L.append(f"| {what} | {len(xs)} | {pct(xs, 50):.3f} | {pct(xs, 99):.3f} | {max(xs, default=float('nan')):.3f} |")
        L.append("\n| one more pod, process wall (ms) | n | p50 | p90 |")
        L.append("|---|---|---|---|")
        for what, xs in self.attach_ms.items():
            L.append(f"| `{what}` | {len(xs)} | {pct(xs, 50):.2f} | {pct(xs, 90):.2f} |")
        if self.attach_ms["attach"] and self.attach_ms["attach --serve"]:
            L.append(f"\n`--serve` / plain attach (medians, 95 % CI): "
                     f"{benchlib.ratio_text(self.attach_ms['attach --serve'], self.attach_ms['attach'], 2)}")
        L.append(f"\n**Method.** {a.pods} pod netns, one veth each, on one hub bridge holding both "
                 f"gateways; one `podtap serve` (the --bin binary, `PODTAP_LOG=warn`); every pod attached "
                 f"with `--serve` in tc mode, 4 at a time ({self.build_s:.0f} s in all). At rest: "
                 f"{a.settle:.0f} s to settle, then {a.rest:.0f} s measured from /proc (CPU: utime+stime; "
                 f"wakeups: voluntary+involuntary context switches of every thread). Requests: "
                 f"{len(self.latency['DHCPDISCOVER → OFFER'])} pods spread over the {a.pods}, each TAP "
                 f"opened as a VMM opens it and written as a guest writes, timed in the bench from write "
                 f"to the read of the answer. Attach: {a.reps} pairs on one extra pod, alternating "
                 f"which goes first, each followed by a detach. Machine: {os.cpu_count()} CPUs, "
                 f"{os.uname().release}.")
        if self.events:
            L.append("\nThe daemon's event lines: " + ", ".join(f"{k} {v}" for k, v in sorted(self.events.items())) + ".")
        if problems:
            L.append("\n**Problems:** " + "; ".join(problems))
        return "\n".join(L)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--pods", type=int, default=500)
    p.add_argument("--rest", type=float, default=60.0)
    p.add_argument("--settle", type=float, default=50.0)
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--prefix", default=f"pts{os.getpid()}")
    p.add_argument("--out")
    p.add_argument("--append", action="store_true")
    p.add_argument("--smoke", action="store_true")
    a = p.parse_args()
    if a.smoke:
        a.pods, a.rest, a.settle, a.samples, a.reps = 5, 3.0, 1.0, 5, 3
    if os.geteuid() != 0 or a.pods < 1 or a.samples < 1:
        print("serve_scale.py: needs root, --pods ≥ 1 and --samples ≥ 1", file=sys.stderr)
        return 2
    s = ServeScale(a)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    benchlib.run_then_clean(s.run, s.cleanup, problems, log)
    benchlib.emit(s.report(), a.out, a.append)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
