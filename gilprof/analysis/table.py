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
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from gilprof.model import Frame, Mode, ThreadState, function_name_matches
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
    folder = _Folder(profile, table, lines, allowed, watch_names, ordered=series)
    if series:
        table.total_series, table.watch_series, table.held_series = {}, {}, {}
        table.gil_series = {}
        _fold_per_window(profile, folder)
    else:
        _fold_totals(profile, folder)
    folder.finish()
    if mode is Mode.STATES:  # every thread's states are the reader's spans, not the counts
        table.states = _span_states(profile)
    for tid in {*table.held, *table.states}:
        table.thread_names[tid] = thread_label(profile, tid)
    return table


def _span_states(profile: Profile) -> dict[int, dict[ThreadState, Series]]:
    """states[tid][state][window] from a states-mode profile's spans, in ticks."""
    states: dict[int, dict[ThreadState, Series]] = {}
    stacks = profile.stacks
    for index, window in enumerate(profile.windows):
        for stack_index, weight in profile.state_weights(window).items():
            stack = stacks[stack_index]
            row = states.setdefault(stack.tid, {}).setdefault(stack.state, {})
            row[index] = row.get(index, 0) + weight  # type: ignore[assignment]
    return states


def _fold_per_window(profile: Profile, folder: _Folder) -> None:
    """Every (window, stack) cell through its stack's plan: what the series need."""
    plans: dict[int, _StackPlan] = {}
    for index, window in enumerate(profile.windows):
        for stack_index, count in window.counts.items():
            plan = plans.get(stack_index)
            if plan is None:
                plan = plans[stack_index] = folder.plan(stack_index)
            folder.add_state(plan, index, count)
            folder.add(plan, count)
            folder.add_series(plan, index, count)


def _fold_totals(profile: Profile, folder: _Folder) -> None:
    """Without series only the thread states are per window: each cell adds to its stack's
    state row and to the stack's total, and each stack's plan is applied once, to its total.

    A plan touches every function on its stack, so applying it per cell cost windows x
    stacks x depth updates (issue 15); this costs windows x stacks plus stacks x depth.
    Stacks are planned in the order they first appear in, as the per-window fold plans
    them, so every dict of the table is filled in the same order (sort ties stay put).
    """
    stacks = profile.stacks
    states = folder.table.states
    # Per stack, its (thread, state) row of table.states, found when the stack is first seen.
    rows: list[Series | None] = [None] * len(stacks)
    totals = [0] * len(stacks)
    seen: list[int] = []  # stack indexes in order of first appearance (zero counts too)
    for index, window in enumerate(profile.windows):
        for stack_index, count in window.counts.items():
            row = rows[stack_index]
            if row is None:
                stack = stacks[stack_index]
                row = rows[stack_index] = states.setdefault(stack.tid, {}).setdefault(
                    stack.state, {}
                )
                seen.append(stack_index)
            row[index] = row.get(index, 0) + count
            totals[stack_index] += count
    for stack_index in seen:
        folder.add(folder.plan(stack_index), totals[stack_index])


class _StackPlan(NamedTuple):  # a tuple: made once per stack, and cheaper to make
    tid: int
    label: str
    state: ThreadState
    counts: bool  # toward shares
    functions: Collection[int]  # distinct functions on the stack, as ids (none if filtered out)
    leaf: int  # the function on top, -1 if filtered out
    watch_total: tuple[str, ...]
    watch_self: tuple[str, ...]


