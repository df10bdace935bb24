"""Two profiles (and optionally two step logs) -> per-function changes with honest intervals.

Samples close in time are correlated (a function runs for many consecutive ticks), so a
naive binomial interval is far too narrow. Each profile is cut into its sampling windows,
regrouped into at most `max_batches` contiguous batches, and a share's variance is
estimated by batch means of the ratio estimator (gilprof.stats); the difference uses a
Welch t interval. Step-time medians use a moving-block bootstrap for the same reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from gilprof.analysis.attribution import DEFAULT_WATCH
from gilprof.analysis.empty import refuse_empty
from gilprof.analysis.per_step import CostComparison
from gilprof.analysis.table import Series, WindowTable, build_table
from gilprof.errors import UsageError
from gilprof.model import Mode, function_name_matches, is_wrapper_frame
from gilprof.profile import Profile
from gilprof.stats import Difference, batch_windows, median_difference_ci, ratio_difference_ci
from gilprof.steps import RankSteps

IMPROVED, REGRESSED, UNCHANGED = "improved", "regressed", "no significant change"
Key = tuple[str, str, int, "str | None"]


@dataclass(frozen=True)
class ShareChange:
    """One row: a function (or a thread, or the GIL) before and after."""

    name: str
    file: str
    thread: str | None
    total: Difference
    self_before: float
    self_after: float
    verdict: str
    # With step logs: the function's cost to the loop per unit of work (ms per step or per
    # request, gilprof.analysis.per_step); `verdict` is then judged on it, and
    # `share_verdict` keeps what the share of wall time alone said.
    cost: Difference | None = None
    share_verdict: str | None = None
    # With costs: why the row is folded below those whose own cost changed ("loop frame",
    # or "outer frame of NAME": its change is that of a function it always calls)
    folded: str | None = None
    was: str | None = None  # with costs: the name it had before (--rename)


@dataclass(frozen=True)
class StepsChange:
    rank: int
    host_p50: Difference
    device_p50: Difference | None
    host_p90_before: float
    host_p90_after: float
    reading_before: str  # the steps ratio reading (gilprof.steps), not a host/device verdict
    reading_after: str
    ratio_before: float | None
    ratio_after: float | None

    # Old names (before the reading replaced the log-only verdict), for existing readers.
    @property
    def verdict_before(self) -> str:
        return self.reading_before

    @property
    def verdict_after(self) -> str:
        return self.reading_after


@dataclass(frozen=True)
class Comparison:
    before_label: str
    after_label: str
    mode: Mode
    confidence: float
    utilization: ShareChange | None
    threads: tuple[ShareChange, ...]
    functions: tuple[ShareChange, ...]
    watch: tuple[ShareChange, ...]
    steps: StepsChange | None
    batches: tuple[int, int]
    costs: CostComparison | None = None  # per-unit costs to the loop (with step logs)
    renames: tuple[tuple[str, str], ...] = ()


def _is_pseudo(key: Key) -> bool:
    """The per-thread held and whole-GIL rows that _Side adds beside the functions."""
    return key[0] in ("<held>", "<gil>") and key[1] == ""


def verdict(diff: Difference) -> str:
    if not diff.significant:
        return UNCHANGED
    return IMPROVED if diff.delta < 0 else REGRESSED


class _Side:
    """A profile cut into batches of windows, with per-key sample counts per window.

    Function rows are re-keyed by file base name so profiles from different machines line
    up; "<held>" rows carry each thread's held samples and "<gil>" all GIL-held samples.
    """

    def __init__(
        self,
        profile: Profile,
        by_thread: bool,
        watch: Sequence[str],
        max_batches: int,
        renames: Mapping[str, str],
    ):
        table = build_table(profile, by_thread=by_thread, watch=watch, series=True)
        assert table.total_series is not None and table.held_series is not None
        self._windows = len(table.windows)
        self._ticks = table.window_ticks()
        self._series: dict[Key, Series] = {}
        for (name, file, line, thread), row in table.total_series.items():
            self._merge((renames.get(name, name), os.path.basename(file), line, thread), row)
        for label, row in table.held_series.items():
            self._merge(("<held>", "", 0, label), row)
        self._merge(("<gil>", "", 0, None), table.gil_series or {})
        self._watch = table.watch_series or {}
        self._self: dict[tuple[str, str, str | None], int] = {}
        for (name, file, _line, thread), count in table.self_.items():
            key = (renames.get(name, name), os.path.basename(file), thread)
            self._self[key] = self._self.get(key, 0) + count
        self.total_ticks = table.ticks
        self.keys: set[Key] = set(self._series)
        self.max_batches = max_batches
        self.batches = min(self._windows, max_batches)

    def _merge(self, key: Key, row: Series) -> None:
        into = self._series.setdefault(key, {})
        for window, count in row.items():
            into[window] = into.get(window, 0) + count

    def series(self, key: Key) -> tuple[list[float], list[float]]:
        nums = WindowTable.dense(self._series.get(key), self._windows)
        return batch_windows(nums, self._ticks, self.max_batches)

    def watch_series(self, name: str) -> tuple[list[float], list[float]]:
        nums = WindowTable.dense(self._watch.get(name), self._windows)
        return batch_windows(nums, self._ticks, self.max_batches)

    def self_share(self, key: tuple[str, str, str | None]) -> float:
        return self._self.get(key, 0) / self.total_ticks if self.total_ticks else 0.0


def _change(
    before: _Side,
    after: _Side,
    key: Key,
    confidence: float,
    name: str,
    file: str,
    thread: str | None,
) -> ShareChange:
    b_num, b_den = before.series(key)
    a_num, a_den = after.series(key)
    diff = ratio_difference_ci(b_num, b_den, a_num, a_den, confidence)
    skey = (key[0], key[1], key[3])
    return ShareChange(
        name, file, thread, diff, before.self_share(skey), after.self_share(skey), verdict(diff)
    )


def compare_profiles(
    before: Profile,
    after: Profile,
    *,
    by_thread: bool = False,
    watch: Iterable[str] = DEFAULT_WATCH,
    top: int | None = 30,
    confidence: float = 0.95,
    max_batches: int = 30,
    steps_before: RankSteps | None = None,
    steps_after: RankSteps | None = None,
    all_frames: bool = False,
    renames: Mapping[str, str] | None = None,
    costs: CostComparison | None = None,
) -> Comparison:
    """Per-function share changes. `renames` maps an old function name to the new one so
    a renamed hot spot is one row; with `costs` (per-unit costs to the loop, compare_costs
    on the same renames) a function row is improved/regressed on its cost per unit of work,
    not on its share of wall time, which also grows when the function simply ran more
    because the job did more work."""
    if before.sampling.mode is not after.sampling.mode:
        raise UsageError(
            f"cannot compare a {before.sampling.mode}-mode profile with a "
            f"{after.sampling.mode}-mode one"
        )
    for side, profile in (("before", before), ("after", after)):
        if not profile.windows or profile.sampling.ticks <= 0:
            raise UsageError(f"the {side} profile has no samples ({profile.label})")
        refuse_empty(profile, f"the {side} profile")
    watch_names = tuple(dict.fromkeys(watch))
    renames = dict(renames or {})
    b = _Side(before, by_thread, watch_names, max_batches, renames)
    a = _Side(after, by_thread, watch_names, max_batches, renames)

    gil_mode = before.sampling.mode.knows_gil
    utilization = None
    if gil_mode:
        utilization = _change(b, a, ("<gil>", "", 0, None), confidence, "GIL utilization", "", None)
    threads = tuple(
        sorted(
            (
                _change(b, a, key, confidence, key[3] or "?", "", key[3])
                for key in (b.keys | a.keys)
                if key[0] == "<held>" and key[1] == ""
            ),
            key=lambda c: -max(c.total.before, c.total.after),
        )
    )
    function_keys = [
        k
        for k in (b.keys | a.keys)
        if not _is_pseudo(k) and (all_frames or not is_wrapper_frame(k[0], k[1]))
    ]
    functions = sorted(
        (_change(b, a, key, confidence, key[0], key[1], key[3]) for key in function_keys),
        key=lambda c: (-max(c.total.before, c.total.after), c.name, c.file),
    )
    if costs is not None:
        functions = order_by_cost([_judged_on_cost(c, costs) for c in functions], costs)
    if top is not None:
        functions = functions[:top]
    watched = []
    for name in watch_names:
        diff = ratio_difference_ci(*b.watch_series(name), *a.watch_series(name), confidence)
        row = ShareChange(name, "", None, diff, 0.0, 0.0, verdict(diff))
        watched.append(row if costs is None else _watched_on_cost(row, costs))
    if costs is not None:  # a thread's held share grows when it does more work: not a verdict
        threads = tuple(
            replace(t, share_verdict=t.verdict, verdict=_SHARE_MOVED[t.verdict]) for t in threads
        )
    steps = None
    if steps_before is not None and steps_after is not None:
        steps = compare_steps(steps_before, steps_after, confidence)
    return Comparison(
        before.label,
        after.label,
        before.sampling.mode,
        confidence,
        utilization,
        threads,
        tuple(functions),
        tuple(watched),
        steps,
        (b.batches, a.batches),
        costs,
        tuple(sorted(renames.items())),
    )


_SHARE_MOVED = {IMPROVED: "share down", REGRESSED: "share up", UNCHANGED: UNCHANGED}


def _watched_on_cost(change: ShareChange, costs: CostComparison) -> ShareChange:
    """A watched name's cost: that of its costliest matching function (the outermost)."""
    matches = [c for c in costs.changes.values() if function_name_matches(change.name, c.name)]
    if not matches:
        return replace(change, share_verdict=change.verdict, verdict=UNCHANGED)
    found = max(matches, key=lambda c: max(c.per_step.before, c.per_step.after))
    cost = found.in_unit(costs.unit)
    return replace(
        change, cost=cost, share_verdict=change.verdict, verdict=verdict(cost), was=found.was
    )


