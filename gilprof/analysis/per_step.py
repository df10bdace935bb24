"""Each function's cost to the step loop in milliseconds per iteration (and per request).

A function f costs the loop, per window of the profile:

- own: the loop thread's busy time (holding the GIL, waiting for it, running native code)
  with f on its stack;
- blamed: the loop's GIL wait while another thread held the GIL with f on its stack (the
  state reader's blame, inclusive: f anywhere on the holder's stack, split evenly when the
  reader saw several holders in a hand-off), and f not on the loop's own stack: a stretch
  counts once per function, as own time when f is on the loop's stack, else as blamed
  time. So no function's cost exceeds the loop's wall time, nor so the step.

The cost per step is (own + blamed) seconds / iterations. The iteration log has no clock
fine enough to cut it at the profile's window edges, so the iterations in a window are its
seconds / the mean host step (host_step_time is the loop's top-to-top period): the cost per
step is the share of the loop's wall time times the mean host step. The interval is the
share's batch-means interval (gilprof.analysis.loop.batch_share) times the mean step; the
mean step's own error (thousands of iterations) is left out. Per request divides by the
log's median num_scheduled_requests.

Profiles without every thread's state (gil, wall, cpu modes) give own time only, from the
loop thread's samples; no blame. See docs/per-step.md.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from gilprof.analysis.loop import batch_share
from gilprof.errors import UsageError
from gilprof.model import Mode, ThreadState, is_wrapper_frame
from gilprof.native_classes import NativeClass, native_class_of
from gilprof.profile import Profile, Window
from gilprof.stats import Difference, Estimate, estimate_difference
from gilprof.steps import RankSteps

FunctionId = tuple[str, str]  # (qualified name, file base name)
# (window index, seconds, the loop's stack, the other threads' GIL-holding stacks)
Visit = Callable[[int, float, int, list[int]], None]
NATIVE_WAITS = frozenset({NativeClass.DEVICE, NativeClass.PEERS})
BUSY_STATES = frozenset(
    (
        ThreadState.HELD,
        ThreadState.WAITING,
        ThreadState.NATIVE,
        ThreadState.ACTIVE,
        ThreadState.UNKNOWN,
    )
)


@dataclass(frozen=True)
class StepUnit:
    """What one unit of work is: an iteration of the loop, or a scheduled request in one."""

    step_ms: float  # mean host step (the loop's period)
    requests_per_step: float | None  # median num_scheduled_requests, when logged
    iterations: int

    @classmethod
    def of(cls, steps: RankSteps) -> StepUnit:
        requests = steps.scheduled_requests_p50
        return cls(steps.host_step_ms.mean, requests if requests else None, steps.iterations)


@dataclass(frozen=True)
class FunctionCost:
    name: str
    file: str
    share: Estimate  # of the loop thread's wall time: own + blamed
    own_share: float
    blamed_share: float
    per_step_ms: Estimate
    per_request_ms: Estimate | None
    # with feeding threads named: their GIL waits while f held the GIL, ms per step (what a
    # device-paced step waits for f on its critical path; not part of the loop's own cost)
    feeder_wait_ms: Estimate | None = None

    @property
    def own_ms(self) -> float:
        """The loop's own time in f per step (point value): own_share of the step."""
        return (
            self.own_share * self.per_step_ms.value / self.share.value if self.share.value else 0.0
        )


WHOLE_LOOP = 0.9
"""A function costing this share of the loop's time or more is a frame of the loop itself
(its outer frames): removing it is removing the loop."""


