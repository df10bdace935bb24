"""gilprof beside its peers on one CPython 3.15 target: held and waiting shares per thread,
and what each tool costs in CPU.

    benchmarks/sid-debug-symbols 3.15                                   # once: the truth's symbols
    python benchmarks/peers.py [--seconds 5] [--workload states|loop]   # root; .ci/sid-root

The target is Debian sid's python3.15 (3.15.2, from the root `.ci/sid-root` builds) in its own
PID and mount namespaces, chrooted into that root, as PID 1. Each tool samples the same
target in turn for --seconds:

- gilprof (default states mode), from the host;
- `py-spy record --gil --idle --threads --nonblocking` (100 Hz), from the host: held only
  (a GIL-holding sample per thread; py-spy has no waiting state);
- CPython's own `python3.15 -m profiling.sampling attach -a --mode wall --gecko` (1 kHz),
  from inside the namespace (`nsenter`): it must resolve the target's binary by the path its
  maps give, which from the host it cannot (measured: "Failed to find the PyRuntime section"),
  so it runs as the container's process. Its gecko markers "Has GIL" and "Waiting for GIL"
  give each thread's held and waiting time.

Workloads: `states` (tests/integration/workloads/gil_states.py): held, waiting and idle by
construction (the holder sits in one C call that never drops the GIL, so the spinner and the
main thread wait all the time, the sleeper never wants it): the truth is exact. `loop`
(loop_ingress.py): shares of several points, none a constant. Its truth is the kernel's:
bpftrace uprobes on the target's take_gil/drop_gil (benchmarks/uprobe_truth.py) run through
each tool's run, and each tool is judged against the truth of its own seconds. Debian strips
python3.15; `benchmarks/sid-debug-symbols` installs its symbols from python3.15-dbg.

What each costs the target (`--workload loop`, --cost-rounds, after the shares): the
workload counts the units of Python work its two threads do (loop_ingress.py --progress).
Each tool runs in turn with an unsampled window of the same length after it, rotated one
place per round; a tool's slowdown is the mean rate of the unsampled windows either side
over its own rate, the tool's start-up included (the target pays for it too). Without the
uprobes of the truth: they trap every GIL hand-off and would be a cost of their own.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # uprobe_truth, run by path

import uprobe_truth

from gilprof.sampling.threadstate.namespaces import nspids

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[1]
WORKLOADS = REPO / "tests" / "integration" / "workloads"
ROOT = Path(os.environ.get("GILPROF_SID_ROOT", "/var/cache/gilprof/sid-root"))
APPS = {
    "states": ("gil_states.py", ["/mnt/pid"]),
    "loop": ("loop_ingress.py", ["--seconds", "600", "--progress", "/mnt/progress"]),
}
TRUTH = {
    "states": {
        "holder": (1.0, 0.0),
        "spinner": (0.0, 1.0),
        "MainThread": (0.0, 1.0),
        "sleeper": (0.0, 0.0),
    }
}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _measured(cmd: list[str], **kwargs) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run a tool to completion: its result and the CPU seconds it (and its children) used."""
    before = _children_cpu()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kwargs)
    return result, _children_cpu() - before