def _judged_on_cost(change: ShareChange, costs: CostComparison) -> ShareChange:
    """The row's verdict from its cost per unit of work (0 on a side where it never cost
    the loop anything); the share's own verdict kept beside it."""
    found = costs.find(change.name, change.file)
    if found is None:
        return replace(change, share_verdict=change.verdict, verdict=UNCHANGED)
    cost = found.in_unit(costs.unit)
    return replace(
        change, cost=cost, share_verdict=change.verdict, verdict=verdict(cost), was=found.was
    )


def order_by_cost(rows: list[ShareChange], costs: CostComparison) -> list[ShareChange]:
    """The rows whose own cost changed lead; the loop's own frames, and the callers whose
    change is that of the changed functions they call, follow, marked (folded); then the
    rows of no significant change, costliest first.

    The functions the change under review rewrote (renamed by --rename OLD=NEW): when their
    cost changed they lead, and are never folded (their callees' change is theirs: the code
    that changed is theirs).

    A caller's own change is its change less that of the highest changed functions below it
    (those it encloses on every stack they were seen on); a caller whose own change is inside
    its change's interval is an outer frame of them. Leading rows: the loop's own time first
    (a function the loop only waits on moves after), the largest change first."""
    unit = costs.unit
    changed = {
        key: c
        for key, c in costs.changes.items()
        if c.in_unit(unit).significant and c.in_unit(unit).delta != 0
    }

    def below(key: tuple[str, str]) -> list[tuple[str, str]]:
        """The highest changed functions that `key` encloses."""
        inner = [g for g, c in changed.items() if key in c.enclosing]
        return [g for g in inner if not any(h in changed[g].enclosing for h in inner if h != g)]

    def fold(r: ShareChange) -> str | None:
        known = costs.find(r.name, r.file)
        if known is not None and known.loop_frame:
            return "loop frame"
        found = changed.get((r.name, r.file))
        if found is None or r.cost is None or r.was is not None:
            return None
        inner = below((r.name, r.file))
        if not inner:
            return None
        own = r.cost.delta - sum(changed[g].in_unit(unit).delta for g in inner)
        half = (r.cost.high - r.cost.low) / 2
        if abs(own) > half:
            return None
        inner.sort(key=lambda g: -abs(changed[g].in_unit(unit).delta))
        names = ", ".join(g[0] + (f" ({g[1]})" if g[0] == r.name else "") for g in inner[:2]) + (
            ", ..." if len(inner) > 2 else ""
        )
        return f"outer frame of {names}"

    def own(r: ShareChange) -> float:
        found = costs.find(r.name, r.file)
        return abs(found.own_delta_ms) if found is not None else 0.0

    def change(r: ShareChange) -> float:
        return abs(r.cost.delta) if r.cost is not None else 0.0

    marked = [replace(r, folded=fold(r)) for r in rows]
    leading = [r for r in marked if r.folded is None and r.cost and r.cost.significant]
    quiet = [r for r in marked if r.folded is None and not (r.cost and r.cost.significant)]
    folded = [r for r in marked if r.folded is not None]
    leading.sort(
        key=lambda r: (
            r.was is None,
            own(r) < OWN_FLOOR * change(r),
            -change(r),
            r.name,
            r.file,
        )
    )
    quiet.sort(
        key=lambda r: (
            -max(r.cost.before, r.cost.after) if r.cost else 0.0,
            -max(r.total.before, r.total.after),
            r.name,
            r.file,
        )
    )
    folded.sort(key=lambda r: (r.folded != "loop frame", -change(r), r.name, r.file))
    return leading + folded + quiet


OWN_FLOOR = 0.5
"""A leading row whose change is less than half the loop's own time (most of it a wait
blamed on another thread) comes after those of the loop's own time."""


def compare_steps(before: RankSteps, after: RankSteps, confidence: float = 0.95) -> StepsChange:
    # 1000 resamples: the bootstrap costs resamples x n log n, and logs can be long.
    host = median_difference_ci(
        list(before.host_ms), list(after.host_ms), confidence=confidence, resamples=1000
    )
    device = None
    if len(before.device_ms) and len(after.device_ms):
        device = median_difference_ci(
            list(before.device_ms), list(after.device_ms), confidence=confidence, resamples=1000
        )
    return StepsChange(
        before.rank,
        host,
        device,
        before.host_step_ms.p90,
        after.host_step_ms.p90,
        before.reading,
        after.reading,
        before.device_host_ratio,
        after.device_host_ratio,
    )
