"""Several ranks side by side, and rank-0 excess: what rank 0 does that the others do not.

The TensorRT-LLM change's story is a rank-0-only cost (the broadcast root, the ingress thread), so for each
function the useful number is rank 0's share minus the median share of the other ranks.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gilprof.analysis.attribution import DEFAULT_WATCH, Attribution, attribute
from gilprof.errors import UsageError
from gilprof.profile import Profile


@dataclass(frozen=True)
class RankColumn:
    label: str
    rank: int | None
    hostname: str
    pid: int
    utilization: float | None
    samples: int
    partial: bool


@dataclass(frozen=True)
class RankRow:
    function: str
    file: str  # base name
    shares: tuple[float, ...]  # total share per column
    excess: float | None  # reference column minus median of the others


@dataclass(frozen=True)
class RankComparison:
    columns: tuple[RankColumn, ...]
    reference: int  # index of the reference column (rank 0 when present)
    rows: tuple[RankRow, ...]
    watch: tuple[RankRow, ...]


def compare_ranks(
    profiles: Sequence[Profile],
    *,
    top: int | None = 25,
    watch: Iterable[str] = DEFAULT_WATCH,
    reference_rank: int = 0,
) -> RankComparison:
    if len(profiles) < 2:
        raise UsageError("side-by-side reports need at least two profiles")
    ordered = sorted(
        profiles,
        key=lambda p: (p.target.rank is None, p.target.rank or 0, p.target.hostname, p.target.pid),
    )
    watch_names = tuple(dict.fromkeys(watch))
    attributions: list[Attribution] = [attribute(p, watch=watch_names) for p in ordered]
    columns = tuple(
        RankColumn(
            p.label,
            p.target.rank,
            p.target.hostname,
            p.target.pid,
            a.utilization,
            a.samples,
            p.sampling.partial,
        )
        for p, a in zip(ordered, attributions, strict=True)
    )
    reference = next((i for i, c in enumerate(columns) if c.rank == reference_rank), 0)

    shares: dict[tuple[str, str], list[float]] = {}
    for column, a in enumerate(attributions):
        for f in a.functions:
            row = shares.setdefault((f.key.name, f.key.basename), [0.0] * len(columns))
            row[column] += f.total_share

    def excess(values: Sequence[float]) -> float | None:
        others = [v for i, v in enumerate(values) if i != reference]
        return values[reference] - statistics.median(others) if others else None

    rows = sorted(
        (RankRow(name, file, tuple(v), excess(v)) for (name, file), v in shares.items()),
        key=lambda r: (-(r.excess or 0.0), -max(r.shares), r.function),
    )
    if top is not None:
        rows = rows[:top]
    watched = []
    for name in watch_names:
        values = tuple(
            next(w.total_share for w in a.watch if w.function == name) for a in attributions
        )
        watched.append(RankRow(name, "", values, excess(values)))
    return RankComparison(columns, reference, tuple(rows), tuple(watched))
