"""Renderers of kind "ranks": several profiles side by side with rank-0 excess."""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table
from rich.text import Text

from gilprof.analysis.ranks import RankComparison, RankRow
from gilprof.analysis.straggler import Straggler, words
from gilprof.renderers import register
from gilprof.renderers._rich import pct, to_text


def _column_name(c: Any) -> str:
    return f"rank {'?' if c.rank is None else c.rank}" + (f"@{c.hostname}" if c.hostname else "")


def _estimate(e: Any) -> dict[str, Any] | None:
    if e is None:
        return None
    has = e.dof > 0
    return {"value": e.value, "low": e.low if has else None, "high": e.high if has else None}


def _pacing_json(s: Straggler | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "rank": s.pacing,
        "determined": s.determined,
        "sentence": s.sentence,
        "shorten": s.shorten,
        "component": s.component,
        "ranks": [
            {
                "rank": lp.rank,
                "thread": lp.thread,
                "chosen_by": lp.chosen_by,
                "step_ms": lp.step_ms,
                "peer_wait": _estimate(lp.peers),
                "note": lp.note,
                "split": [
                    {
                        "part": c.key,
                        "words": c.words,
                        "share": c.share,
                        "interval": _estimate(c.estimate),
                        "ms_per_step": c.ms,
                        "evidence": c.evidence,
                    }
                    for c in lp.components
                ],
            }
            for lp in s.loops
        ],
    }


def _pacing_lines(s: Straggler | None) -> list[Any]:
    if s is None:
        return []
    return [Text(s.sentence, style="bold"), Text(s.shorten)]


def _split_table(s: Straggler | None) -> Table | None:
    if s is None or not any(lp.components for lp in s.loops):
        return None
    ms = all(lp.step_ms is not None for lp in s.loops if lp.components)
    unit = "ms per step" if ms else "share of the loop thread's time"
    table = Table(title=f"Each rank's loop step, {unit}", title_justify="left")
    table.add_column("part")
    for lp in s.loops:
        head = f"rank {'?' if lp.rank is None else lp.rank}"
        table.add_column(head + (f" ({lp.thread})" if lp.thread else ""), justify="right")
    keys = list(dict.fromkeys(c.key for lp in s.loops for c in lp.components))
    for key in keys:
        cells = []
        for lp in s.loops:
            c = next((c for c in lp.components if c.key == key), None)
            if c is None:
                cells.append("" if lp.components else "n/a")
            elif ms and c.ms is not None:
                cells.append(f"{c.ms:.1f}")
            else:
                cells.append(pct(c.share))
        table.add_row(words(key), *cells)
    return table


@register("ranks", "json", extension=".json", description="machine-readable")
def render_json(r: RankComparison, **_: Any) -> str:
    def row(x: RankRow) -> dict[str, Any]:
        return {
            "function": x.function,
            "file": x.file,
            "total_share": list(x.shares),
            "rank0_excess": x.excess,
        }

    return (
        json.dumps(
            {
                "schema": "gilprof.analysis.ranks/2",
                "pacing": _pacing_json(r.straggler),
                "reference_rank": r.columns[r.reference].rank,
                "columns": [
                    {
                        "rank": c.rank,
                        "hostname": c.hostname,
                        "pid": c.pid,
                        "utilization": c.utilization,
                        "samples": c.samples,
                        "partial": c.partial,
                    }
                    for c in r.columns
                ],
                "watch": [row(w) for w in r.watch],
                "watch_unseen": list(r.watch_unseen),
                "functions": [row(f) for f in r.rows],
            },
            indent=2,
        )
        + "\n"
    )


def _table(title: str, r: RankComparison, rows: tuple[RankRow, ...]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("function")
    for c in r.columns:
        table.add_column(_column_name(c), justify="right")
    table.add_column(f"excess of {_column_name(r.columns[r.reference])}", justify="right")
    for row in rows:
        label = row.function + (f" ({row.file})" if row.file else "")
        excess = "" if row.excess is None else f"{100 * row.excess:+.1f} pp"
        table.add_row(label, *(pct(s) for s in row.shares), excess)
    return table


@register("ranks", "table", extension=".txt", description="for a terminal")
def render_table(
    r: RankComparison, *, color: bool = False, width: int | None = None, **_: Any
) -> str:
    util = "  ".join(f"{_column_name(c)}: {pct(c.utilization)}" for c in r.columns)
    out: list[Any] = [*_pacing_lines(r.straggler)]
    split = _split_table(r.straggler)
    if split is not None:
        out.append(split)
    out.append(Text(f"GIL utilization  {util}", style="bold"))
    if any(c.partial for c in r.columns):
        out.append(Text("some profiles are PARTIAL", style="yellow"))
    if r.watch:
        out.append(_table("Watched functions (total share)", r, r.watch))
    if r.watch_unseen:
        out.append(Text(_unseen(r)))
    out.append(
        _table("Functions by rank-0 excess (share minus median of the other ranks)", r, r.rows)
    )
    return to_text(out, color=color, width=width)


def _unseen(r: RankComparison) -> str:
    return (
        f"watch list: {', '.join(r.watch_unseen)} ran in none of these profiles (left out; "
        "--watch FUNC or a recipe names the job's own)"
    )


@register("ranks", "markdown", extension=".md", description="for a PR comment")
def render_markdown(r: RankComparison, **_: Any) -> str:
    head = "| function | " + " | ".join(_column_name(c) for c in r.columns) + " | rank-0 excess |"
    sep = "|---|" + "---:|" * (len(r.columns) + 1)
    lines = ["### gilprof: ranks side by side", ""]
    if r.straggler is not None:
        lines += [r.straggler.sentence, "", r.straggler.shorten, ""]
    if r.watch_unseen:
        lines += [_unseen(r), ""]
    lines += [head, sep]
    for row in (*r.watch, *r.rows):
        excess = "" if row.excess is None else f"{100 * row.excess:+.1f} pp"
        lines.append(
            f"| `{row.function}` | " + " | ".join(pct(s) for s in row.shares) + f" | {excess} |"
        )
    return "\n".join(lines) + "\n"
