"""One rank's readings over the last window of a long sampling run, for live metrics
(`gilprof watch --metrics`, gilprof.renderers.metrics): every thread's state shares, the
step loop's split in ms per step, the verdict and the watched functions' cost per step.

The classes are the verdict's: native time by gilprof.native_classes (as
gilprof.analysis.loop.native_class places it), blocked time by gilprof.wait_classes
(`classify_blocked`, as gilprof.analysis.loop classes the loop's blocked readings).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from gilprof.analysis.loop import native_class
from gilprof.analysis.per_step import loop_costs
from gilprof.analysis.reasons import blocked_reasons
from gilprof.analysis.verdict import verdict
from gilprof.errors import GilprofError
from gilprof.model import Mode, ThreadState
from gilprof.native_classes import NativeRules
from gilprof.profile import Profile
from gilprof.steps import StepRecord, summarize
from gilprof.wait_classes import DEVICE_SYNC_FUNCTIONS, Reason, WaitClass, WaitRules


@dataclass(frozen=True)
class ThreadReading:
    """A thread's shares of its own sampled time (gil mode: of the ticks, held only)."""

    name: str
    tid: int
    held: float
    waiting: float | None
    native: tuple[tuple[str, float], ...]  # native class -> share
    blocked: tuple[tuple[str, float], ...]  # wait class -> share (idle = their sum)
    idle: float | None


@dataclass(frozen=True)
class LoopReading:
    thread: str
    step_ms: float | None  # mean host step of the window's logged iterations
    split: tuple[tuple[str, float], ...]  # part -> share of the loop's time
    bound: str  # gilprof.analysis.verdict's bound
    functions: tuple[tuple[str, float], ...]  # watched function -> ms per step


@dataclass(frozen=True)
class RankReading:
    seconds: float
    threads: tuple[ThreadReading, ...]
    loop: LoopReading | None
    note: str = ""  # why there is no loop reading, if there is none


@dataclass(frozen=True)
class LiveRules:
    """What the recipe says about the rank: its loop thread, device waits, watched functions."""

    loop_thread: str | None = None
    device_wait: tuple[str, ...] = ()
    watch: tuple[str, ...] = ()
    native: NativeRules = field(default_factory=NativeRules)


def _category(
    profile: Profile, index: int, rules: LiveRules, reasons: dict[int, Reason]
) -> tuple[str, str]:
    stack = profile.stacks[index]
    state = stack.state
    if state is ThreadState.NATIVE:
        return "native", native_class(
            profile.stack_frames(index), profile.sampling.mode, rules.native
        ).value
    if state is ThreadState.IDLE:
        reason = reasons.get(index)
        return "blocked", (reason.cls.value if reason else WaitClass.UNEXPLAINED.value)
    return str(state.value), ""


def thread_readings(profile: Profile, rules: LiveRules) -> tuple[ThreadReading, ...]:
    """Every thread's state shares over the profile's windows."""
    mode = profile.sampling.mode
    names = tuple(dict.fromkeys(rules.device_wait + DEVICE_SYNC_FUNCTIONS))
    reasons = blocked_reasons(profile, WaitRules(rules.native, names))  # as the verdict's
    per: dict[int, dict[tuple[str, str], float]] = {}
    cats: dict[int, tuple[str, str]] = {}
    ticks = 0.0
    for window in profile.windows:
        ticks += window.ticks
        for index, count in profile.state_weights(window).items():
            cat = cats.get(index)
            if cat is None:
                cat = cats[index] = _category(profile, index, rules, reasons)
            row = per.setdefault(profile.stacks[index].tid, {})
            row[cat] = row.get(cat, 0.0) + count
    out = []
    for tid, row in sorted(per.items()):
        total = ticks if mode is Mode.GIL else sum(row.values())
        if total <= 0:
            continue
        states = mode.reads_states

        def share(
            kind: str, row: dict[tuple[str, str], float] = row, total: float = total
        ) -> float:
            return sum(v for (k, _), v in row.items() if k == kind) / total

        def by_class(
            kind: str, row: dict[tuple[str, str], float] = row, total: float = total
        ) -> tuple[tuple[str, float], ...]:
            return tuple(sorted((c, v / total) for (k, c), v in row.items() if k == kind))

        out.append(
            ThreadReading(
                name=profile.threads.get(tid) or f"tid {tid}",
                tid=tid,
                held=min(1.0, share("held")),
                waiting=share("waiting") if states else None,
                native=by_class("native") if states else (),
                blocked=by_class("blocked") if states else (),
                idle=share("blocked") if states else None,
            )
        )
    return tuple(out)


def rank_reading(
    profile: Profile, steps: Sequence[StepRecord], rules: LiveRules, rank: int = 0
) -> RankReading:
    """The rank's threads, and its loop's split, verdict and watched costs where the window
    holds the loop thread's samples (and, for ms per step, logged iterations)."""
    seconds = sum(w.seconds for w in profile.windows)
    threads = thread_readings(profile, rules)
    records = [s if s.rank == rank else _with_rank(s, rank) for s in steps]
    rank_steps = summarize(records).rank(rank) if records else None
    step_ms = rank_steps.host_step_ms.mean if rank_steps is not None else None
    try:
        judged = verdict(
            profile,
            0.0 if rank_steps is None else rank_steps.host_step_ms.p50,
            None,
            loop_thread=rules.loop_thread,
            watch=rules.watch,
            device_wait=rules.device_wait,
        )
    except GilprofError as exc:
        return RankReading(seconds, threads, None, str(exc))
    loop = judged.loop
    split: list[tuple[str, float]] = [("held", loop.held)]
    if loop.gil_wait is not None:
        split.append(("gil_wait", loop.gil_wait))
    for cls, share in loop.native_by_class:
        if cls not in ("device-wait", "peer-wait", "unplaced"):  # those are in blocked_*
            split.append((f"native_{cls.replace('-', '_')}", share))
    for blocked in loop.blocked_by_class:
        split.append((f"blocked_{blocked.cls}", blocked.share.value))
    if loop.unplaced is not None and loop.unplaced.value > 0:
        split.append(("unplaced", loop.unplaced.value))
    functions: tuple[tuple[str, float], ...] = ()
    if rank_steps is not None and rules.watch:
        costs = loop_costs(profile, loop.thread.tid, rank_steps)
        functions = tuple(
            (
                name,
                max(
                    (
                        c.per_step_ms.value
                        for c in costs.functions
                        if c.name == name or c.name.endswith("." + name)
                    ),
                    default=0.0,
                ),
            )
            for name in rules.watch
        )
    return RankReading(
        seconds,
        threads,
        LoopReading(loop.thread.name, step_ms, tuple(split), judged.bound, functions),
    )


def _with_rank(record: StepRecord, rank: int) -> StepRecord:
    return replace(record, rank=rank)
