"""Several ranks side by side, and rank-0 excess: what rank 0 does that the others do not.

The TensorRT-LLM change's story is a rank-0-only cost (the broadcast root, the ingress thread), so for each
function the useful number is rank 0's share minus the median share of the other ranks. Which rank
paces the job's collective, and on what, comes first (gilprof.analysis.straggler).

The watch list is the job's: the default watch list (DEFAULT_WATCH, the seed change's functions) is
shown only where one of its functions ran in some profile or a recipe or --watch names it; otherwise
its rows are left out and `watch_unseen` names them (no row of 0.0% for a function the job lacks).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gilprof.analysis.attribution import DEFAULT_WATCH, Attribution, attribute
from gilprof.analysis.straggler import Straggler, pacing_rank
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
    straggler: Straggler | None = None
    # default watch-list functions that ran in no profile, left out of `watch`
    watch_unseen: tuple[str, ...] = field(default_factory=tuple)


def _explicit(watch: Sequence[str], explicit: Iterable[str] | None) -> set[str]:
    """The watched names a recipe or --watch asked for. Not given: every name outside the
    default list, and a default name listed twice (cli watch_list puts the defaults first,
    then the recipe's names, then --watch)."""
    if explicit is not None:
        return set(explicit)
    out = {n for n in watch if n not in DEFAULT_WATCH}
    out |= {n for n in DEFAULT_WATCH if list(watch).count(n) > 1}
    return out


def compare_ranks(
    profiles: Sequence[Profile],
    *,
    top: int | None = 25,
    watch: Iterable[str] = DEFAULT_WATCH,
    reference_rank: int = 0,
    explicit: Iterable[str] | None = None,
    step_ms: float | Mapping[int, float] | None = None,
    loop_thread: str | None = None,
) -> RankComparison:
    """Side by side; `explicit`: watched names kept even where no profile ran them (default:
    see _explicit); `step_ms`: the mean host step (per rank) for ms per step."""
    if len(profiles) < 2:
        raise UsageError("side-by-side reports need at least two profiles")
    ordered = sorted(
        profiles,
        key=lambda p: (p.target.rank is None, p.target.rank or 0, p.target.hostname, p.target.pid),
    )
    listed = tuple(watch)
    watch_names = tuple(dict.fromkeys(listed))
    asked = _explicit(listed, explicit)
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
    seen = {w.function for a in attributions for w in a.watch if w.found}
    defaults_ran = any(n in seen for n in DEFAULT_WATCH)
    unseen = tuple(
        n for n in watch_names if n in DEFAULT_WATCH and not defaults_ran and n not in asked
    )
    watched = []
    for name in watch_names:
        if name in unseen:
            continue
        values = tuple(
            next(w.total_share for w in a.watch if w.function == name) for a in attributions
        )
        watched.append(RankRow(name, "", values, excess(values)))
    straggler = pacing_rank(ordered, watch=watch_names, step_ms=step_ms, loop_thread=loop_thread)
    return RankComparison(columns, reference, tuple(rows), tuple(watched), straggler, unseen)
