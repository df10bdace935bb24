"""The flight recorder's pure parts: its option syntax, the step-time trigger, the window ring.

`gilprof watch` samples for hours in short windows and keeps only the last minutes
(`WindowRing`); a trigger (`StepMonitor` on a followed iteration log, a signal, a deadline)
makes it write those minutes, plus the minute after, as one profile. The loop that drives
these is gilprof.sampling.flight.
"""

from __future__ import annotations

import re
import statistics
from array import array
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from gilprof.errors import UsageError
from gilprof.model import SamplingInfo, Target
from gilprof.profile import Counts, Profile, Runs, Window
from gilprof.sampling.backends.base import WindowResult

_SPAN_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|min|h)?\s*$")
_UNIT_S = {None: 1.0, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_TRIGGER_RE = re.compile(r"^\s*p50\s*>\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|x)?\s*$", re.IGNORECASE)
_CLOCK_RE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*$")


def parse_seconds(text: str, option: str) -> float:
    """`90`, `90s`, `5m`, `1.5h`, `500ms` -> seconds (a bare number is seconds)."""
    match = _SPAN_RE.match(text)
    if match is None:
        raise UsageError(f"{option} expects a duration such as 90, 90s, 5m or 1h, got {text!r}")
    return float(match.group(1)) * _UNIT_S[match.group(2) and match.group(2).lower()]


def parse_until(text: str, now: datetime) -> float:
    """--until: seconds from `now` to a local `HH:MM` (tomorrow when already past), or a
    duration (`3600`, `90m`)."""
    clock = _CLOCK_RE.match(text)
    if clock is None:
        return parse_seconds(text, "--until")
    hour, minute = int(clock.group(1)), int(clock.group(2))
    if hour > 23 or minute > 59:
        raise UsageError(f"--until expects HH:MM (00:00-23:59) or a duration, got {text!r}")
    at = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if at <= now:
        at += timedelta(days=1)
    return (at - now).total_seconds()


@dataclass(frozen=True)
class StepThreshold:
    """--trigger: host step p50 above `ms` milliseconds, or above `factor` x the baseline."""

    text: str
    ms: float | None = None
    factor: float | None = None

    def limit(self, baseline_p50: float | None) -> float | None:
        """The threshold in ms; None while a relative one still waits for its baseline."""
        if self.ms is not None:
            return self.ms
        return None if baseline_p50 is None or self.factor is None else baseline_p50 * self.factor


def parse_trigger(text: str) -> StepThreshold:
    """`p50>120` or `p50>120ms` (milliseconds), `p50>1.5x` (times the baseline p50)."""
    match = _TRIGGER_RE.match(text)
    if match is None:
        raise UsageError(
            f"--trigger expects p50>MS (e.g. p50>120) or p50>Fx (e.g. p50>1.5x), got {text!r}"
        )
    value, unit = float(match.group(1)), (match.group(2) or "ms").lower()
    if value <= 0 or (unit == "x" and value <= 1):
        raise UsageError(f"--trigger {text!r}: the threshold must be > 0 ms, or a factor > 1")
    if unit == "x":
        return StepThreshold(text.strip(), factor=value)
    return StepThreshold(text.strip(), ms=value)


@dataclass(frozen=True)
class StepFire:
    """The step trigger crossed its threshold: what it measured, and the log lines up to it."""

    p50_ms: float
    limit_ms: float
    detail: str
    lines: tuple[str, ...]


class StepMonitor:
    """Host step p50 over the last `over` iterations against a StepThreshold.

    A relative threshold takes its baseline from the iterations of the first `baseline_s`
    seconds (at least `over` of them). The trigger fires when the p50 crosses above the
    limit, then stays quiet until the p50 is back at or below it: one slow phase, one fire.
    """

    def __init__(
        self, threshold: StepThreshold, over: int, baseline_s: float, context: int = 5
    ) -> None:
        self.threshold = threshold
        self.over = over
        self.baseline_s = baseline_s
        self.recent: deque[float] = deque(maxlen=over)
        self.lines: deque[str] = deque(maxlen=context)
        self.baseline_p50: float | None = None
        self._baseline: list[float] = []
        self._started: float | None = None
        self._armed = True
        self.p50_ms: float | None = None

    @property
    def limit_ms(self) -> float | None:
        return self.threshold.limit(self.baseline_p50)

    def add(self, line: str, host_ms: float | None, now: float) -> StepFire | None:
        """One log line (`host_ms` None when it is not an iteration line) read at `now`."""
        self.lines.append(line.rstrip("\n"))
        if host_ms is None:
            return None
        if self._started is None:
            self._started = now
        if self.threshold.factor is not None and self.baseline_p50 is None:
            if now - self._started < self.baseline_s or len(self._baseline) < self.over:
                self._baseline.append(host_ms)
                return None
            self.baseline_p50 = statistics.median(self._baseline)
            self._baseline = []
        self.recent.append(host_ms)
        if len(self.recent) < self.over:
            return None
        self.p50_ms = statistics.median(self.recent)
        limit = self.limit_ms
        assert limit is not None
        if self.p50_ms <= limit:
            self._armed = True
            return None
        if not self._armed:
            return None
        self._armed = False
        base = "" if self.baseline_p50 is None else f" (baseline p50 {self.baseline_p50:.1f} ms)"
        return StepFire(
            self.p50_ms,
            limit,
            f"host step p50 over the last {self.over} iterations {self.p50_ms:.1f} ms > "
            f"{limit:.1f} ms{base}",
            tuple(self.lines),
        )

    def describe(self) -> str:
        if self.threshold.factor is not None and self.baseline_p50 is None:
            return f"baseline: {len(self._baseline)} iterations"
        p50 = "-" if self.p50_ms is None else f"{self.p50_ms:.1f}"
        return f"p50 {p50} ms (limit {self.limit_ms:.1f})"


class WindowRing:
    """The last windows of a long sampling run, on their own interned frames and stacks.

    Windows keep monotonic-clock times. Dropping old windows does not shrink the stacks
    table, which grows with every distinct stack ever seen; `compact` rebuilds it from the
    windows still kept once it holds many more stacks than they use, so memory is bounded
    by what the kept minutes hold.
    """

    COMPACT_MIN_STACKS = 4096

    def __init__(self, target: Target, sampling: SamplingInfo) -> None:
        self.profile = Profile(target, sampling)
        self.compactions = 0

    @property
    def windows(self) -> list[Window]:
        return self.profile.windows

    def add(self, result: WindowResult, ticks: float) -> Window:
        """Keep a sampled window (`ticks` sampling instants), on the monotonic clock."""
        window = self.profile.add_window(result.t0, result.t1, ticks, result.samples, result.spans)
        compact_window(window)
        return window

    def trim(self, before: float) -> None:
        """Drop the windows that ended before `before`; compact when the tables outgrew them."""
        windows = self.profile.windows
        drop = 0
        while drop < len(windows) and windows[drop].t1 < before:
            drop += 1
        if drop:
            del windows[:drop]
        if len(self.profile.stacks) > self.COMPACT_MIN_STACKS:
            used = _used_stacks(windows)
            if len(self.profile.stacks) > 2 * len(used) + self.COMPACT_MIN_STACKS // 2:
                self.profile = copy_windows(self.profile, windows, shift=0.0)
                self.compactions += 1

    def snapshot(self, start: float, end: float, sampling: SamplingInfo) -> Profile:
        """A new profile of the windows overlapping [start, end], times from its first
        window, with only the frames and stacks they use."""
        kept = [w for w in self.profile.windows if w.t1 > start and w.t0 < end]
        shift = kept[0].t0 if kept else start
        out = copy_windows(self.profile, kept, shift)
        out.sampling = sampling
        return out


def compact_window(window: Window) -> None:
    """Keep a window's counts and spans as arrays (Counts, Runs), as a loaded profile does:
    a span as a tuple of four objects costs ~150 bytes, in arrays 24. A recorder keeping
    5 minutes of a rank with a few threads holds ~10^5 spans, and this is most of its memory."""
    if isinstance(window.counts, dict):
        keys = array("q", window.counts.keys())
        window.counts = Counts(keys, array("q", window.counts.values()))
    if isinstance(window.spans, list):
        per_thread: dict[int, tuple[array[int], array[int], array[int]]] = {}
        for tid, stack, a, b in window.spans:
            arrays = per_thread.get(tid)
            if arrays is None:
                arrays = per_thread[tid] = (array("q"), array("q"), array("q"))
            arrays[0].append(stack)
            arrays[1].append(round(a * 1e6))
            arrays[2].append(round(b * 1e6))
        runs = Runs()
        for tid, (stacks, starts, ends) in per_thread.items():
            runs.add(tid, stacks, starts, ends)
        window.spans = runs


def _used_stacks(windows: Iterable[Window]) -> set[int]:
    used: set[int] = set()
    for window in windows:
        used.update(window.counts)
        used.update(stack for _tid, stack, _a, _b in window.spans)
    return used


def copy_windows(source: Profile, windows: list[Window], shift: float) -> Profile:
    """`windows` of `source` in a new profile, re-interned, times moved back by `shift`."""
    out = Profile(source.target, source.sampling)
    remap: dict[int, int] = {}

    def index_of(stack: int) -> int:
        new = remap.get(stack)
        if new is None:
            old = source.stacks[stack]
            new = remap[stack] = out.intern_stack(old.tid, old.state, source.stack_frames(stack))
            out.threads.setdefault(old.tid, source.threads.get(old.tid, ""))
        return new

    for window in windows:
        counts: dict[int, int] = {}
        for stack, count in window.counts.items():
            key = index_of(stack)
            counts[key] = counts.get(key, 0) + count
        spans = [(tid, index_of(k), a - shift, b - shift) for tid, k, a, b in window.spans]
        copied = Window(window.t0 - shift, window.t1 - shift, window.ticks, counts, spans)
        compact_window(copied)
        out.windows.append(copied)
    return out


def with_messages(sampling: SamplingInfo, messages: Iterable[str]) -> SamplingInfo:
    return replace(sampling, messages=(*sampling.messages, *messages))