@dataclass(frozen=True)
class LoopCosts:
    thread: str
    unit: StepUnit
    windows: int
    blame: bool  # the profile recorded every thread's state: blamed waits are included
    functions: tuple[FunctionCost, ...]
    # each function -> the functions above it on every stack it was seen on (its callers
    # that enclose all of its cost)
    enclosing: Mapping[FunctionId, frozenset[FunctionId]] = field(default_factory=dict)
    was: Mapping[FunctionId, str] = field(default_factory=dict)  # renamed: the old name

    def is_loop_frame(self, cost: FunctionCost) -> bool:
        """A frame of the loop itself: on the loop's stack for WHOLE_LOOP or more of the time
        its outermost frame is (of its busy time, so a device-paced loop's frames count)."""
        top = max((c.share.value for c in self.functions), default=0.0)
        return top > 0 and cost.share.value >= WHOLE_LOOP * top

    def find(self, name: str, file: str = "") -> FunctionCost | None:
        for cost in self.functions:
            if cost.name == name and (not file or cost.file == file):
                return cost
        return None


def scale(estimate: Estimate, factor: float) -> Estimate:
    return Estimate(
        estimate.value * factor,
        estimate.low * factor,
        estimate.high * factor,
        estimate.stderr * abs(factor),
        estimate.dof,
    )


def _stack_functions(
    profile: Profile,
    index: int,
    cache: dict[int, frozenset[FunctionId]],
    renames: Mapping[str, str],
) -> frozenset[FunctionId]:
    found = cache.get(index)
    if found is None:
        found = cache[index] = frozenset(
            (renames.get(f.name, f.name), os.path.basename(f.file))
            for f in profile.stack_frames(index)
            if f.is_python
        )
    return found


def _elementary(window: Window) -> Iterable[tuple[float, dict[int, int]]]:
    """(duration, {tid: stack}) for each stretch of the window where no thread's state changes."""
    points = sorted({t for span in window.spans for t in (span[2], span[3])})
    by_thread: dict[int, list[tuple[float, float, int]]] = {}
    for tid, stack, t0, t1 in window.spans:
        by_thread.setdefault(tid, []).append((t0, t1, stack))
    for spans in by_thread.values():
        spans.sort()
    cursors = dict.fromkeys(by_thread, 0)
    for a, b in itertools.pairwise(points):
        if b <= a:
            continue
        now: dict[int, int] = {}
        for tid, spans in by_thread.items():
            i = cursors[tid]
            while i < len(spans) and spans[i][1] <= a:
                i += 1
            cursors[tid] = i
            if i < len(spans) and spans[i][0] <= a:
                now[tid] = spans[i][2]
        yield b - a, now


def _feeder_waits(
    profile: Profile,
    feeder: int,
    functions: Callable[[int], frozenset[FunctionId]],
    into: dict[FunctionId, dict[int, float]],
) -> None:
    """Add the feeder's GIL waits, per window, to every function on the holders' stacks."""

    def visit(w: int, dt: float, stack: int, holders: list[int]) -> None:
        if holders and profile.stacks[stack].state is ThreadState.WAITING:
            part = dt / len(holders)
            for holder in holders:
                for key in functions(holder):
                    row = into.setdefault(key, {})
                    row[w] = row.get(w, 0.0) + part

    walk_loop(profile, feeder, visit)


def walk_loop(profile: Profile, loop_tid: int, visit: Visit) -> list[float]:
    """Call visit(window index, dt, loop stack, holder stacks) for every stretch where the
    loop thread is busy; returns each window's seconds of loop-thread wall time."""
    wall: list[float] = []
    spans_mode = profile.sampling.mode.reads_states and any(w.spans for w in profile.windows)
    known: dict[int, bool] = {}

    def busy(stack: int) -> bool:
        """Host work: a busy state, and not a native wait the locator placed in a device
        or peer library (waiting, not costing the loop host time)."""
        if stack not in known:
            state = profile.stacks[stack].state
            frames = profile.stack_frames(stack)
            cls = native_class_of(frames[-1]) if frames and state is ThreadState.NATIVE else None
            known[stack] = state in BUSY_STATES and cls not in NATIVE_WAITS
        return known[stack]

    for w, window in enumerate(profile.windows):
        seen = 0.0
        if spans_mode:
            for dt, now in _elementary(window):
                stack = now.get(loop_tid)
                if stack is None:
                    continue
                seen += dt
                if not busy(stack):
                    continue
                holders = [
                    s
                    for tid, s in now.items()
                    if tid != loop_tid and profile.stacks[s].state is ThreadState.HELD
                ]
                visit(w, dt, stack, holders)
        else:
            weights = profile.state_weights(window)
            if profile.sampling.mode is Mode.GIL:
                seen = window.ticks  # only the holder is recorded: shares of ticks
            for stack, count in weights.items():
                if profile.stacks[stack].tid != loop_tid:
                    continue
                if profile.sampling.mode is not Mode.GIL:
                    seen += count
                if busy(stack):
                    visit(w, count, stack, [])
        wall.append(seen)
    return wall


