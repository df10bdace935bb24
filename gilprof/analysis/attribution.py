"""Profile -> GIL shares per thread and function. Pure functions over a Profile.

Definitions (README "Definitions"): a tick is one sampling instant. In gil mode a function's
total share is the fraction of ticks at which the GIL holder had it on its stack (once per
sample, however deep the recursion); its self share the fraction with it on top; GIL
utilization the fraction of ticks at which any thread held the GIL; a thread's held share
the fraction of ticks at which it held the GIL. In wall and cpu modes there is no GIL state:
shares are per thread (fraction of ticks at which that thread had the function on its stack).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from gilprof.analysis.table import WindowTable, build_table, thread_filter, thread_label
from gilprof.errors import UsageError, no_lines
from gilprof.model import Mode
from gilprof.profile import Profile

DEFAULT_WATCH = ("safe_broadcast", "_balance_requests_across_ranks")


@dataclass(frozen=True, slots=True)
class FunctionKey:
    name: str
    file: str
    line: int = 0  # 0 unless attribution is by line
    thread: str | None = None  # None when aggregated over threads

    @property
    def basename(self) -> str:
        return os.path.basename(self.file)

    @property
    def match_key(self) -> tuple[str, str, int, str | None]:
        """Identity across machines: file paths differ, base names do not."""
        return (self.name, self.basename, self.line, self.thread)


@dataclass(frozen=True)
class FunctionShare:
    key: FunctionKey
    self_samples: int
    total_samples: int
    self_share: float
    total_share: float
    self_s: float
    total_s: float


@dataclass(frozen=True)
class ThreadShare:
    tid: int
    name: str
    samples: int
    share: float  # held share in gil mode; sampled share otherwise


@dataclass(frozen=True)
class WatchResult:
    function: str
    found: bool
    self_share: float
    total_share: float
    self_s: float
    total_s: float
    matched: tuple[str, ...]  # the qualified names that matched


@dataclass(frozen=True)
class Attribution:
    mode: Mode
    ticks: float
    duration_s: float
    samples: int
    utilization: float | None  # None outside gil mode: no GIL state was recorded
    threads: tuple[ThreadShare, ...]
    functions: tuple[FunctionShare, ...]
    watch: tuple[WatchResult, ...]
    by_thread: bool

    @property
    def seconds_per_tick(self) -> float:
        return self.duration_s / self.ticks if self.ticks else 0.0


def attribute(
    profile: Profile,
    *,
    by_thread: bool = False,
    lines: bool = False,
    thread_pattern: str | None = None,
    watch: Iterable[str] = DEFAULT_WATCH,
    top: int | None = None,
    table: WindowTable | None = None,
) -> Attribution:
    """Shares of `profile` (from `table` when the caller built one with the same options)."""
    if lines and not profile.sampling.has_lines:
        raise UsageError(no_lines("--lines"))
    if table is None:
        table = build_table(
            profile, by_thread=by_thread, lines=lines, thread_pattern=thread_pattern, watch=watch
        )
    mode = profile.sampling.mode
    ticks = profile.sampling.ticks
    duration = profile.sampling.duration_s
    allowed = thread_filter(profile, thread_pattern)

    def share(count: int) -> float:
        return min(1.0, count / ticks) if ticks > 0 else 0.0

    def seconds(count: int) -> float:
        return share(count) * duration

    functions = sorted(
        (
            FunctionShare(
                FunctionKey(*key),
                table.self_.get(key, 0),
                total,
                share(table.self_.get(key, 0)),
                share(total),
                seconds(table.self_.get(key, 0)),
                seconds(total),
            )
            for key, total in table.total.items()
        ),
        key=lambda f: (-f.total_samples, -f.self_samples, f.key.name, f.key.file, f.key.line),
    )
    if top is not None:
        functions = functions[:top]
    threads = sorted(
        (
            ThreadShare(tid, thread_label(profile, tid), n, share(n))
            for tid, n in table.held.items()
            if allowed is None or tid in allowed
        ),
        key=lambda t: (-t.samples, t.tid),
    )
    watched = tuple(
        WatchResult(
            name,
            table.watch_total[name] > 0,
            share(table.watch_self[name]),
            share(table.watch_total[name]),
            seconds(table.watch_self[name]),
            seconds(table.watch_total[name]),
            tuple(sorted(table.watch_matched[name])),
        )
        for name in table.watch_total
    )
    utilization = share(table.samples) if mode.knows_gil else None
    return Attribution(
        mode,
        ticks,
        duration,
        table.samples,
        utilization,
        tuple(threads),
        tuple(functions),
        watched,
        table.per_thread,
    )