def start_target(share: Path, workload: str) -> tuple[subprocess.Popen, int]:
    app, args = APPS[workload]
    shutil.copy(WORKLOADS / app, share / "app.py")
    script = (
        f"mount --bind {share} {ROOT}/mnt && mount -t proc proc {ROOT}/proc && "
        f"exec chroot {ROOT} /usr/bin/python3.15 /mnt/app.py {' '.join(args)}"
    )
    proc = subprocess.Popen(
        ["unshare", "--pid", "--mount", "--fork", "--kill-child", "sh", "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    import psutil

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        kids = psutil.Process(proc.pid).children()
        if kids and kids[0].exe().endswith("python3.15"):
            time.sleep(1.5)  # its threads started and settled
            return proc, kids[0].pid
        time.sleep(0.1)
    proc.kill()
    sys.exit("the target did not start")


GILPROF_ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def gilprof_command(pid: int, seconds: float, out: Path) -> list[str]:
    return [sys.executable, "-m", "gilprof", "attach", "--pid", str(pid), "-d", str(seconds),
            "-q", "-o", str(out)]  # fmt: skip


def pyspy_command(pid: int, seconds: float, out: Path, rate: int = 100) -> list[str]:
    cmd = ["py-spy", "record", "--gil", "--idle", "--threads", "--nonblocking", "-r", str(rate)]
    return [*cmd, "-d", str(int(seconds)), "-f", "raw", "-o", str(out), "-p", str(pid)]


def tachyon_command(pid: int, seconds: float) -> list[str]:
    cmd = ["nsenter", "--target", str(pid), "--pid", "--mount", "--root", "--wd"]
    cmd += ["python3.15", "-m", "profiling.sampling", "attach", "-a", "-d", str(int(seconds))]
    return [*cmd, "--mode", "wall", "--gecko", "-o", "/mnt/tachyon.gecko", "1"]


def by_gilprof(pid: int, seconds: float, out: Path) -> tuple[dict, dict[int, str], float]:
    """Per-thread (held, waiting) by name, each thread's name by its id, gilprof's CPU."""
    run, cpu = _measured(gilprof_command(pid, seconds, out), env=GILPROF_ENV)
    if run.returncode != 0:
        sys.exit(f"gilprof failed: {run.stderr}")
    report = subprocess.run(
        [sys.executable, "-m", "gilprof", "report", str(out), "--format", "json"],
        capture_output=True, text=True, check=True, env=GILPROF_ENV,
    )  # fmt: skip
    data = json.loads(report.stdout)
    threads = data["gil"]["threads"]
    shares = {t["name"]: (t.get("held_share") or 0.0, t.get("wait_share") or 0.0) for t in threads}
    return shares, {t["tid"]: t["name"] for t in threads}, cpu


def by_pyspy(pid: int, seconds: float, out: Path, names: dict[int, str]) -> tuple[dict, float]:
    rate = 100
    run, cpu = _measured(pyspy_command(pid, seconds, out, rate))
    if not out.exists():
        sys.exit(f"py-spy failed: {run.stdout}{run.stderr}")
    held: collections.Counter[str] = collections.Counter()
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        thread = stack.split(";", 1)[0]  # "thread (TID): NAME", the name where it has one
        label, _, name = thread.partition(": ")
        tid = (
            int(label.removeprefix("thread (").rstrip(")")) if label.startswith("thread (") else -1
        )
        thread = name or names.get(tid, label)
        held[thread] += int(count)
    return {name: (n / (rate * seconds), None) for name, n in held.items()}, cpu


def by_tachyon(pid: int, seconds: float, share: Path, names: dict[int, str]) -> tuple[dict, float]:
    run, cpu = _measured(tachyon_command(pid, seconds))
    path = share / "tachyon.gecko"
    if not path.exists():
        sys.exit(f"Tachyon failed: {run.stdout}{run.stderr}")
    data = json.loads(path.read_text())
    strings = data.get("shared", {}).get("stringArray") or []
    shares = {}
    for thread in data["threads"]:
        markers = thread.get("markers", {})
        spans: collections.Counter[str] = collections.Counter()
        for name, start, end in zip(
            markers.get("name", []), markers.get("startTime", []), markers.get("endTime", []),
            strict=False,
        ):  # fmt: skip
            if start is not None and end is not None:
                label = strings[name] if isinstance(name, int) and name < len(strings) else name
                spans[str(label)] += end - start
        ms = 1000 * seconds
        shares[names.get(thread.get("tid"), thread.get("name"))] = (
            spans["Has GIL"] / ms,
            spans["Waiting for GIL"] / ms,
        )
    return shares, cpu


def _progress(share: Path) -> int:
    """The units of Python work the loop workload has done (loop_ingress.py --progress)."""
    try:
        return int((share / "progress").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        sys.exit("the loop workload wrote no progress")


def _rate(share: Path, run: Callable[[], object]) -> float:
    """The target's units of work a second while `run` ran."""
    started, done = time.monotonic(), _progress(share)
    run()
    return (_progress(share) - done) / (time.monotonic() - started)


def target_cost(
    pid: int, share: Path, seconds: float, rounds: int
) -> tuple[dict[str, list[float]], list[float]]:
    """Per tool, its slowdown of the target in each round (the unsampled rate either side
    over its own), and the unsampled windows' rates. A window runs the tool's command only:
    gilprof's report and the parsing of each tool's output come after it."""
    tools: list[tuple[str, list[str], dict[str, str] | None]] = [
        ("gilprof", gilprof_command(pid, seconds, share / "cost.json"), GILPROF_ENV),
        ("py-spy", pyspy_command(pid, seconds, share / "cost.txt"), None),
        ("Tachyon", tachyon_command(pid, seconds), None),
    ]
    slowdowns: dict[str, list[float]] = {name: [] for name, _, _ in tools}
    unsampled = [_rate(share, lambda: time.sleep(seconds))]
    for round_ in range(rounds):
        turn = round_ % len(tools)
        for name, cmd, env in tools[turn:] + tools[:turn]:
            rate = _rate(
                share, functools.partial(subprocess.run, cmd, capture_output=True, env=env)
            )
            unsampled.append(_rate(share, lambda: time.sleep(seconds)))
            slowdowns[name].append((unsampled[-2] + unsampled[-1]) / 2 / rate)
    return slowdowns, unsampled


def _print_cost(slowdowns: dict[str, list[float]], unsampled: list[float]) -> None:
    low, high = min(unsampled), max(unsampled)
    print(
        f"what each costs the target: its work rate unsampled over sampled, {len(unsampled)} "
        f"unsampled windows at {low:.0f}-{high:.0f} units/s ({100 * (high / low - 1):.1f}% apart)"
    )
    for name, values in slowdowns.items():
        mean = sum(values) / len(values)
        each = ", ".join(f"{v:.3f}" for v in values)
        print(f"  {name:8} {mean:.3f}x  (rounds: {each})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workload", choices=sorted(APPS), default="states")
    parser.add_argument(
        "--cost-rounds",
        type=int,
        default=3,
        help="loop workload: rounds of the cost pass (0: none)",
    )
    args = parser.parse_args()
    if not (ROOT / ".gilprof-root-complete").exists():
        sys.exit(f"no sid root at {ROOT}: run .ci/sid-root first")
    with tempfile.TemporaryDirectory() as tmp:
        share = Path(tmp)
        target, pid = start_target(share, args.workload)
        try:
            if args.workload not in TRUTH:
                uprobe_truth.gil_binary(pid)  # the symbols are there, before any tool runs
            # py-spy names threads by id (the target's own, as gilprof's profile does)
            (ours, names, our_cpu), truth_g = _judged(
                pid, args.workload, lambda: by_gilprof(pid, args.seconds, share / "g.json")
            )
            (spy, spy_cpu), truth_s = _judged(
                pid, args.workload, lambda: by_pyspy(pid, args.seconds, share / "s.txt", names)
            )
            (tachyon, tachyon_cpu), truth_t = _judged(
                pid, args.workload, lambda: by_tachyon(pid, args.seconds, share, names)
            )
            cost = None
            if args.workload == "loop" and args.cost_rounds > 0:
                cost = target_cost(pid, share, args.seconds, args.cost_rounds)
        except uprobe_truth.TruthError as exc:
            sys.exit(f"no exact truth: {exc} (benchmarks/sid-debug-symbols 3.15 installs them)")
        finally:
            target.kill()
            target.wait()
    truths = [_named(t, names) for t in (truth_g, truth_s, truth_t)]
    _print(args, (ours, spy, tachyon), truths, (our_cpu, spy_cpu, tachyon_cpu))
    if cost is not None:
        _print_cost(*cost)


# the target's thread id -> (held, waiting low, waiting high) shares: the waiting band's
# low end leaves out a waiter runnable off every CPU in take_gil's own code, which no
# reader of /proc can tell from native code (docs/accuracy.md, issue 19)
Truth = dict[int, tuple[float, float, float]]


def _judged(pid: int, workload: str, run: Callable[[], T]) -> tuple[T, Truth | None]:
    """`run`'s result and the kernel's truth over its seconds, by the target's own thread
    ids (None for a workload whose truth is by construction)."""
    if workload in TRUTH:
        return run(), None
    tasks = (int(task) for task in os.listdir(f"/proc/{pid}/task"))
    inner = {host: ids[-1] for host in tasks if (ids := nspids(f"/proc/{pid}/task/{host}/status"))}
    trace = uprobe_truth.start_trace(pid)  # with the scheduler's events where it can
    try:
        t0 = time.monotonic()
        result = run()
        t1 = time.monotonic()
    finally:
        trace.stop()
    truth = trace.truth(t0, t1, tids=inner)
    if truth.lost:
        sys.exit(f"bpftrace lost {truth.lost} events: the truth is incomplete")
    out = {}
    for tid, thread in truth.threads.items():
        if tid in inner:
            waiting = truth.waiting_share(tid)
            runnable = (thread.waiting_runnable_s or 0.0) / truth.seconds
            out[inner[tid]] = (truth.held_share(tid), waiting - runnable, waiting)
    return result, out


def _named(truth: Truth | None, names: dict[int, str]) -> dict[str, tuple] | None:
    return None if truth is None else {names.get(t, str(t)): v for t, v in truth.items()}


def _error(got: tuple, truth: tuple | None) -> list[float]:
    """|tool - truth| for held, and for waiting the distance to the truth's band."""
    if truth is None:
        return []
    held, low, high = truth if len(truth) == 3 else (truth[0], truth[1], truth[1])
    out = [] if got[0] is None else [abs(got[0] - held)]
    if got[1] is not None:
        out.append(max(0.0, low - got[1], got[1] - high))
    return out


def _print(
    args: argparse.Namespace,
    tools: tuple[dict, dict, dict],
    truths: list[dict[str, tuple] | None],
    cpu: tuple[float, float, float],
) -> None:
    constructed = TRUTH.get(args.workload)

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}"

    def shown(v: tuple | None) -> str:
        if v is None:
            return "-/-"
        band = pct(v[1]) if len(v) == 2 or abs(v[2] - v[1]) < 5e-4 else f"{pct(v[1])}-{pct(v[2])}"
        return f"{pct(v[0])}/{band}"

    print(f"workload {args.workload}, {args.seconds:g} s per tool, Debian python3.15 3.15.2")
    truth_word = "by construction" if constructed else "uprobes, each tool's own seconds"
    print(f"held/waiting, % of wall, truth -> tool; truth: {truth_word}")
    print("(a waiting band lo-hi: a waiter runnable off a CPU inside take_gil may read native)")
    print(
        f"{'thread':12} " + "  ".join(f"{t:>27}" for t in ("gilprof", "py-spy (held)", "Tachyon"))
    )
    names = set().union(*tools, *(t for t in truths if t), constructed or {})
    worst = [0.0, 0.0, 0.0]
    for name in sorted(names, key=str):
        cells = []
        for k, tool in enumerate(tools):
            truth = constructed.get(name) if constructed else (truths[k] or {}).get(name)
            got = tool.get(name, (None, None))
            worst[k] = max([worst[k], *_error(got, truth)])
            cells.append(f"{shown(truth) + ' -> ' + shown(got):>27}")
        print(f"{name!s:12} " + "  ".join(cells))
    print("largest |err| (to the band), points: " + ", ".join(
        f"{tool} {100 * w:.1f}" for tool, w in zip(("gilprof", "py-spy", "Tachyon"), worst, strict=True)
    ))  # fmt: skip
    per_s = [f"{100 * c / args.seconds:.1f}%" for c in cpu]
    print(f"tool CPU (of a core, start-up included): gilprof {per_s[0]}, py-spy {per_s[1]}, ")
    print(f"  Tachyon {per_s[2]}")


if __name__ == "__main__":
    main()
