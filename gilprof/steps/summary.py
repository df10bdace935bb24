"""StepRecords -> per-rank step-time statistics (only per-rank `array('d')` columns are kept,
so a 100 MB log costs a few MB).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gilprof.errors import InputError
from gilprof.stats import quantiles
from gilprof.steps.parse import (
    DEVICE_BELOW_HOST,
    DEVICE_NEAR_HOST,
    SCHEMA,
    UNKNOWN,
    StepRecord,
    StepStream,
    read_step_logs,
)

# The first iterations of a serving engine include CUDA graph capture, autotuning and
# allocator warm-up: they are not the steady state that a budget or verdict is about.
DEFAULT_SKIP_WARMUP = 3


@dataclass(frozen=True)
class Percentiles:
    p50: float
    p90: float
    p99: float
    mean: float

    @classmethod
    def of(cls, values: array[float]) -> Percentiles | None:
        if len(values) == 0:
            return None
        p50, p90, p99 = quantiles(values, (0.5, 0.9, 0.99))
        return cls(p50, p90, p99, math.fsum(values) / len(values))

    def to_json(self) -> dict[str, float]:
        return {
            "p50": round(self.p50, 4),
            "p90": round(self.p90, 4),
            "p99": round(self.p99, 4),
            "mean": round(self.mean, 4),
        }


_NULL_PERCENTILES = {"p50": None, "p90": None, "p99": None, "mean": None}


@dataclass(frozen=True)
class RankSteps:
    """One rank's step statistics; `host_ms`/`device_ms` are the kept raw values in log order.

    `device_ms` holds only the iterations that logged a device time (not the first one).
    """

    rank: int
    iterations: int
    device_iterations: int
    first_iteration: int
    last_iteration: int
    host_step_ms: Percentiles
    device_step_ms: Percentiles | None
    scheduled_requests_p50: float | None
    device_host_ratio: float | None
    reading: str  # DEVICE_NEAR_HOST, DEVICE_BELOW_HOST or UNKNOWN: the ratio, not a verdict
    host_ms: array[float] = field(repr=False, compare=False)
    device_ms: array[float] = field(repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "iterations": self.iterations,
            "device_iterations": self.device_iterations,
            "first_iteration": self.first_iteration,
            "last_iteration": self.last_iteration,
            "host_step_ms": self.host_step_ms.to_json(),
            "device_step_ms": (
                self.device_step_ms.to_json() if self.device_step_ms else dict(_NULL_PERCENTILES)
            ),
            "num_scheduled_requests_p50": self.scheduled_requests_p50,
            "device_host_ratio": (
                None if self.device_host_ratio is None else round(self.device_host_ratio, 4)
            ),
            "reading": self.reading,
        }


@dataclass(frozen=True)
class StepsReport:
    ranks: tuple[RankSteps, ...]
    skipped_lines: int
    records_read: int
    ranks_seen: tuple[int, ...]
    skip_warmup: int
    near_ratio: float

    def rank(self, rank: int) -> RankSteps | None:
        return next((steps for steps in self.ranks if steps.rank == rank), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "skipped_lines": self.skipped_lines,
            "records_read": self.records_read,
            "skip_warmup": self.skip_warmup,
            "near_ratio": self.near_ratio,
            "ranks": [steps.to_json() for steps in self.ranks],
        }


def classify(
    host_p50: float, device_p50: float | None, near_ratio: float
) -> tuple[str, float | None]:
    """What the ratio of the medians shows, and the ratio; never host- or device-bound.

    Under TensorRT-LLM's overlap scheduler the device step is timed between CUDA events
    recorded at the loop tops, so a slow host drags the device step up to the host step;
    but a loop paced by the device also logs device ~ host. The log alone cannot tell the
    two apart: the loop thread's time can (gilprof.analysis.verdict).
    """
    if device_p50 is None or host_p50 <= 0:
        return UNKNOWN, None
    ratio = device_p50 / host_p50
    return (DEVICE_NEAR_HOST if ratio >= near_ratio else DEVICE_BELOW_HOST), ratio


class _RankColumns:
    __slots__ = ("device", "first_iteration", "host", "last_iteration", "scheduled", "seen")

    def __init__(self) -> None:
        self.seen = 0
        self.host: array[float] = array("d")
        self.device: array[float] = array("d")
        # Batch sizes are small integers: a histogram keeps memory flat.
        self.scheduled: dict[int, int] = {}
        self.first_iteration = -1
        self.last_iteration = -1


def _histogram_median(histogram: dict[int, int]) -> float | None:
    total = sum(histogram.values())
    if total == 0:
        return None
    # Same interpolation as stats.quantile at q = 0.5 over the expanded values.
    wanted = ((total - 1) // 2, total // 2)
    found: list[int] = []
    cumulative = 0
    for value in sorted(histogram):
        cumulative += histogram[value]
        while len(found) < 2 and wanted[len(found)] < cumulative:
            found.append(value)
    return (found[0] + found[1]) / 2.0


def summarize(
    records: Iterable[StepRecord],
    *,
    skip_warmup: int = 0,
    rank: int | None = None,
    near_ratio: float = 0.9,
    skipped_lines: int | None = None,
) -> StepsReport:
    """Per-rank percentiles and ratio readings; consumes `records` once.

    `skip_warmup` drops each rank's first N records in log order. `skipped_lines` defaults
    to the count of a StepStream after it has been consumed.
    """
    if skip_warmup < 0:
        raise ValueError("skip_warmup must be >= 0")
    columns: dict[int, _RankColumns] = {}
    ranks_seen: set[int] = set()
    records_read = 0
    for record in records:
        records_read += 1
        ranks_seen.add(record.rank)
        if rank is not None and record.rank != rank:
            continue
        column = columns.get(record.rank)
        if column is None:
            column = columns[record.rank] = _RankColumns()
        column.seen += 1
        if column.seen <= skip_warmup:
            continue
        column.host.append(record.host_step_ms)
        if record.device_step_ms is not None:
            column.device.append(record.device_step_ms)
        if record.num_scheduled_requests is not None:
            count = record.num_scheduled_requests
            column.scheduled[count] = column.scheduled.get(count, 0) + 1
        if column.first_iteration < 0:
            column.first_iteration = record.iteration
        column.last_iteration = record.iteration

    summaries = []
    for rank_id in sorted(columns):
        column = columns[rank_id]
        host = Percentiles.of(column.host)
        if host is None:
            continue
        device = Percentiles.of(column.device)
        reading, ratio = classify(host.p50, device.p50 if device else None, near_ratio)
        summaries.append(
            RankSteps(
                rank=rank_id,
                iterations=len(column.host),
                device_iterations=len(column.device),
                first_iteration=column.first_iteration,
                last_iteration=column.last_iteration,
                host_step_ms=host,
                device_step_ms=device,
                scheduled_requests_p50=_histogram_median(column.scheduled),
                device_host_ratio=ratio,
                reading=reading,
                host_ms=column.host,
                device_ms=column.device,
            )
        )
    if skipped_lines is None:
        skipped_lines = records.skipped_lines if isinstance(records, StepStream) else 0
    return StepsReport(
        ranks=tuple(summaries),
        skipped_lines=skipped_lines,
        records_read=records_read,
        ranks_seen=tuple(sorted(ranks_seen)),
        skip_warmup=skip_warmup,
        near_ratio=near_ratio,
    )


def _describe_paths(paths: list[str]) -> str:
    shown = ", ".join("<stdin>" if path == "-" else path for path in paths[:3])
    return shown if len(paths) <= 3 else f"{shown} and {len(paths) - 3} more"


def summarize_logs(
    paths: Iterable[str | Path],
    *,
    skip_warmup: int = 0,
    rank: int | None = None,
    near_ratio: float = 0.9,
) -> StepsReport:
    """Read and summarize logs; InputError when nothing usable is left to summarize."""
    stream = read_step_logs(paths)
    report = summarize(stream, skip_warmup=skip_warmup, rank=rank, near_ratio=near_ratio)
    where = _describe_paths(stream.paths)
    if report.records_read == 0:
        raise InputError(
            f"no iteration lines found in {where} ({stream.skipped_lines} lines skipped)"
        )
    if not report.ranks:
        if rank is not None and rank not in report.ranks_seen:
            seen = ", ".join(str(r) for r in report.ranks_seen)
            raise InputError(f"no iteration lines for rank {rank} in {where}; ranks logged: {seen}")
        raise InputError(
            f"all {report.records_read} iteration lines in {where} fall within the first "
            f"{skip_warmup} per rank dropped as warm-up"
        )
    return report


def rank_steps(path: str, rank: int, skip_warmup: int) -> RankSteps:
    """One rank's step statistics from one log; an error when the log has none for it."""
    report = summarize_logs([path], skip_warmup=skip_warmup, rank=rank)
    steps = report.rank(rank)
    if steps is None:  # summarize_logs already raised for a missing rank
        raise InputError(f"{path}: no iterations for rank {rank}")
    return steps
