"""The compare views of functions judged on their cost to the loop per unit of work."""

from __future__ import annotations

import math
import os

from rich.table import Table
from rich.text import Text

from gilprof.analysis.compare import IMPROVED, REGRESSED, UNCHANGED, Comparison, ShareChange
from gilprof.renderers.compare_cells import STYLE, break_name, figures_width
from gilprof.stats import Difference


def _share_cells(d: Difference) -> list[str]:
    return [f"{100 * d.before:.1f}%", f"{100 * d.after:.1f}%", f"{100 * d.delta:+.1f}"]


def cost_cells(d: Difference) -> list[str]:
    ci = "n/a" if not math.isfinite(d.low) else f"[{d.low:+.2f}, {d.high:+.2f}]"
    return [f"{d.before:.2f}", f"{d.after:.2f}", f"{d.delta:+.2f}", ci]


_SHORT = {UNCHANGED: "n.s."}  # the narrow table's verdicts (a legend line says what n.s. is)


def function_cell(row: ShareChange, was: str | None = None, room: int | None = None) -> Text:
    """The whole name, never cut (it wraps at its qualname's dots to `room` columns), its
    file, the name it replaced (--rename) and why the row is folded."""
    cell = Text(row.name if room is None else break_name(row.name, room))
    if row.file:
        cell.append(f" ({row.file})", style="dim")
    if was:
        cell.append(f"\n  (was {was})", style="dim italic")
    if row.folded:
        cell.append(f"\n  ({row.folded})", style="dim italic")
    return cell


def cost_table(
    title: str,
    rows: list[ShareChange],
    unit: str,
    *,
    wide: bool = False,
    width: int | None = None,
) -> Table:
    """The function column takes what the figures leave in `width` terminal columns; a name
    longer than that breaks at its qualname's dots (fold only inside a part longer than the
    column); the figures never wrap. Narrow (the default): the cost columns only; wide: the
    share of wall time beside."""
    columns = [f"ms/{unit}\nbefore", "\nafter", "\nchange", "\n95% CI (ms)", "\nverdict"]
    columns += ["share\nbefore", "\nafter", "\nchange (pp)"] if wide else []
    figures = []
    for row in rows:
        cells = cost_cells(row.cost) if row.cost else ["0", "0", "", ""]
        cells.append(row.verdict if wide else _SHORT.get(row.verdict, row.verdict))
        figures.append(cells + (_share_cells(row.total) if wide else []))
    room = None if width is None else max(16, width - figures_width(columns, figures) - 4)
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("function", overflow="fold", ratio=1, min_width=16)
    for name in columns:
        table.add_column(
            name, justify="left" if "verdict" in name else "right", no_wrap=True, ratio=None
        )
    for row, cells in zip(rows, figures, strict=True):
        verdict = Text(cells[4], style=STYLE.get(row.verdict, ""))
        table.add_row(function_cell(row, row.was, room), *cells[:4], verdict, *cells[5:])
    return table


COST_LEGEND = (
    "n.s.: no significant change (the 95% interval holds 0). Rows whose own cost changed "
    "lead; loop frames and the callers whose change is a callee's follow, marked. "
    "--wide adds the share of wall time."
)


def md_cost_rows(rows: list[ShareChange], unit: str) -> list[str]:
    lines = [
        f"| | ms/{unit} before | after | change | 95% CI (ms) | verdict | share before | after |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        label = f"`{r.name}`" + (f" ({os.path.basename(r.file)})" if r.file else "")
        label += f" *({r.folded})*" if r.folded else ""
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
