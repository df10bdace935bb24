"""Accuracy targets: workloads that measure their own GIL ground truth, and the truth arithmetic.

Run as a target: `python workloads.py NAME [--max-seconds S]`. The target prints `ready PID`
once its threads run, works until its stdin closes (or --max-seconds pass), then prints one
JSON record of what each thread did, on the CLOCK_MONOTONIC clock that `time.perf_counter`
and `time.monotonic` share on Linux, so the runner can cut out the sampled interval.

Why not thread CPU time: `thread_time / wall` is a thread's GIL-held share only while it has a
core to itself. On an oversubscribed machine the OS preempts a thread that holds the GIL, and
it still holds it (CPU time stops, held time does not); a sampler that pauses the target
(py-spy blocking mode) adds wall time with no CPU time too. So every Python stretch here is
*timestamped* instead: a compute loop reads the clock every ~1 us and keeps "runs", maximal
stretches whose consecutive readings are less than GAP_S apart. Only the GIL holder executes
bytecode, so merging every thread's runs on one time line gives who held the GIL:

- a run of thread X: X held the GIL;
- a gap between two runs of X with no other thread's run and no GIL-releasing call of X in
  between (X was preempted by the OS, or paused by the sampler): X still held the GIL;
- a gap between a run of X and a run of Y: the GIL changed hands; counted as held by nobody
  ("hand-off"). That is what CPython does unless X was preempted just before it dropped the
  GIL; the hand-off share bounds that ambiguity and is reported with every result.

GIL-releasing calls ("naps") are bracketed by timestamps: (start, native_end, end). For
time.sleep the native part ends at the requested deadline (CPython sleeps to an absolute
CLOCK_MONOTONIC deadline; timer slack is set to 1 ns where prctl allows), so [native_end,
end] is the wait to take the GIL back, which survives load. For zlib.compress the native end
is estimated as start + thread CPU time of the call, which is only right with a free core.

Stdlib only: targets run on every interpreter under test without gilprof installed.
"""

from __future__ import annotations

import argparse
import bisect
import ctypes
import itertools
import json
import os
import select
import sys
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

GAP_S = 20e-6  # a compute iteration takes ~1 us: a longer silence means the thread stopped
CHECKPOINT_S = 0.05  # progress/CPU-time checkpoints, for the pause overhead and the CPU truth
PLANT_PERIOD_S = 0.05
PLANTED_SHARES = {"planted_20pct": 0.20, "planted_5pct": 0.05, "planted_1pct": 0.01}
WATCHED = (*PLANTED_SHARES, "burst_fn")  # functions whose share of wall time is recorded
SLEEPER_NAP_S = 0.004  # GIL released in time.sleep
SLEEPER_WORK_S = 0.0003  # Python work between naps (well under the 5 ms switch interval)
ZLIB_BLOCK = 1 << 18
BURST_NAP_S = 0.004  # burst workload: asleep, then
BURST_WORK_S = 0.0003  # burst_fn: 0.3 ms of Python (the measured miss: 0.3% vs 3%)

Interval = tuple[float, float]


@dataclass
class Recorder:
    """What one thread did; filled by the thread itself while it holds the GIL."""

    name: str
    runs: list[Interval] = field(default_factory=list)
    naps: list[tuple[float, float, float]] = field(default_factory=list)  # start, native end, end
    nap_kind: str = ""  # "idle" (sleep) or "native" (compiled code without the GIL)
    calls: dict[str, list[Interval]] = field(default_factory=dict)  # planted function -> calls
    checkpoints: list[tuple[float, int, float]] = field(default_factory=list)  # t, iterations, cpu
    iterations: int = 0
    next_checkpoint: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "runs": self.runs,
            "naps": self.naps,
            "nap_kind": self.nap_kind,
            "calls": self.calls,
            "checkpoints": self.checkpoints,
        }


STOP = [False]  # a list, not an Event: the hot loop must not call a Python method to check it


def compute(rec: Recorder, until: float) -> None:
    """Pure-Python work until `until` (or STOP), timestamping every iteration into runs."""
    now, cpu = time.perf_counter, time.thread_time
    runs, marks = rec.runs, rec.checkpoints
    start = last = now()
    count = rec.iterations
    mark = rec.next_checkpoint
    total = 0
    while not STOP[0]:
        t = now()
        if t - last > GAP_S:
            runs.append((start, last))
            start = t
        last = t
        if t >= mark:
            marks.append((t, count, cpu()))
            mark = t + CHECKPOINT_S
        if t >= until:
            break
        for i in range(16):
            total += i * i % 7
        count += 1
    runs.append((start, last))
    rec.iterations, rec.next_checkpoint = count, mark


def spinner(rec: Recorder) -> None:
    compute(rec, float("inf"))


def sleeper(rec: Recorder) -> None:
    rec.nap_kind = "idle"
    now = time.perf_counter
    while not STOP[0]:
        compute(rec, now() + SLEEPER_WORK_S)
        t0 = now()
        time.sleep(SLEEPER_NAP_S)
        rec.naps.append((t0, t0 + SLEEPER_NAP_S, now()))


