"""Ground truth over the sampled interval, from what a `workloads.py` target recorded.

The rules (runs, gaps, hand-offs, naps) are explained in workloads.py's docstring; this is
their arithmetic, kept apart because the target itself needs only the stdlib and its loops.
"""

from __future__ import annotations

import bisect
import itertools
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# gil_truth_events lives one folder up (benchmarks/), whoever imports this module
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gil_truth_events import intersection

Interval = tuple[float, float]


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


def _outside(a: float, b: float, sleeps: list[Interval], starts: list[float]) -> list[Interval]:
    """The parts of (a, b) outside the thread's `sleeps` (sorted, disjoint)."""
    out: list[Interval] = []
    i = max(0, bisect.bisect_left(starts, a) - 1)
    while i < len(sleeps) and sleeps[i][0] < b:
        s, e = sleeps[i]
        if e > a:
            if s > a:
                out.append((a, s))
            a = max(a, e)
        i += 1
    if b > a:
        out.append((a, b))
    return out


def _merged(intervals: list[Interval]) -> list[Interval]:
    """`intervals` merged where they overlap (sorted, disjoint)."""
    merged: list[Interval] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


@dataclass(frozen=True)
class ThreadTruth:
    name: str
    held: float  # GIL hand-offs counted as held by nobody
    handoff_before: float  # hand-offs that end in a run of this thread
    handoff_after: float  # hand-offs that start after a run of this thread
    wait: float | None  # spinners: 1 - held; nappers: end of the native part to the GIL back
    idle: float
    native: float  # from the CPU time of each native call: a lower bound without a free core
    native_hi: float  # upper bound: each call's native part ends a switch interval or more
    # before the other thread drops the GIL to it (see _native_ends)
    cpu: float | None  # thread CPU time / wall, from checkpoints (None without them)


@dataclass(frozen=True)
class Truth:
    seconds: float
    utilization: float  # some thread held the GIL (hand-offs excluded)
    handoff: float  # the GIL changed hands: held by nobody, or by either side if preempted
    threads: dict[str, ThreadTruth]
    # watched function -> GIL held by its thread inside it, without and with the hand-offs
    # (shares of wall). With one Python thread that is the wall time inside it; with several,
    # a thread can be inside its function while another holds the GIL (a forced switch when
    # two timed threads overlap on a loaded machine).
    functions: dict[str, tuple[float, float]]
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


def _native_ends(
    naps: Sequence[Sequence[float]], other_ends: list[float], switch_s: float
) -> list[Interval]:
    """The latest possible native part of each GIL-releasing call (start, native end, end).

    After the native code the thread waits for the GIL; the only other Python thread (a
    spinner) never releases it unasked, so it is dropped by a forced switch, which the waiter
    requests `switch_s` after it starts waiting and the holder makes at its next check, later
    still if it is preempted. So the native part ended no later than the holder's last run
    end before the call returned, minus `switch_s` (and never before the CPU-time estimate).
    Where no other thread ran during the call, the GIL was free: the whole call is the bound.
    """
    out: list[Interval] = []
    for start, native_end, end in naps:
        i = bisect.bisect_right(other_ends, end) - 1
        drop = other_ends[i] if i >= 0 and other_ends[i] > start else None
        latest = end if drop is None else min(end, drop - switch_s)
        out.append((start, max(native_end, latest)))
    return out


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
    # Stretches in which a thread surely did not hold the GIL: asleep before its deadline
    # (a sleep cannot return before it, and the clock was read before the GIL was released).
    sleeps = {
        name: sorted((s, n) for s, n, _ in t["naps"]) if t["nap_kind"] == "idle" else []
        for name, t in threads.items()
    }
    sleep_starts = {name: [s for s, _ in items] for name, items in sleeps.items()}
    held: dict[str, list[Interval]] = {name: [] for name in threads}
    before: dict[str, list[Interval]] = {name: [] for name in threads}
    after: dict[str, list[Interval]] = {name: [] for name in threads}
    handoffs: list[Interval] = []  # held by X or Y, or by nobody
    for (s0, e0, x), (s1, _e1, y) in itertools.pairwise(timeline):
        held[x].append((s0, e0))
        if s1 <= e0:
            continue
        if x != y:
            # A gap between runs of two threads could belong to either, except where that
            # thread slept: two threads that take turns through sleeps leave no ambiguity.
            mine = _outside(e0, s1, sleeps[x], sleep_starts[x])
            theirs = _outside(e0, s1, sleeps[y], sleep_starts[y])
            after[x].extend(mine)
            before[y].extend(theirs)
            handoffs.extend(mine + theirs)
        elif not _covered(e0, s1, naps[x], nap_starts[x]):
            held[x].append((e0, s1))  # preempted or paused while holding the GIL
    if timeline:
        held[timeline[-1][2]].append(timeline[-1][:2])
    out: dict[str, ThreadTruth] = {}
    switch_s = float(record.get("switch_interval", 0.005))
    for name, t in threads.items():
        native_hi = 0.0
        if t["nap_kind"] == "native":
            other_ends = sorted(e for s, e, who in timeline if who != name)
            native_hi = _clip(_native_ends(t["naps"], other_ends, switch_s), windows) / wall
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
            native_hi,
            cpu / seconds if seconds > 0 else None,
        )
    maybe = {name: held[name] + before[name] + after[name] for name in threads}
    functions = {
        fn: (
            _clip(intersection(_merged(calls), _merged(held[name])), windows) / wall,
            _clip(intersection(_merged(calls), _merged(maybe[name])), windows) / wall,
        )
        for name, t in threads.items()
        for fn, calls in t["calls"].items()
    }
    spinners = [name for name, t in threads.items() if not t["naps"]]
    blame = {(w, h): out[h].held for w in spinners for h in out if h != w}
    return Truth(
        wall,
        sum(th.held for th in out.values()),
        _clip(_merged(handoffs), windows) / wall,
        out,
        functions,
        blame,
    )
