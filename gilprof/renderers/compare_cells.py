"""The cells and share tables of compare's terminal output: figures that never wrap, names
kept whole where the table fits, the verdict with the cost it was judged on."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from rich.table import Table
from rich.text import Text

from gilprof.analysis.compare import IMPROVED, REGRESSED, ShareChange
from gilprof.stats import Difference

STYLE = {IMPROVED: "green", REGRESSED: "red"}


def difference_json(d: Difference) -> dict[str, Any]:
    """A change as JSON: its fields, the interval as `ci_low`/`ci_high` (null where unbounded)."""
    out = asdict(d)
    for field, key in (("low", "ci_low"), ("high", "ci_high")):
        value = out.pop(field)
        out[key] = value if math.isfinite(value) else None
    return out


def format_pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def _pp(v: float) -> str:
    return "±inf" if not math.isfinite(v) else f"{100 * v:+.1f}"


def share_cells(d: Difference, rel: bool = True) -> list[str]:
    """before, after, change, the relative change (unless `rel` is False: a terminal
    without --wide), and the interval."""
    relative = "" if d.relative is None else f"{100 * d.relative:+.0f}%"
    return [
        format_pct(d.before),
        format_pct(d.after),
        f"{_pp(d.delta)} pp",
        *([relative] if rel else []),
        f"[{_pp(d.low)}, {_pp(d.high)}]",
    ]


def ms_cells(d: Difference) -> list[str]:
    rel = "" if d.relative is None else f"{100 * d.relative:+.1f}%"
    ci = "n/a" if not math.isfinite(d.low) else f"[{d.low:+.1f}, {d.high:+.1f}]"
    return [f"{d.before:.1f}", f"{d.after:.1f}", f"{d.delta:+.1f}", rel, ci]


def share_table(
    title: str, rows: list[ShareChange], first: str, *, wide: bool = True, width: int = 160
) -> Table:
    """One row per name: shares before/after, the change with its interval, the verdict.
    Narrow (`wide` False) leaves out the relative change. A name is kept whole on one line
    when the table still fits `width` columns that way; else it folds."""
    labels = [
        row.name
        + (f" ({row.file})" if row.file else "")
        + (f" [{row.thread}]" if row.thread and first == "function" else "")
        for row in rows
    ]
    columns = ("before", "after", "change", *(("rel",) if wide else ()), "95% CI (pp)", "verdict")
    cells = [share_cells(row.total, rel=wide) for row in rows]
    verdicts = [verdict_text(row, "\n") for row in rows]
    name_width = max((len(label) for label in labels), default=0)
    table = Table(title=title, title_justify="left")
    # Kept on one line (no_wrap), narrower columns give way first: the verdict wraps.
    table.add_column(first, no_wrap=name_fits(name_width, columns, cells, verdicts, width))
    for name in columns:
        table.add_column(name, justify="left" if name == "verdict" else "right")
    for row, label, figures_row, verdict in zip(rows, labels, cells, verdicts, strict=True):
        table.add_row(label, *figures_row, Text(verdict, style=STYLE.get(row.verdict, "")))
    return table


def name_fits(
    name_width: int,
    columns: Sequence[str],
    figures: Sequence[Sequence[str]],
    verdicts: Sequence[str],
    width: int,
) -> bool:
    """Whether a table of a name column `name_width` wide, figure columns (`columns` less the
    last, with rows of `figures`, none wrapping) and a last verdict column wrapped at its
    words fits `width` terminal columns with rich's borders and padding."""
    verdict_width = max([len(columns[-1]), *(len(w) for v in verdicts for w in v.split())])
    # the name's and the verdict's columns, 3 each for padding and border, and the last border
    used = name_width + figures_width(columns[:-1], figures) + verdict_width + 2 * 3 + 1
    return used <= width


def figures_width(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """The columns' width, none wrapping: each its widest header line or cell, plus rich's
    padding and border (3 a column)."""
    return sum(
        3 + max([*(len(line) for line in header.split("\n")), *(len(row[i]) for row in rows)])
        for i, header in enumerate(columns)
    )


def break_name(name: str, room: int) -> str:
    """`name` on lines of at most `room` characters, broken only before a dot of its
    qualname (`_balance_requests_across_ranks` / `.<locals>.<listcomp>`), never inside a
    part: a part longer than `room` keeps its own line, for the table to fold."""
    if len(name) <= room:
        return name
    lines = [""]
    for part in re.split(r"(?=\.)", name):
        if lines[-1] and len(lines[-1]) + len(part) > room:
            lines.append("")
        lines[-1] += part
    return "\n".join(lines)


def verdict_text(row: ShareChange, between: str = " ") -> str:
    """The verdict, with the cost per unit of work it was judged on when there is one
    (`between` them: a terminal table puts the cost on a line of its own)."""
    if row.cost is None:
        return row.verdict
    return f"{row.verdict}{between}({row.cost.before:.1f} -> {row.cost.after:.1f} ms)"