def loop_costs(
    profile: Profile,
    loop_tid: int,
    steps: RankSteps,
    *,
    all_frames: bool = False,
    top: int | None = None,
    renames: Mapping[str, str] | None = None,
    feeders: Iterable[int] = (),
) -> LoopCosts:
    """Every function's cost to the loop thread `loop_tid`, in ms per step (see the module);
    with `feeders` (the threads that launch the device work the loop waits for), also the
    feeders' GIL waits while each function held the GIL, in ms per step: on a device-paced
    step's critical path."""
    unit = StepUnit.of(steps)
    renames = renames or {}
    cache: dict[int, frozenset[FunctionId]] = {}
    own: dict[FunctionId, dict[int, float]] = {}
    blamed: dict[FunctionId, dict[int, float]] = {}
    enclosing: dict[FunctionId, frozenset[FunctionId]] = {}
    was: dict[FunctionId, str] = {}  # the functions --rename renamed: their old name
    seen_stacks: set[int] = set()

    def note_callers(stack: int) -> None:
        if stack in seen_stacks:
            return
        seen_stacks.add(stack)
        above: list[FunctionId] = []
        for f in profile.stack_frames(stack):
            if not f.is_python:
                continue
            key = (renames.get(f.name, f.name), os.path.basename(f.file))
            if f.name in renames:
                was[key] = f.name
            callers = frozenset(k for k in above if k != key)
            known = enclosing.get(key)
            enclosing[key] = callers if known is None else known & callers
            above.append(key)

    def visit(w: int, dt: float, stack: int, holders: list[int]) -> None:
        mine = _stack_functions(profile, stack, cache, renames)
        note_callers(stack)
        for key in mine:
            row = own.setdefault(key, {})
            row[w] = row.get(w, 0.0) + dt
        if holders and profile.stacks[stack].state is ThreadState.WAITING:
            # One accounting: a function on both the loop's stack and a holder's counted
            # this stretch as own time above; its blame would count the same ticks again.
            part = dt / len(holders)
            for holder in holders:
                note_callers(holder)
                for key in _stack_functions(profile, holder, cache, renames) - mine:
                    row = blamed.setdefault(key, {})
                    row[w] = row.get(w, 0.0) + part

    wall = walk_loop(profile, loop_tid, visit)
    usable = [i for i, seconds in enumerate(wall) if seconds > 0]
    if not usable:
        raise UsageError("the loop thread has no samples in the profile")
    fed: dict[FunctionId, dict[int, float]] = {}
    feeders = [tid for tid in feeders if tid != loop_tid]
    for feeder in feeders:
        _feeder_waits(profile, feeder, lambda i: _stack_functions(profile, i, cache, renames), fed)
    den = [wall[i] for i in usable]
    total = math.fsum(den)
    out = []
    for key in set(own) | set(blamed):
        if not all_frames and is_wrapper_frame(*key):
            continue
        o, b = own.get(key, {}), blamed.get(key, {})
        num = [o.get(i, 0.0) + b.get(i, 0.0) for i in usable]
        share = batch_share(num, den)
        per_step = scale(share, unit.step_ms)
        per_request = (
            scale(per_step, 1 / unit.requests_per_step) if unit.requests_per_step else None
        )
        feeder_ms = None
        if feeders:
            f = fed.get(key, {})
            feeder_ms = scale(batch_share([f.get(i, 0.0) for i in usable], den), unit.step_ms)
        out.append(
            FunctionCost(
                key[0],
                key[1],
                share,
                math.fsum(o.values()) / total,
                math.fsum(b.values()) / total,
                per_step,
                per_request,
                feeder_ms,
            )
        )
    out.sort(key=lambda c: (-c.share.value, c.name, c.file))
    if top is not None:
        out = out[:top]
    spans_mode = profile.sampling.mode.reads_states and any(w.spans for w in profile.windows)
    name = profile.threads.get(loop_tid) or f"tid {loop_tid}"
    return LoopCosts(name, unit, len(usable), spans_mode, tuple(out), enclosing, was)


