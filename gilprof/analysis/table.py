"""One pass over a profile's windows -> the counts every analysis reads.

Attribution (report, gate, ranks), compare and the pictures all ask the same questions of
a profile: how many ticks had function F on the GIL holder's stack (or on top of it), how
many had thread T in each state, per window or in total. The table answers them from one
walk over the windows, so the data flows one way (profile -> table -> analyses ->
renderers) and no analysis re-derives what another already counted.

A function row is (name, file, line or 0, thread label or None); compare re-keys rows by
file base name, since file paths differ between hosts and base names do not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from gilprof.model import Frame, Mode, ThreadState
from gilprof.profile import Profile

FunctionKey = tuple[str, str, int, "str | None"]  # (name, file, line, thread label)


def thread_label(profile: Profile, tid: int) -> str:
    return profile.threads.get(tid) or f"tid {tid}"


def function_key(frame: Frame, lines: bool, thread: str | None) -> FunctionKey:
    return (frame.name, frame.file, frame.line if lines else 0, thread)


def counts_toward_shares(mode: Mode, state: ThreadState) -> bool:
    """Whether a sample counts toward GIL shares: in contention mode every thread is sampled
    at every tick, and only its held-GIL samples are GIL time; other modes record no state
    beyond what the sampler kept (gil mode keeps only the holder)."""
    return mode is not Mode.CONTENTION or state is ThreadState.HELD


def thread_filter(profile: Profile, pattern: str | None) -> set[int] | None:
    """Thread ids whose label matches `pattern`; None keeps every thread."""
    if not pattern:
        return None
    regex = re.compile(pattern)
    tids = {s.tid for s in profile.stacks} | set(profile.threads)
    return {tid for tid in tids if regex.search(thread_label(profile, tid))}


Series = dict[int, int]  # window index -> count (sparse: most keys are absent from most windows)


@dataclass
class WindowTable:
    """Counts of one profile, in total and (with `series`) per window.

    - `total[key]`: ticks at which the function was on the stack of a sample that counts
      (recursion counted once per sample); `self_[key]`: ticks with it on top.
    - `watch_total[name]`/`watch_self[name]`: the same for a watched function name, which
      matches qualnames (see gilprof.model.function_name_matches); `watch_matched[name]`
      the names that matched.
    - `held[tid]`: samples of that thread that count toward shares (its GIL-held ticks in
      gil and contention mode; its sampled ticks otherwise).
    - `states[tid][state]`: per-window sample counts of every thread in every state, all
      samples included (the GIL timeline and the contention figures read these).
    """

    mode: Mode
    per_thread: bool
    windows: tuple[tuple[float, float, float], ...]  # (t0, t1, ticks) per window
    total: dict[FunctionKey, int] = field(default_factory=dict)
    self_: dict[FunctionKey, int] = field(default_factory=dict)
    watch_total: dict[str, int] = field(default_factory=dict)
    watch_self: dict[str, int] = field(default_factory=dict)
    watch_matched: dict[str, set[str]] = field(default_factory=dict)
    held: dict[int, int] = field(default_factory=dict)
    samples: int = 0  # samples that count toward shares, over all threads
    thread_names: dict[int, str] = field(default_factory=dict)
    states: dict[int, dict[ThreadState, Series]] = field(default_factory=dict)
    # Per-window series, kept only when asked for (compare needs them; a report does not).
    total_series: dict[FunctionKey, Series] | None = None
    watch_series: dict[str, Series] | None = None
    held_series: dict[str, Series] | None = None  # by thread label
    gil_series: Series | None = None

    @property
    def ticks(self) -> float:
        return sum(ticks for _, _, ticks in self.windows)

    def window_ticks(self) -> list[float]:
        return [ticks for _, _, ticks in self.windows]

    @staticmethod
    def dense(series: Series | None, windows: int) -> list[float]:
        """A sparse series as one value per window."""
        out = [0.0] * windows
        for index, count in (series or {}).items():
            out[index] = float(count)
        return out


def build_table(
    profile: Profile,
    *,
    by_thread: bool = False,
    lines: bool = False,
    thread_pattern: str | None = None,
    watch: Iterable[str] = (),
    series: bool = False,
) -> WindowTable:
    """Fold `profile` into a WindowTable in one pass over its windows.

    Function rows are per thread with `by_thread`, and always outside the modes that know
    the GIL holder (wall and cpu shares only make sense per thread). `thread_pattern`
    restricts the function rows (not the thread rows) to matching threads.
    """
    mode = profile.sampling.mode
    per_thread = by_thread or not mode.knows_gil
    allowed = thread_filter(profile, thread_pattern)
    watch_names = tuple(dict.fromkeys(watch))
    table = WindowTable(mode, per_thread, tuple((w.t0, w.t1, w.ticks) for w in profile.windows))
    table.watch_total = dict.fromkeys(watch_names, 0)
    table.watch_self = dict.fromkeys(watch_names, 0)
    table.watch_matched = {name: set() for name in watch_names}
    if series:
        table.total_series, table.watch_series, table.held_series = {}, {}, {}
        table.gil_series = {}
    # Per stack, what it contributes: computed once, reused in every window it appears in.
    plans: dict[int, _StackPlan] = {}
    for index, window in enumerate(profile.windows):
        for stack_index, count in window.counts.items():
            plan = plans.get(stack_index)
            if plan is None:
                plan = plans[stack_index] = _plan(
                    profile, stack_index, table, lines, allowed, watch_names
                )
            _add(table, plan, index, count)
    for tid in {*table.held, *table.states}:
        table.thread_names[tid] = thread_label(profile, tid)
    return table


@dataclass(frozen=True, slots=True)
class _StackPlan:
    tid: int
    label: str
    state: ThreadState
    counts: bool  # toward shares
    keys: tuple[FunctionKey, ...]  # distinct functions on the stack (empty if filtered out)
    leaf: FunctionKey | None
    watch_total: tuple[str, ...]
    watch_self: tuple[str, ...]


def _plan(
    profile: Profile,
    index: int,
    table: WindowTable,
    lines: bool,
    allowed: set[int] | None,
    watch_names: tuple[str, ...],
) -> _StackPlan:
    stack = profile.stacks[index]
    label = thread_label(profile, stack.tid)
    counts = counts_toward_shares(table.mode, stack.state)
    frames = profile.stack_frames(index)
    if not counts or not frames or (allowed is not None and stack.tid not in allowed):
        return _StackPlan(stack.tid, label, stack.state, counts, (), None, (), ())
    thread = label if table.per_thread else None
    keys = tuple(dict.fromkeys(function_key(f, lines, thread) for f in frames))
    leaf = function_key(frames[-1], lines, thread)
    in_stack = []
    on_top = []
    for name in watch_names:
        hits = [f for f in frames if f.matches(name)]
        if hits:
            in_stack.append(name)
            table.watch_matched[name].update(f.name for f in hits)
            if frames[-1].matches(name):
                on_top.append(name)
    return _StackPlan(
        stack.tid, label, stack.state, counts, keys, leaf, tuple(in_stack), tuple(on_top)
    )


def _bump(series: dict[object, Series], key: object, window: int, count: int) -> None:
    row = series.get(key)
    if row is None:
        row = series[key] = {}
    row[window] = row.get(window, 0) + count


def _add(table: WindowTable, plan: _StackPlan, window: int, count: int) -> None:
    per_state = table.states.setdefault(plan.tid, {})
    row = per_state.setdefault(plan.state, {})
    row[window] = row.get(window, 0) + count
    if not plan.counts:
        return
    table.samples += count
    table.held[plan.tid] = table.held.get(plan.tid, 0) + count
    total, self_ = table.total, table.self_
    for key in plan.keys:
        total[key] = total.get(key, 0) + count
    if plan.leaf is not None:
        self_[plan.leaf] = self_.get(plan.leaf, 0) + count
    for name in plan.watch_total:
        table.watch_total[name] += count
    for name in plan.watch_self:
        table.watch_self[name] += count
    if table.total_series is not None:
        for key in plan.keys:
            _bump(table.total_series, key, window, count)  # type: ignore[arg-type]
        for name in plan.watch_total:
            _bump(table.watch_series, name, window, count)  # type: ignore[arg-type]
        _bump(table.held_series, plan.label, window, count)  # type: ignore[arg-type]
        gil = table.gil_series
        assert gil is not None
        gil[window] = gil.get(window, 0) + count
