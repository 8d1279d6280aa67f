"""Small pieces the benchmark scripts in benches/ share (not a benchmark itself).

Imported as bench.py is by podstart.py: the script puts its own folder on
sys.path (`sys.path.insert(0, HERE)`) and then `import benchlib`.
"""
import os
import random
import signal
import subprocess
import time


def sh(args, input=None, check=True):
    """Run ARGS (stdin INPUT), capturing text; with CHECK, a failure raises."""
    r = subprocess.run(args, input=input, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def pct(xs, q):
    """Nearest-rank percentile Q of XS (nan when empty)."""
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = max(0, min(len(xs) - 1, -(-len(xs) * q // 100) - 1))
    return xs[int(k)]


def _batch(ns, lines):
    r = subprocess.run(["ip", "-n", ns, "-batch", "-"], input="\n".join(lines) + "\n",
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ip -n {ns} -batch: {r.stderr.strip()}")


def wire_pod(pod, peer, n, default_route=False):
    """The pod fixture of bench.py, in two netns the caller made: n veths,
    eth0.. in POD (198.18.I.2/24, 2001:db8:I::2/64) and v0.. in PEER
    (198.18.I.1/24), all up; with default_route, POD's default route goes
    through v0."""
    lines = []
    for i in range(n):
        lines += [f"link add v{i} type veth peer name eth{i} netns {pod}",
                  f"link set v{i} up", f"address add 198.18.{i}.1/24 dev v{i}"]
    _batch(peer, lines)
    lines = []
    for i in range(n):
        lines += [f"link set eth{i} up", f"address add 198.18.{i}.2/24 dev eth{i}",
                  f"address add 2001:db8:{i:x}::2/64 dev eth{i} nodad"]
    if default_route:
        lines.append("route add default via 198.18.0.1 dev eth0")
    _batch(pod, lines)


def make_pod(ns_add, pod, peer, n):
    """Make the netns POD and PEER with the caller's NS_ADD (which records them
    for its clean-up), then wire_pod with the default route; returns POD."""
    ns_add(pod)
    ns_add(peer)
    wire_pod(pod, peer, n, default_route=True)
    return pod


def running(exes):
    """Whether a process other than this one runs one of the executables EXES
    (resolved paths, as /proc/PID/exe reads)."""
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != me:
            try:
                if os.readlink(f"/proc/{pid}/exe") in exes:
                    return True
            except OSError:
                pass
    return False


def wait_idle(exes, timeout=30.0, poll=0.005):
    """Wait until no process runs one of EXES (paths, resolved here): a detach
    returns before its deleter child ends. False if one still runs
    after TIMEOUT seconds (None: wait for ever)."""
    exes = {os.path.realpath(p) for p in exes}
    end = None if timeout is None else time.monotonic() + timeout
    while end is None or time.monotonic() < end:
        if not running(exes):
            return True
        time.sleep(poll)
    return False


def ignore_signals():
    """Call first thing in a clean-up path: a second Ctrl-C or SIGTERM must
    not abandon the clean-up half done (netns, TAPs, state dir left behind).
    The handlers stay ignored: what follows a clean-up is only the report."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def run_then_clean(run, cleanup, problems, log):
    """run(), then cleanup() on every path, with SIGINT and SIGTERM ignored
    from its start. An Exception is a harness error: noted in PROBLEMS and
    logged, and the caller goes on to its report; KeyboardInterrupt and
    SystemExit (a signal handler's) go on up once cleanup() is done."""
    try:
        run()
    except Exception as e:  # a harness error is a failure too
        problems.append(f"harness error: {type(e).__name__}: {e}")
        log(problems[-1])
    finally:
        ignore_signals()
        cleanup()


def emit(text, out, append):
    """The report's Markdown: to the file OUT (appended or overwritten), else stdout."""
    if out:
        with open(out, "a" if append else "w") as f:
            f.write(text + "\n")
    else:
        print(text)


def _median(xs):
    s = sorted(xs)
    n = len(s)
    return (s[n // 2] + s[(n - 1) // 2]) / 2


def ratio_ci(a, b, resamples=2000, seed=31):
    """The ratio of the medians of the samples A and B, with its 95% interval:
    a percentile bootstrap, each list resampled on its own (with replacement,
    as many draws as it has samples) RESAMPLES times, seeded so that the same
    samples give the same interval. (ratio, low, high); NaNs without samples."""
    nan = float("nan")
    if not a or not b or _median(b) == 0:
        return nan, nan, nan
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        mb = _median(rng.choices(b, k=len(b)))
        if mb:
            draws.append(_median(rng.choices(a, k=len(a))) / mb)
    draws.sort()
    low = draws[int(0.025 * (len(draws) - 1))]
    high = draws[int(0.975 * (len(draws) - 1))]
    return _median(a) / _median(b), low, high


def ratio_text(a, b, digits=2):
    """`1.44× (1.09–1.79)`: ratio_ci's ratio and 95% interval, or `–`."""
    r, low, high = ratio_ci(a, b)
    if r != r:
        return "–"
    return f"{r:.{digits}f}× ({low:.{digits}f}–{high:.{digits}f})"
