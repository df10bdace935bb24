"""Renderers of kind "ranks": several profiles side by side with rank-0 excess."""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table
from rich.text import Text

from gilprof.analysis.ranks import RankComparison, RankRow
from gilprof.renderers import register
from gilprof.renderers._rich import pct, to_text


def _column_name(c: Any) -> str:
    return f"rank {'?' if c.rank is None else c.rank}" + (f"@{c.hostname}" if c.hostname else "")


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
                "schema": "gilprof.analysis.ranks/1",
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
    out: list[Any] = [Text(f"GIL utilization  {util}", style="bold")]
    if any(c.partial for c in r.columns):
        out.append(Text("some profiles are PARTIAL", style="yellow"))
    out.append(_table("Watched functions (total share)", r, r.watch))
    out.append(
        _table("Functions by rank-0 excess (share minus median of the other ranks)", r, r.rows)
    )
    return to_text(out, color=color, width=width)


@register("ranks", "markdown", extension=".md", description="for a PR comment")
def render_markdown(r: RankComparison, **_: Any) -> str:
    head = "| function | " + " | ".join(_column_name(c) for c in r.columns) + " | rank-0 excess |"
    sep = "|---|" + "---:|" * (len(r.columns) + 1)
    lines = ["### gilprof: ranks side by side", "", head, sep]
    for row in (*r.watch, *r.rows):
        excess = "" if row.excess is None else f"{100 * row.excess:+.1f} pp"
        lines.append(
            f"| `{row.function}` | " + " | ".join(pct(s) for s in row.shares) + f" | {excess} |"
        )
    return "\n".join(lines) + "\n"
