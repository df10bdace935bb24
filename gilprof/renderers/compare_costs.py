"""The compare views of functions judged on their cost to the loop per unit of work."""

from __future__ import annotations

import math
import os

from rich.table import Table
from rich.text import Text

from gilprof.analysis.compare import IMPROVED, REGRESSED, Comparison, ShareChange
from gilprof.stats import Difference

_STYLE = {IMPROVED: "green", REGRESSED: "red"}


def _share_cells(d: Difference) -> list[str]:
    return [f"{100 * d.before:.1f}%", f"{100 * d.after:.1f}%", f"{100 * d.delta:+.1f}"]


def cost_cells(d: Difference) -> list[str]:
    ci = "n/a" if not math.isfinite(d.low) else f"[{d.low:+.2f}, {d.high:+.2f}]"
    return [f"{d.before:.2f}", f"{d.after:.2f}", f"{d.delta:+.2f}", ci]


def cost_table(title: str, rows: list[ShareChange], unit: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("function")
    for name in (f"ms/{unit} before", "after", "change", "95% CI (ms)", "verdict"):
        table.add_column(name, justify="left" if name == "verdict" else "right")
    for name in ("share before", "after", "change (pp)"):
        table.add_column(name, justify="right")
    for row in rows:
        label = row.name + (f" ({row.file})" if row.file else "")
        cost = row.cost
        cells = cost_cells(cost) if cost else ["0", "0", "", ""]
        share = _share_cells(row.total)
        table.add_row(
            label,
            *cells,
            Text(row.verdict, style=_STYLE.get(row.verdict, "")),
            share[0],
            share[1],
            share[2],
        )
    return table


def md_cost_rows(rows: list[ShareChange], unit: str) -> list[str]:
    lines = [
        f"| | ms/{unit} before | after | change | 95% CI (ms) | verdict | share before | after |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        label = f"`{r.name}`" + (f" ({os.path.basename(r.file)})" if r.file else "")
        mark = {IMPROVED: "✅ ", REGRESSED: "❌ "}.get(r.verdict, "")
        cells = cost_cells(r.cost) if r.cost else ["0", "0", "", ""]
        share = _share_cells(r.total)
        lines.append(
            f"| {label} | "
            + " | ".join(cells)
            + f" | {mark}{r.verdict} | {share[0]} | {share[1]} |"
        )
    return lines


def unit_label(c: Comparison) -> str | None:
    """The headline's unit: what improved/regressed was judged on."""
    if c.costs is None:
        return None
    unit = "ms per request" if c.costs.unit == "request" else "ms per step"
    loop = c.costs.threads[0]
    return (
        f"improved/regressed judged on each function's cost to the loop thread ({loop}) in "
        f"{unit}: its own time plus the loop's GIL wait blamed on it, per unit of work; the "
        "share of wall time is shown beside (a share grows when more work was done)"
    )