class _Folder:
    """Per stack, what it contributes (its plan), and the sums of the plans applied.

    Stacks share most of their frames, so a frame's function (per thread label) and whether
    it matches each watched name are worked out once per frame, not once per stack and
    frame. Functions are counted by id in a list while folding, and keyed by FunctionKey
    once at the end (`finish`): hashing a key tuple on every update was most of the cost.
    Ids are handed out in the order functions are first counted, which is the order the
    table's dicts were filled in when they were updated directly.
    """

    def __init__(
        self,
        profile: Profile,
        table: WindowTable,
        lines: bool,
        allowed: set[int] | None,
        watch_names: tuple[str, ...],
        ordered: bool,
    ) -> None:
        self.profile = profile
        self.table = table
        self.lines = lines
        self.allowed = allowed
        self.keys: list[FunctionKey] = []  # function id -> key
        self.ids: dict[FunctionKey, int] = {}
        self.by_frame: dict[str | None, dict[int, int]] = {}  # thread -> frame index -> id
        self.total: list[int] = []  # function id -> count
        self.self_: dict[int, int] = {}  # function id -> count, in order of first count
        frames = profile.frames
        # Matching reads only the frame's name: each distinct name is tested once.
        names = {f.name for f in frames} if watch_names else set()
        self.watch: list[tuple[str, frozenset[int]]] = []
        for name in watch_names:
            hits = {n for n in names if function_name_matches(name, n)}
            self.watch.append((name, frozenset(i for i, f in enumerate(frames) if f.name in hits)))
        self.watched = frozenset().union(*(hits for _, hits in self.watch))
        self.labels: dict[int, str] = {}
        # The series are filled in the order functions sit on a stack (root first); totals
        # need only each function once, which a set gives for less.
        self.distinct: Callable[[Iterable[int]], Collection[int]] = (
            _ordered if ordered else frozenset
        )

    def _function(self, frame: Frame, thread: str | None) -> int:
        key = function_key(frame, self.lines, thread)
        fid = self.ids.get(key)
        if fid is None:
            fid = self.ids[key] = len(self.keys)
            self.keys.append(key)
            self.total.append(0)
        return fid

    def plan(self, index: int) -> _StackPlan:
        profile, table = self.profile, self.table
        stack = profile.stacks[index]
        tid, state, ids = stack.tid, stack.state, stack.frames
        label = self.labels.get(tid)
        if label is None:
            label = self.labels[tid] = thread_label(profile, tid)
        counts = counts_toward_shares(table.mode, state)
        if not counts or not ids or (self.allowed is not None and tid not in self.allowed):
            return _StackPlan(tid, label, state, counts, (), -1, (), ())
        thread = label if table.per_thread else None
        known = self.by_frame.get(thread)
        if known is None:
            known = self.by_frame[thread] = {}
        try:
            functions = self.distinct(map(known.__getitem__, ids))
        except KeyError:  # frames not met before: ids handed out root first
            frames = profile.frames
            for i in ids:
                if i not in known:
                    known[i] = self._function(frames[i], thread)
            functions = self.distinct(map(known.__getitem__, ids))
        in_stack = []
        on_top = []
        if not self.watched.isdisjoint(ids):
            for name, hits in self.watch:
                if not hits.isdisjoint(ids):
                    in_stack.append(name)
                    table.watch_matched[name].update(
                        profile.frames[i].name for i in ids if i in hits
                    )
                    if ids[-1] in hits:
                        on_top.append(name)
        return _StackPlan(
            tid, label, state, counts, functions, known[ids[-1]], tuple(in_stack), tuple(on_top)
        )

    def add_state(self, plan: _StackPlan, window: int, count: int) -> None:
        row = self.table.states.setdefault(plan.tid, {}).setdefault(plan.state, {})
        row[window] = row.get(window, 0) + count

    def add(self, plan: _StackPlan, count: int) -> None:
        if not plan.counts:
            return
        table = self.table
        table.samples += count
        table.held[plan.tid] = table.held.get(plan.tid, 0) + count
        total = self.total
        for fid in plan.functions:
            total[fid] += count
        if plan.leaf >= 0:
            self.self_[plan.leaf] = self.self_.get(plan.leaf, 0) + count
        for name in plan.watch_total:
            table.watch_total[name] += count
        for name in plan.watch_self:
            table.watch_self[name] += count

    def add_series(self, plan: _StackPlan, window: int, count: int) -> None:
        if not plan.counts:
            return
        table, keys = self.table, self.keys
        for fid in plan.functions:
            _bump(table.total_series, keys[fid], window, count)  # type: ignore[arg-type]
        for name in plan.watch_total:
            _bump(table.watch_series, name, window, count)  # type: ignore[arg-type]
        _bump(table.held_series, plan.label, window, count)  # type: ignore[arg-type]
        gil = table.gil_series
        assert gil is not None
        gil[window] = gil.get(window, 0) + count

    def finish(self) -> None:
        keys = self.keys
        self.table.total = dict(zip(keys, self.total, strict=True))
        self.table.self_ = {keys[fid]: count for fid, count in self.self_.items()}


def _ordered(functions: Iterable[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(functions))


def _bump(series: dict[object, Series], key: object, window: int, count: int) -> None:
    row = series.get(key)
    if row is None:
        row = series[key] = {}
    row[window] = row.get(window, 0) + count