def burst_fn(rec: Recorder, until: float) -> None:
    compute(rec, until)


def burster(rec: Recorder) -> None:
    """burst_fn for BURST_WORK_S after each BURST_NAP_S sleep: a request-ingress thread. The
    GIL comes back after the sleep by a forced switch from the spinner, and the burst ends
    before the spinner may ask for it back (5 ms switch interval), so each burst is one
    uninterrupted hold shorter than a millisecond: the case a late-waking sampler misses."""
    rec.nap_kind = "idle"
    now = time.perf_counter
    calls = rec.calls.setdefault("burst_fn", [])
    while not STOP[0]:
        t0 = now()
        burst_fn(rec, t0 + BURST_WORK_S)
        t1 = now()
        calls.append((t0, t1))
        time.sleep(BURST_NAP_S)
        rec.naps.append((t1, t1 + BURST_NAP_S, now()))


def compressor(rec: Recorder) -> None:
    rec.nap_kind = "native"
    now, cpu = time.perf_counter, time.thread_time
    data = (b"gilprof accuracy " * 64 + os.urandom(256)) * (ZLIB_BLOCK // 1344 + 1)
    while not STOP[0]:
        compute(rec, now() + SLEEPER_WORK_S)
        t0, c0 = now(), cpu()
        zlib.compress(data[:ZLIB_BLOCK], 6)
        c1, t1 = cpu(), now()
        rec.naps.append((t0, t0 + (c1 - c0), t1))


def planted_20pct(rec: Recorder, until: float) -> None:
    compute(rec, until)


def planted_5pct(rec: Recorder, until: float) -> None:
    compute(rec, until)


def planted_1pct(rec: Recorder, until: float) -> None:
    compute(rec, until)


def planted_loop(rec: Recorder) -> None:
    """Each period: the planted functions for their share of wall time, asleep for the rest.

    They are timed by the clock, not by work, so their shares hold on a loaded machine.
    """
    rec.nap_kind = "idle"
    now = time.perf_counter
    functions: list[tuple[Callable[[Recorder, float], None], float]] = [
        (planted_20pct, PLANTED_SHARES["planted_20pct"]),
        (planted_5pct, PLANTED_SHARES["planted_5pct"]),
        (planted_1pct, PLANTED_SHARES["planted_1pct"]),
    ]
    for function, _ in functions:
        rec.calls[function.__name__] = []
    period_start = now()
    while not STOP[0]:
        for function, share in functions:
            t0 = now()
            function(rec, t0 + share * PLANT_PERIOD_S)
            rec.calls[function.__name__].append((t0, now()))
        t0 = now()
        period_start += PLANT_PERIOD_S
        if period_start < t0:
            period_start = t0  # fell behind (a loaded machine): start the next period now
        time.sleep(period_start - t0)
        t1 = now()
        rec.naps.append((t0, t1, t1))


WORKLOADS: dict[str, list[tuple[str, Callable[[Recorder], None]]]] = {
    "cpu1": [("spin-0", spinner)],
    "spin2": [("spin-0", spinner), ("spin-1", spinner)],
    "spin4": [(f"spin-{i}", spinner) for i in range(4)],
    "sleeper": [("spin-0", spinner), ("sleeper", sleeper)],
    "zlib": [("spin-0", spinner), ("zlib", compressor)],
    "burst": [("spin-0", spinner), ("burst", burster)],
    "planted": [("planted-loop", planted_loop)],
}
DESCRIPTIONS = {
    "cpu1": "one CPU-bound thread",
    "spin2": "two threads contending for the GIL",
    "spin4": "four threads contending for the GIL",
    "sleeper": "time.sleep releases the GIL while another thread computes",
    "zlib": "zlib.compress releases the GIL while another thread computes (needs 2 cores)",
    "burst": "burst_fn holds the GIL 0.3 ms after each 4 ms sleep, beside a spinner",
    "planted": "planted functions at 20%, 5%, 1% of wall time, one Python thread",
}


def _tight_timer_slack() -> None:
    """Wake from sleep at the deadline, not up to 50 us later (Linux default slack)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK = 29; threads inherit it
    except (OSError, AttributeError):
        pass


def run_target(name: str, max_seconds: float) -> dict[str, Any]:
    _tight_timer_slack()
    recorders = [Recorder(thread) for thread, _ in WORKLOADS[name]]
    threads = [
        threading.Thread(target=body, args=(rec,), name=rec.name, daemon=True)
        for rec, (_, body) in zip(recorders, WORKLOADS[name], strict=True)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    print(f"ready {os.getpid()}", flush=True)
    # Idle in select until the runner closes stdin: no wake-ups that would take the GIL.
    select.select([sys.stdin], [], [], max_seconds)
    STOP[0] = True
    for thread in threads:
        thread.join()
    return {
        "workload": name,
        "python": sys.version.split()[0],
        "started": started,
        "ended": time.perf_counter(),
        "threads": [r.to_dict() for r in recorders],
    }


# -- truth over an interval -----------------------------------------------------------------


def _clip(intervals: Sequence[Interval], windows: Sequence[Interval]) -> float:
    """Seconds of `intervals` that fall inside `windows` (both sorted or not)."""
    total = 0.0
    for a, b in windows:
        for s, e in intervals:
            lo, hi = max(s, a), min(e, b)
            if hi > lo:
                total += hi - lo
    return total


def _covered(point_a: float, point_b: float, naps: list[Interval], starts: list[float]) -> bool:
    """Whether any nap of the thread overlaps (point_a, point_b)."""
    i = bisect.bisect_left(starts, point_b)
    return any(naps[j][1] > point_a for j in range(max(0, i - 2), i))


@dataclass(frozen=True)
class ThreadTruth:
    name: str
    held: float  # GIL hand-offs counted as held by nobody
    handoff_before: float  # hand-offs that end in a run of this thread
    handoff_after: float  # hand-offs that start after a run of this thread
    wait: float | None  # spinners: 1 - held; nappers: end of the native part to the GIL back
    idle: float
    native: float
    cpu: float | None  # thread CPU time / wall, from checkpoints (None without them)


@dataclass(frozen=True)
class Truth:
    seconds: float
    utilization: float  # some thread held the GIL (hand-offs excluded)
    handoff: float  # the GIL changed hands: held by nobody, or by either side if preempted
    threads: dict[str, ThreadTruth]
    functions: dict[str, float]  # planted function -> share of wall
    blame: dict[tuple[str, str], float]  # (waiter, holder) -> share of wall; spinner waiters


def _checkpoint_sums(
    marks: Sequence[Sequence[float]], windows: Sequence[Interval]
) -> tuple[float, float, float]:
    """(CPU seconds, iterations, seconds) inside `windows`, pro rata between checkpoints."""
    cpu = iters = seconds = 0.0
    for (t0, n0, c0), (t1, n1, c1) in itertools.pairwise(marks):
        inside = _clip([(t0, t1)], windows)
        if inside <= 0 or t1 <= t0:
            continue
        weight = inside / (t1 - t0)
        cpu += (c1 - c0) * weight
        iters += (n1 - n0) * weight
        seconds += inside
    return cpu, iters, seconds


def iteration_rate(record: dict[str, Any], windows: Sequence[Interval]) -> float | None:
    """Compute-loop iterations per second of all threads together, inside `windows`."""
    sums = [_checkpoint_sums(t["checkpoints"], windows) for t in record["threads"]]
    seconds = max((s for _, _, s in sums), default=0.0)
    return sum(i for _, i, _ in sums) / seconds if seconds > 0 else None


def truth_over(record: dict[str, Any], windows: Sequence[Interval]) -> Truth:
    """Ground-truth shares over the union of `windows` (perf_counter seconds)."""
    windows = sorted(windows)
    wall = sum(b - a for a, b in windows)
    if wall <= 0:
        raise ValueError("empty interval")
    threads = {t["name"]: t for t in record["threads"]}
    timeline = sorted((s, e, t["name"]) for t in threads.values() for s, e in t["runs"])
    naps = {name: sorted((s, e) for s, _, e in t["naps"]) for name, t in threads.items()}
    nap_starts = {name: [s for s, _ in items] for name, items in naps.items()}
    held: dict[str, list[Interval]] = {name: [] for name in threads}
    before: dict[str, list[Interval]] = {name: [] for name in threads}
    after: dict[str, list[Interval]] = {name: [] for name in threads}
    for (s0, e0, x), (s1, _e1, y) in itertools.pairwise(timeline):
        held[x].append((s0, e0))
        if s1 <= e0:
            continue
        if x != y:
            after[x].append((e0, s1))
            before[y].append((e0, s1))
        elif not _covered(e0, s1, naps[x], nap_starts[x]):
            held[x].append((e0, s1))  # preempted or paused while holding the GIL
    if timeline:
        held[timeline[-1][2]].append(timeline[-1][:2])
    out: dict[str, ThreadTruth] = {}
    for name, t in threads.items():
        share = _clip(held[name], windows) / wall
        released = _clip([(s, n) for s, n, _ in t["naps"]], windows) / wall
        nap_wait = _clip([(n, e) for _, n, e in t["naps"]], windows) / wall
        cpu, _, seconds = _checkpoint_sums(t["checkpoints"], windows)
        out[name] = ThreadTruth(
            name,
            share,
            _clip(before[name], windows) / wall,
            _clip(after[name], windows) / wall,
            nap_wait if t["naps"] else 1.0 - share,
            released if t["nap_kind"] == "idle" else 0.0,
            released if t["nap_kind"] == "native" else 0.0,
            cpu / seconds if seconds > 0 else None,
        )
    functions = {
        fn: _clip(calls, windows) / wall
        for t in threads.values()
        for fn, calls in t["calls"].items()
    }
    spinners = [name for name, t in threads.items() if not t["naps"]]
    blame = {(w, h): out[h].held for w in spinners for h in out if h != w}
    return Truth(
        wall,
        sum(th.held for th in out.values()),
        sum(th.handoff_after for th in out.values()),
        out,
        functions,
        blame,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("--max-seconds", type=float, default=600.0)
    args = parser.parse_args(argv)
    record = run_target(args.workload, args.max_seconds)
    json.dump(record, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
