"""The arithmetic of the uprobe truth (uprobe_truth.py): events as bpftrace prints them, each
thread's held / waiting / outside intervals, the scheduler's asleep and runnable intervals,
and the per-thread truth over a window. Pure functions of the event list, no bpftrace.

Event kinds: a/b take_gil entry/return, c/d drop_gil entry/return; s (switched out, with the
state it left in), w (woken), i (switched in) from the scheduler's tracepoints.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

Interval = tuple[float, float]

# Event kinds as bpftrace prints them.
TAKE, TAKEN, DROP, DROPPED = "a", "b", "c", "d"
# scheduler events (sched=True): off a CPU, made runnable, onto a CPU
SWITCHED_OUT, WOKEN, SWITCHED_IN = "s", "w", "i"
HELD, WAITING, OUTSIDE = "held", "waiting", "outside"
# The state each event leaves its thread in, and the state it implies before it.
AFTER = {TAKE: WAITING, TAKEN: HELD, DROP: WAITING, DROPPED: OUTSIDE}
BEFORE = {TAKE: OUTSIDE, TAKEN: WAITING, DROP: HELD, DROPPED: WAITING}


@dataclass(frozen=True)
class Event:
    t: float  # CLOCK_MONOTONIC seconds
    tid: int
    kind: str
    task_state: int = 0  # SWITCHED_OUT: the state the thread left its CPU in (0: runnable)


@dataclass(frozen=True)
class ThreadTruth:
    tid: int
    held_s: float
    waiting_s: float
    # waiting seconds by the thread that held the GIL meanwhile (0: nobody, a hand-off)
    waiting_by_holder: dict[int, float] = field(default_factory=dict)
    silent: bool = False  # no event in the whole trace: state unknown, counted as neither
    # with scheduler events: the rest (neither held nor waiting) split into asleep (blocked
    # in the kernel: idle) and not (on a CPU or runnable: native code, or woken from a sleep
    # and not yet on a core, which is what the reader calls native)
    idle_s: float | None = None
    native_s: float | None = None
    # waiting while off a CPU but runnable (preempted, or woken and not yet on a core):
    # inside take_gil in user space, such a thread looks like one running native code to
    # anything that reads /proc (the kernel says "running" for every runnable thread)
    waiting_runnable_s: float | None = None
    waiting_runnable_by_holder: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class GilTruth:
    t0: float
    t1: float
    threads: dict[int, ThreadTruth]
    events: int  # events inside the window
    lost: int  # events bpftrace reported lost (the figures are wrong if > 0)

    @property
    def seconds(self) -> float:
        return self.t1 - self.t0

    def held_share(self, tid: int) -> float:
        return self.threads[tid].held_s / self.seconds if tid in self.threads else 0.0

    def waiting_share(self, tid: int) -> float:
        return self.threads[tid].waiting_s / self.seconds if tid in self.threads else 0.0

    def blame_share(self, waiter: int, holder: int) -> float:
        th = self.threads.get(waiter)
        return th.waiting_by_holder.get(holder, 0.0) / self.seconds if th else 0.0

    def to_dict(self) -> dict[str, Any]:
        def share(x: float | None) -> float | None:
            return None if x is None else x / self.seconds

        return {
            "t0": self.t0,
            "t1": self.t1,
            "seconds": self.seconds,
            "events": self.events,
            "lost": self.lost,
            "threads": [
                {
                    "tid": t.tid,
                    "held_share": t.held_s / self.seconds,
                    "waiting_share": t.waiting_s / self.seconds,
                    "idle_share": share(t.idle_s),
                    "native_share": share(t.native_s),
                    "waiting_runnable_share": share(t.waiting_runnable_s),
                    "waiting_by_holder": {
                        str(h): s / self.seconds for h, s in sorted(t.waiting_by_holder.items())
                    },
                    "silent": t.silent,
                }
                for t in sorted(self.threads.values(), key=lambda t: t.tid)
            ],
        }


def parse_events(lines: Iterable[str]) -> tuple[list[Event], int]:
    """(events sorted by time, events lost) from bpftrace's output; a line that is not one
    whole event (bpftrace's own messages) is skipped."""
    events: list[Event] = []
    lost = 0
    for line in lines:
        parts = line.split()
        try:
            if len(parts) == 3 and parts[0] in (*AFTER, WOKEN, SWITCHED_IN):
                events.append(Event(int(parts[2]) / 1e9, int(parts[1]), parts[0]))
            elif len(parts) == 4 and parts[0] == SWITCHED_OUT:
                events.append(Event(int(parts[2]) / 1e9, int(parts[1]), parts[0], int(parts[3])))
            elif line.startswith("Lost ") and len(parts) > 1 and parts[1].isdigit():
                lost += int(parts[1])
        except ValueError:
            continue
    events.sort(key=lambda e: e.t)
    return events, lost


def _gil_spans(mine: Sequence[Event], t0: float, t1: float) -> dict[str, list[Interval]]:
    """One thread's held / waiting / outside intervals clipped to [t0, t1]."""
    spans: dict[str, list[Interval]] = {HELD: [], WAITING: [], OUTSIDE: []}
    if not mine:
        return spans
    state, since = BEFORE[mine[0].kind], t0  # before the first event: what it implies
    for e in mine:
        a, b = max(since, t0), min(e.t, t1)
        if b > a:
            spans[state].append((a, b))
        state, since = AFTER[e.kind], e.t
    a = max(since, t0)
    if t1 > a:
        spans[state].append((a, t1))
    return spans


def asleep_spans(mine: Sequence[Event], t0: float, t1: float) -> list[Interval]:
    """When one thread was blocked in the kernel (switched out not runnable, until woken),
    clipped to [t0, t1]; before its first event, what that event implies."""
    out: list[Interval] = []
    asleep = bool(mine) and mine[0].kind == WOKEN
    since = t0
    for e in mine:
        if e.kind == SWITCHED_OUT and e.task_state != 0 and not asleep:
            asleep, since = True, e.t
        elif e.kind == WOKEN and asleep:
            a, b = max(since, t0), min(e.t, t1)
            if b > a:
                out.append((a, b))
            asleep = False
    if asleep and t1 > max(since, t0):
        out.append((max(since, t0), t1))
    return out


def runnable_spans(mine: Sequence[Event], t0: float, t1: float) -> list[Interval]:
    """When one thread was runnable but off every CPU (switched out runnable, or woken,
    until switched in), clipped to [t0, t1]."""
    out: list[Interval] = []
    since: float | None = None
    for e in mine:
        if (e.kind == SWITCHED_OUT and e.task_state == 0) or e.kind == WOKEN:
            since = e.t if since is None else since
        elif e.kind == SWITCHED_IN and since is not None:
            a, b = max(since, t0), min(e.t, t1)
            if b > a:
                out.append((a, b))
            since = None
        elif e.kind == SWITCHED_OUT:
            since = None
    if since is not None and t1 > max(since, t0):
        out.append((max(since, t0), t1))
    return out


def intersection(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """Where two sorted, disjoint interval lists overlap."""
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _intersect_s(a: list[Interval], b: list[Interval]) -> float:
    """Seconds where two sorted, disjoint interval lists overlap."""
    return sum(hi - lo for lo, hi in intersection(a, b))


def thread_intervals(
    events: Sequence[Event], t0: float, t1: float
) -> dict[int, dict[str, list[Interval]]]:
    """Per thread that left a GIL event, its held / waiting / outside intervals in [t0, t1]."""
    by_thread: dict[int, list[Event]] = {}
    for e in events:
        if e.kind in AFTER:
            by_thread.setdefault(e.tid, []).append(e)
    return {tid: _gil_spans(mine, t0, t1) for tid, mine in by_thread.items()}


def _overlap_by_holder(
    waits: list[Interval], holds: list[tuple[float, float, int]]
) -> dict[int, float]:
    """Seconds of `waits` inside each holder's holds (`holds` sorted, disjoint); 0: nobody."""
    starts = [h[0] for h in holds]
    out: dict[int, float] = {}
    for a, b in waits:
        covered = 0.0
        i = max(0, bisect.bisect_right(starts, a) - 1)
        while i < len(holds) and holds[i][0] < b:
            s, e, holder = holds[i]
            lo, hi = max(a, s), min(b, e)
            if hi > lo:
                out[holder] = out.get(holder, 0.0) + hi - lo
                covered += hi - lo
            i += 1
        if b - a > covered:
            out[0] = out.get(0, 0.0) + (b - a - covered)
    return out


def truth_from_events(
    events: Sequence[Event],
    t0: float,
    t1: float,
    tids: Iterable[int] = (),
    lost: int = 0,
    ran: Iterable[int] = (),
) -> GilTruth:
    """Held, waiting and blame per thread over [t0, t1] (idle and native too where the
    events include the scheduler's); `tids`: threads to report even when they left no GIL
    event (as `silent`). `ran`: threads the caller knows ran Python code in the window
    (a workload's own record): one of them that is silent held the GIL whenever no other
    thread did, since a thread that never drops the GIL leaves no event (one spinner alone:
    nobody asks it to drop)."""
    spans = thread_intervals(events, t0, t1)
    sched: dict[int, list[Event]] = {}
    for e in events:
        if e.kind in (SWITCHED_OUT, WOKEN, SWITCHED_IN):
            sched.setdefault(e.tid, []).append(e)
    holds = sorted((a, b, tid) for tid, s in spans.items() for a, b in s[HELD])
    threads: dict[int, ThreadTruth] = {}
    for tid, s in spans.items():
        idle = native = waiting_runnable = None
        others = [h for h in holds if h[2] != tid]
        runnable_by_holder: dict[int, float] = {}
        if sched:
            outside = s[OUTSIDE]
            idle = _intersect_s(outside, asleep_spans(sched.get(tid, []), t0, t1))
            native = sum(b - a for a, b in outside) - idle
            ambiguous = intersection(s[WAITING], runnable_spans(sched.get(tid, []), t0, t1))
            waiting_runnable = sum(b - a for a, b in ambiguous)
            runnable_by_holder = _overlap_by_holder(ambiguous, others)
        threads[tid] = ThreadTruth(
            tid,
            sum(b - a for a, b in s[HELD]),
            sum(b - a for a, b in s[WAITING]),
            _overlap_by_holder(s[WAITING], others),
            idle_s=idle,
            native_s=native,
            waiting_runnable_s=waiting_runnable,
            waiting_runnable_by_holder=runnable_by_holder,
        )
    others_held = sum(b - a for a, b, _ in holds)
    ran = set(ran)
    for tid in tids:
        if tid not in threads:
            held = max(0.0, (t1 - t0) - others_held) if tid in ran else 0.0
            threads[tid] = ThreadTruth(tid, held, 0.0, {}, silent=True)
    inside = sum(1 for e in events if t0 <= e.t <= t1 and e.kind in AFTER)
    return GilTruth(t0, t1, threads, inside, lost)
