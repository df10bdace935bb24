"""Accuracy targets: workloads that measure their own GIL ground truth.

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
  GIL; the hand-off share bounds that ambiguity and is reported with every result. Where X
  (or Y) was asleep before its sleep's deadline, that part of the gap is surely not its own,
  so threads that take turns through sleeps (`duo`) have exact truths.

GIL-releasing calls ("naps") are bracketed by timestamps: (start, native_end, end). For
time.sleep the native part ends at the requested deadline (CPython sleeps to an absolute
CLOCK_MONOTONIC deadline; timer slack is set to 1 ns where prctl allows), so [native_end,
end] is the wait to take the GIL back, which survives load. For zlib.compress the native end
is estimated as start + thread CPU time of the call, which is only right with a free core;
under load or sampler pauses the native part runs longer than its CPU time, so the truth also
bounds it from above: the GIL comes back by a forced switch, which the spinner makes one
switch interval (recorded) or more after the waiter asked, so the call's native part ended
at least that long before the spinner's last run ends (accuracy_truth.py).

Stdlib only: targets run on every interpreter under test without gilprof installed. The arithmetic
that turns a record into shares over the sampled interval is in accuracy_truth.py.
"""

from __future__ import annotations

import argparse
import ctypes
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
DUO_SHARES = {"duo_a": 0.15, "duo_b": 0.10}
WATCHED = (
    *PLANTED_SHARES,
    *DUO_SHARES,
    "burst_fn",
)  # functions whose share of wall time is recorded
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
    native_id: int = 0  # Linux thread id: what the uprobe truth (uprobe_truth.py) is keyed by

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "runs": self.runs,
            "naps": self.naps,
            "nap_kind": self.nap_kind,
            "calls": self.calls,
            "checkpoints": self.checkpoints,
            "native_id": self.native_id,
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
        # The clock reads bracket the call alone: thread_time() is a system call (no vDSO),
        # made with the GIL held, and on a loaded machine the thread is often preempted on
        # its way back from it; inside the bracket that time read as a GIL wait (13% of
        # ticks beside 2 hogs, accuracy_ticks.py).
        c0 = cpu()
        t0 = now()
        zlib.compress(data[:ZLIB_BLOCK], 6)
        t1 = now()
        c1 = cpu()
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


def duo_a(rec: Recorder, until: float) -> None:
    compute(rec, until)


def duo_b(rec: Recorder, until: float) -> None:
    compute(rec, until)


def _duo(rec: Recorder, function: Callable[[Recorder, float], None], offset: float) -> None:
    """`function` for DUO_SHARES of each PLANT_PERIOD_S, starting `offset` into the period,
    asleep otherwise. Two of these half a period apart hold the GIL in turn without
    contending, so utilization (some thread holds it) is the sum of two exact truths, and
    a sampler must attribute each tick to the right thread to get both held shares."""
    rec.nap_kind = "idle"
    now = time.perf_counter
    share = DUO_SHARES[function.__name__]
    calls = rec.calls.setdefault(function.__name__, [])
    start = now() + offset
    while not STOP[0]:
        t0 = now()
        if start > t0:
            time.sleep(start - t0)
            t1 = now()
            rec.naps.append((t0, t1, t1))
            t0 = t1
        function(rec, t0 + share * PLANT_PERIOD_S)
        calls.append((t0, now()))
        start += PLANT_PERIOD_S
        if start < now():
            start = now()  # fell behind (a loaded machine): start the next period now


WORKLOADS: dict[str, list[tuple[str, Callable[[Recorder], None]]]] = {
    "cpu1": [("spin-0", spinner)],
    "spin2": [("spin-0", spinner), ("spin-1", spinner)],
    "spin4": [(f"spin-{i}", spinner) for i in range(4)],
    "sleeper": [("spin-0", spinner), ("sleeper", sleeper)],
    "zlib": [("spin-0", spinner), ("zlib", compressor)],
    "burst": [("spin-0", spinner), ("burst", burster)],
    "planted": [("planted-loop", planted_loop)],
    "duo": [
        ("duo-a", lambda rec: _duo(rec, duo_a, 0.0)),
        ("duo-b", lambda rec: _duo(rec, duo_b, PLANT_PERIOD_S / 2)),
    ],
}
DESCRIPTIONS = {
    "cpu1": "one CPU-bound thread",
    "spin2": "two threads contending for the GIL",
    "spin4": "four threads contending for the GIL",
    "sleeper": "time.sleep releases the GIL while another thread computes",
    "zlib": "zlib.compress releases the GIL while another thread computes (needs 2 cores)",
    "burst": "burst_fn holds the GIL 0.3 ms after each 4 ms sleep, beside a spinner",
    "planted": "planted functions at 20%, 5%, 1% of wall time, one Python thread",
    "duo": "two threads hold the GIL in turn (15% and 10% of wall), never at once",
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
    for thread, rec in zip(threads, recorders, strict=True):
        thread.start()
        rec.native_id = thread.native_id or 0
    print(f"ready {os.getpid()}", flush=True)
    # Idle in select until the runner closes stdin: no wake-ups that would take the GIL.
    select.select([sys.stdin], [], [], max_seconds)
    STOP[0] = True
    for thread in threads:
        thread.join()
    return {
        "workload": name,
        "python": sys.version.split()[0],
        "switch_interval": sys.getswitchinterval(),
        "started": started,
        "ended": time.perf_counter(),
        "threads": [r.to_dict() for r in recorders],
    }


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
