"""Two profiles (and optionally two step logs) -> per-function changes with honest intervals.

Samples close in time are correlated (a function runs for many consecutive ticks), so a
naive binomial interval is far too narrow. Each profile is cut into its sampling windows,
regrouped into at most `max_batches` contiguous batches, and a share's variance is
estimated by batch means of the ratio estimator (gilprof.stats); the difference uses a
Welch t interval. Step-time medians use a moving-block bootstrap for the same reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gilprof.analysis.attribution import DEFAULT_WATCH, thread_label, window_function_counts
from gilprof.errors import UsageError
from gilprof.model import Mode
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


@dataclass(frozen=True)
class StepsChange:
    rank: int
    host_p50: Difference
    device_p50: Difference | None
    host_p90_before: float
    host_p90_after: float
    verdict_before: str
    verdict_after: str
    ratio_before: float | None
    ratio_after: float | None


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


def _is_pseudo(key: Key) -> bool:
    """The per-thread held and whole-GIL rows that window_function_counts adds."""
    return key[0] in ("<held>", "<gil>") and key[1] == ""


def verdict(diff: Difference) -> str:
    if not diff.significant:
        return UNCHANGED
    return IMPROVED if diff.delta < 0 else REGRESSED


class _Side:
    """A profile cut into batches of windows, with per-key sample counts per batch."""

    def __init__(self, profile: Profile, by_thread: bool, watch: Sequence[str], max_batches: int):
        ticks, counts = window_function_counts(profile, by_thread=by_thread)
        watch_counts = _window_watch_counts(profile, watch)
        self_counts = _self_counts(profile, by_thread)
        self.total_ticks = sum(ticks)
        self.profile = profile
        self.keys: set[Key] = set().union(*counts) if counts else set()
        self._ticks = ticks
        self._counts = counts
        self._watch = watch_counts
        self._self = self_counts
        self.max_batches = max_batches
        self.batches = min(len(ticks), max_batches)

    def series(self, key: Key) -> tuple[list[float], list[float]]:
        nums = [float(c.get(key, 0)) for c in self._counts]
        return batch_windows(nums, self._ticks, self.max_batches)

    def watch_series(self, name: str) -> tuple[list[float], list[float]]:
        nums = [float(c.get(name, 0)) for c in self._watch]
        return batch_windows(nums, self._ticks, self.max_batches)

    def self_share(self, key: tuple[str, str, str | None]) -> float:
        return self._self.get(key, 0) / self.total_ticks if self.total_ticks else 0.0


def _window_watch_counts(profile: Profile, names: Sequence[str]) -> list[dict[str, int]]:
    hits: dict[int, tuple[str, ...]] = {}
    out = []
    for window in profile.windows:
        tally: dict[str, int] = {}
        for index, count in window.counts.items():
            matched = hits.get(index)
            if matched is None:
                frames = profile.stack_frames(index)
                matched = tuple(n for n in names if any(f.matches(n) for f in frames))
                hits[index] = matched
            for name in matched:
                tally[name] = tally.get(name, 0) + count
        out.append(tally)
    return out


def _self_counts(profile: Profile, by_thread: bool) -> dict[tuple[str, str, str | None], int]:
    per_thread = by_thread or not profile.sampling.mode.knows_gil
    out: dict[tuple[str, str, str | None], int] = {}
    for index, count in profile.total_counts().items():
        frames = profile.stack_frames(index)
        if not frames:
            continue
        thread = thread_label(profile, profile.stacks[index].tid) if per_thread else None
        key = (frames[-1].name, frames[-1].basename, thread)
        out[key] = out.get(key, 0) + count
    return out


def _change(before: _Side, after: _Side, key: Key, confidence: float, name: str,
            file: str, thread: str | None) -> ShareChange:
    b_num, b_den = before.series(key)
    a_num, a_den = after.series(key)
    diff = ratio_difference_ci(b_num, b_den, a_num, a_den, confidence)
    skey = (key[0], key[1], key[3])
    return ShareChange(name, file, thread, diff, before.self_share(skey), after.self_share(skey),
                       verdict(diff))


def compare_profiles(before: Profile, after: Profile, *, by_thread: bool = False,
                     watch: Iterable[str] = DEFAULT_WATCH, top: int | None = 30,
                     confidence: float = 0.95, max_batches: int = 30,
                     steps_before: RankSteps | None = None, steps_after: RankSteps | None = None,
                     ) -> Comparison:
    if before.sampling.mode is not after.sampling.mode:
        raise UsageError(f"cannot compare a {before.sampling.mode}-mode profile with a "
                         f"{after.sampling.mode}-mode one")
    for side, profile in (("before", before), ("after", after)):
        if not profile.windows or profile.sampling.ticks <= 0:
            raise UsageError(f"the {side} profile has no samples ({profile.label})")
    watch_names = tuple(dict.fromkeys(watch))
    b = _Side(before, by_thread, watch_names, max_batches)
    a = _Side(after, by_thread, watch_names, max_batches)

    gil_mode = before.sampling.mode.knows_gil
    utilization = None
    if gil_mode:
        utilization = _change(b, a, ("<gil>", "", 0, None), confidence, "GIL utilization", "", None)
    threads = tuple(sorted(
        (_change(b, a, key, confidence, key[3] or "?", "", key[3])
         for key in (b.keys | a.keys) if key[0] == "<held>" and key[1] == ""),
        key=lambda c: -max(c.total.before, c.total.after)))
    function_keys = [k for k in (b.keys | a.keys) if not _is_pseudo(k)]
    functions = sorted((_change(b, a, key, confidence, key[0], key[1], key[3])
                        for key in function_keys),
                       key=lambda c: (-max(c.total.before, c.total.after), c.name, c.file))
    if top is not None:
        functions = functions[:top]
    watched = []
    for name in watch_names:
        diff = ratio_difference_ci(*b.watch_series(name), *a.watch_series(name), confidence)
        watched.append(ShareChange(name, "", None, diff, 0.0, 0.0, verdict(diff)))
    steps = None
    if steps_before is not None and steps_after is not None:
        steps = compare_steps(steps_before, steps_after, confidence)
    return Comparison(before.label, after.label, before.sampling.mode, confidence, utilization,
                      threads, tuple(functions), tuple(watched), steps, (b.batches, a.batches))


def compare_steps(before: RankSteps, after: RankSteps, confidence: float = 0.95) -> StepsChange:
    # 1000 resamples: the bootstrap costs resamples x n log n, and logs can be long.
    host = median_difference_ci(list(before.host_ms), list(after.host_ms), confidence=confidence,
                                resamples=1000)
    device = None
    if len(before.device_ms) and len(after.device_ms):
        device = median_difference_ci(list(before.device_ms), list(after.device_ms),
                                      confidence=confidence, resamples=1000)
    return StepsChange(before.rank, host, device, before.host_step_ms.p90, after.host_step_ms.p90,
                       before.verdict, after.verdict, before.device_host_ratio,
                       after.device_host_ratio)