STEP, REQUEST = "step", "request"


@dataclass(frozen=True)
class CostChange:
    """One function's cost to the loop before and after, per unit of work."""

    name: str
    file: str
    per_step: Difference
    per_request: Difference | None
    own_delta_ms: float = 0.0  # the change of the loop's own time in it, ms per step
    loop_frame: bool = False  # a frame of the loop itself (WHOLE_LOOP) on either side
    enclosing: frozenset[FunctionId] = frozenset()  # callers enclosing it on both sides
    was: str | None = None  # the name it had before (--rename): the change rewrote it

    def in_unit(self, unit: str) -> Difference:
        return self.per_request if unit == REQUEST and self.per_request else self.per_step


@dataclass(frozen=True)
class CostComparison:
    unit: str  # STEP or REQUEST: what the verdicts are judged on
    threads: tuple[str, str]  # the loop thread of each side
    changes: dict[FunctionId, CostChange]

    def find(self, name: str, file: str) -> CostChange | None:
        return self.changes.get((name, file))


_ZERO = Estimate(0.0, 0.0, 0.0, 0.0, 1.0)


def compare_costs(
    before: LoopCosts, after: LoopCosts, confidence: float = 0.95, unit: str = STEP
) -> CostComparison:
    """Every function's per-step (and per-request) cost change; a function missing on one
    side cost the loop nothing there."""
    if unit == REQUEST and not (before.unit.requests_per_step and after.unit.requests_per_step):
        raise UsageError("--unit request needs num_scheduled_requests in both step logs")
    b = {(c.name, c.file): c for c in before.functions}
    a = {(c.name, c.file): c for c in after.functions}
    changes = {}
    for key in b.keys() | a.keys():
        cb, ca = b.get(key), a.get(key)
        step = estimate_difference(
            cb.per_step_ms if cb else _ZERO, ca.per_step_ms if ca else _ZERO, confidence
        )
        request = None
        if before.unit.requests_per_step and after.unit.requests_per_step:
            request = estimate_difference(
                (cb.per_request_ms if cb else None) or _ZERO,
                (ca.per_request_ms if ca else None) or _ZERO,
                confidence,
            )
        own_delta = (ca.own_ms if ca else 0.0) - (cb.own_ms if cb else 0.0)
        loop_frame = (cb is not None and before.is_loop_frame(cb)) or (
            ca is not None and after.is_loop_frame(ca)
        )
        sides = [s.enclosing[key] for s in (before, after) if key in s.enclosing]
        enclosing = frozenset.intersection(*sides) if sides else frozenset()
        was = before.was.get(key) or after.was.get(key)
        changes[key] = CostChange(
            key[0], key[1], step, request, own_delta, loop_frame, enclosing, was
        )

    return CostComparison(unit, (before.thread, after.thread), changes)


def side_costs(
    profile: Profile,
    loop_tid: int,
    steps: RankSteps,
    renames: Mapping[str, str] | None = None,
) -> LoopCosts:
    """All functions' costs on one side of a comparison (no top: rows are matched by key)."""
    return loop_costs(profile, loop_tid, steps, all_frames=True, renames=renames)


def parse_renames(texts: Iterable[str]) -> dict[str, str]:
    """OLD=NEW pairs (--rename): an unfixed function and the fixed one that replaces it."""
    out = {}
    for text in texts:
        old, sep, new = text.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise UsageError(f"--rename {text!r}: expected OLD=NEW (function names)")
        out[old.strip()] = new.strip()
    return out
