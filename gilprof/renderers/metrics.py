"""Prometheus exposition of `gilprof watch --metrics`: the series, and a collector that
yields them from the latest immutable snapshot.

Each rank's recorder thread hands its last window to MetricsBoard (`window`), which reads it
(gilprof.analysis.live) and swaps a new Snapshot in with one assignment: a scrape reads
whichever snapshot is current and never takes a lock the samplers hold, so a slow or hung
scraper costs the samplers nothing and a scrape never sees half of an update.

Labels: job, host, rank, role, pid (every rank series), thread (per-thread series), and the
class, part, bound or function a series is split by. No command lines, no environment
values. A rank whose pid is gone is dropped from the next snapshot: no stale series.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    StateSetMetricFamily,
)
from prometheus_client.registry import Collector

from gilprof.analysis.live import LiveRules, RankReading, rank_reading
from gilprof.analysis.verdict import DEVICE, HOST, MIXED, PEERS, UNDETERMINED
from gilprof.profile import Profile
from gilprof.steps import StepParser, StepRecord

PROFILER_CPU = "gilprof_profiler_cpu_seconds_total"
RANK_LABELS = ("job", "host", "rank", "role", "pid")
BOUNDS = (HOST, DEVICE, PEERS, MIXED, UNDETERMINED)
# host step histogram buckets, seconds
STEP_BUCKETS = (0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0)

# name, type, labels beyond the rank's, help: every series (docs/metrics.md and --help list them)
SERIES: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("gilprof_rank_up", "gauge", (), "1 while the rank is followed (its pid runs)"),
    ("gilprof_window_seconds", "gauge", (), "Length of the window the readings cover"),
    (
        "gilprof_thread_held_ratio",
        "gauge",
        ("thread",),
        "Share of the thread's time holding the GIL",
    ),
    ("gilprof_thread_gil_wait_ratio", "gauge", ("thread",), "Share waiting for the GIL"),
    (
        "gilprof_thread_native_ratio",
        "gauge",
        ("thread", "class"),
        "Share in native code without the GIL, by native class",
    ),
    ("gilprof_thread_blocked_ratio", "gauge", ("thread", "class"), "Share blocked, by wait class"),
    (
        "gilprof_thread_idle_ratio",
        "gauge",
        ("thread",),
        "Share blocked in all (the sum of blocked_ratio)",
    ),
    (
        "gilprof_loop_ratio",
        "gauge",
        ("thread", "part"),
        "The step loop's split: share of its time per part",
    ),
    (
        "gilprof_loop_step_seconds",
        "gauge",
        ("thread", "part"),
        "The step loop's split in seconds per step (part share x mean host step)",
    ),
    (
        "gilprof_verdict",
        "stateset",
        ("thread",),
        "The loop's verdict (host, device, peers, mixed, undetermined)",
    ),
    (
        "gilprof_function_step_seconds",
        "gauge",
        ("function",),
        "A watched function's cost to the loop, seconds per step",
    ),
    ("gilprof_host_step_seconds", "histogram", (), "Host step time from the rank's iteration log"),
    ("gilprof_sampler_ticks_total", "counter", (), "Sampling ticks the reader took"),
    ("gilprof_sampler_ticks_lost_total", "counter", (), "Ticks expected at the rate but not taken"),
    ("gilprof_sampler_windows_total", "counter", (), "Windows sampled"),
    ("gilprof_reader_cpu_seconds_total", "counter", (), "CPU seconds of the thread-state reader"),
    (
        "gilprof_profiler_cpu_seconds_total",
        "counter",
        ("who",),
        "CPU seconds of gilprof itself (who=self) and its sampler children (who=children)",
    ),
)


@dataclass(frozen=True)
class RankKey:
    job: str
    host: str
    rank: str
    role: str
    pid: str

    @property
    def labels(self) -> list[str]:
        return [self.job, self.host, self.rank, self.role, self.pid]


@dataclass(frozen=True)
class RankSnapshot:
    key: RankKey
    reading: RankReading | None
    ticks: float = 0.0
    ticks_lost: float = 0.0
    windows: int = 0
    reader_cpu_s: float = 0.0
    step_buckets: tuple[int, ...] = (0,) * (len(STEP_BUCKETS) + 1)  # last: +Inf
    step_sum_s: float = 0.0


@dataclass(frozen=True)
class Snapshot:
    ranks: tuple[RankSnapshot, ...] = ()
    cpu_self_s: float = 0.0
    cpu_children_s: float = 0.0


def _family(name: str, kind: str, extra: tuple[str, ...], doc: str) -> Metric:
    # the profiler's own CPU is the watch's, not a rank's
    labels = list(extra) if name == PROFILER_CPU else [*RANK_LABELS, *extra]
    if kind == "counter":
        return CounterMetricFamily(name.removesuffix("_total"), doc, labels=labels)
    if kind == "histogram":
        return HistogramMetricFamily(name, doc, labels=labels)
    if kind == "stateset":
        return StateSetMetricFamily(name, doc, labels=labels)
    return GaugeMetricFamily(name, doc, labels=labels)


def families(snapshot: Snapshot) -> list[Metric]:
    """Every series of the snapshot (the exposition, in SERIES order)."""
    # the families' own types (Gauge-, Counter-, Histogram-, StateSetMetricFamily)
    fam: dict[str, Any] = {
        name: _family(name, kind, extra, doc) for name, kind, extra, doc in SERIES
    }
    for rank in snapshot.ranks:
        base = rank.key.labels
        fam["gilprof_rank_up"].add_metric(base, 1.0)
        fam["gilprof_sampler_ticks_total"].add_metric(base, rank.ticks)
        fam["gilprof_sampler_ticks_lost_total"].add_metric(base, rank.ticks_lost)
        fam["gilprof_sampler_windows_total"].add_metric(base, float(rank.windows))
        fam["gilprof_reader_cpu_seconds_total"].add_metric(base, rank.reader_cpu_s)
        cumulative, buckets = 0, []
        for bound, count in zip((*STEP_BUCKETS, float("inf")), rank.step_buckets, strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else f"{bound:g}", float(cumulative)))
        fam["gilprof_host_step_seconds"].add_metric(base, buckets, rank.step_sum_s)
        reading = rank.reading
        if reading is None:
            continue
        fam["gilprof_window_seconds"].add_metric(base, reading.seconds)
        for t in reading.threads:
            at = [*base, t.name]
            fam["gilprof_thread_held_ratio"].add_metric(at, t.held)
            if t.waiting is not None:
                fam["gilprof_thread_gil_wait_ratio"].add_metric(at, t.waiting)
            if t.idle is not None:
                fam["gilprof_thread_idle_ratio"].add_metric(at, t.idle)
            for cls, share in t.native:
                fam["gilprof_thread_native_ratio"].add_metric([*at, cls], share)
            for cls, share in t.blocked:
                fam["gilprof_thread_blocked_ratio"].add_metric([*at, cls], share)
        loop = reading.loop
        if loop is None:
            continue
        at = [*base, loop.thread]
        for part, share in loop.split:
            fam["gilprof_loop_ratio"].add_metric([*at, part], share)
            if loop.step_ms is not None:
                fam["gilprof_loop_step_seconds"].add_metric([*at, part], share * loop.step_ms / 1e3)
        fam["gilprof_verdict"].add_metric(at, {b: b == loop.bound for b in BOUNDS})
        for function, ms in loop.functions:
            fam["gilprof_function_step_seconds"].add_metric([*base, function], ms / 1e3)
    fam[PROFILER_CPU].add_metric(["self"], snapshot.cpu_self_s)
    fam[PROFILER_CPU].add_metric(["children"], snapshot.cpu_children_s)
    return list(fam.values())


class SnapshotCollector(Collector):
    """Yields the series of the current snapshot; `swap` replaces it (one assignment)."""

    def __init__(self) -> None:
        self._snapshot = Snapshot()
        # the series of one snapshot, built once: scrapes between two windows (every 1 s
        # against a 2 s window) share them (one tuple, read and replaced in one step each)
        self._built: tuple[Snapshot, list[Metric]] | None = None

    def swap(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def collect(self) -> Iterator[Metric]:
        snapshot, built = self._snapshot, self._built
        if built is None or built[0] is not snapshot:
            built = (snapshot, families(snapshot))
            self._built = built
        yield from built[1]


@dataclass
class _Rank:
    key: RankKey
    snap: RankSnapshot
    steps: deque[tuple[float, StepRecord]] = field(default_factory=deque)
    read_at: float = -float("inf")  # monotonic clock of the last reading


class MetricsBoard:
    """The watch's side: per-rank state, updated from the recorder threads, published as a
    new snapshot after each window (the lock is the board's; scrapes never take it)."""

    def __init__(self, collector: SnapshotCollector, rules: LiveRules, window_s: float) -> None:
        self.collector = collector
        self.rules = rules
        self.window_s = window_s
        self._lock = threading.Lock()
        self._ranks: dict[str, _Rank] = {}
        self._parser = StepParser()

    def follow(self, key: RankKey) -> None:
        with self._lock:
            self._ranks[key.pid] = _Rank(key, RankSnapshot(key, None))
            self._publish()

    def forget(self, pid: int) -> None:
        with self._lock:
            self._ranks.pop(str(pid), None)
            self._publish()

    def step_line(self, pid: int, line: str) -> None:
        record = self._parser.parse_line(line)
        if record is None:
            return
        with self._lock:
            rank = self._ranks.get(str(pid))
            if rank is None:
                return
            rank.steps.append((time.monotonic(), record))
            seconds = record.host_step_ms / 1e3
            index = next((i for i, b in enumerate(STEP_BUCKETS) if seconds <= b), len(STEP_BUCKETS))
            buckets = list(rank.snap.step_buckets)
            buckets[index] += 1
            rank.snap = replace(
                rank.snap, step_buckets=tuple(buckets), step_sum_s=rank.snap.step_sum_s + seconds
            )

    def due(self, pid: int) -> bool:
        """Whether the rank's reading is a metrics window old: each reading covers the
        window since the last, and the windows between only add to the counters (a reading
        costs more than a window did; read every half window it cost +0.55% of a core for
        4 ranks, docs/metrics.md)."""
        rank = self._ranks.get(str(pid))
        return rank is not None and time.monotonic() - rank.read_at >= self.window_s

    def window(
        self,
        pid: int,
        profile: Profile | None,
        ticks: float,
        expected: float,
        reader_cpu_s: float,
    ) -> None:
        """A rank's window: its counters; with `profile` (its last --metrics-window, when
        `due`), a new reading. Then publish a new snapshot."""
        with self._lock:
            rank = self._ranks.get(str(pid))
            if rank is None:
                return
            cutoff = time.monotonic() - self.window_s
            while rank.steps and rank.steps[0][0] < cutoff:
                rank.steps.popleft()
            records = [r for _, r in rank.steps]
        number = int(rank.key.rank) if rank.key.rank.isdigit() else 0
        reading = rank.snap.reading
        if profile is not None:
            reading = rank_reading(profile, records, self.rules, number)
            rank.read_at = time.monotonic()
        with self._lock:
            if str(pid) not in self._ranks:
                return
            snap = rank.snap
            rank.snap = replace(
                snap,
                reading=reading,
                ticks=snap.ticks + ticks,
                ticks_lost=snap.ticks_lost + max(0.0, expected - ticks),
                windows=snap.windows + 1,
                reader_cpu_s=snap.reader_cpu_s + reader_cpu_s,
            )
            self._publish()

    def _publish(self) -> None:
        times = os.times()
        self.collector.swap(
            Snapshot(
                tuple(r.snap for r in self._ranks.values()),
                times.user + times.system,
                times.children_user + times.children_system,
            )
        )


def series_help() -> str:
    """One line per series, for --help and docs/metrics.md."""
    return "\n".join(f"  {name} ({kind})" for name, kind, _, _ in SERIES)


def series_table(rows: Sequence[tuple[str, str, tuple[str, ...], str]] = SERIES) -> str:
    lines = [
        "| series | type | labels beyond job, host, rank, role, pid | meaning |",
        "|---|---|---|---|",
    ]
    for name, kind, extra, doc in rows:
        extras = ", ".join(extra) or "-"
        if name == PROFILER_CPU:
            extras = "who (no rank labels)"
        lines.append(f"| `{name}` | {kind} | {extras} | {doc} |")
    return "\n".join(lines)
