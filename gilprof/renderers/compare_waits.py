"""The GIL-wait part of a comparison (gilprof.analysis.waits): each thread's wait share and
the largest blame cells before and after, with intervals; shared by compare's renderers."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from gilprof.analysis.waits import WaitComparison
from gilprof.renderers.compare_cells import difference_json, name_fits, share_cells
from gilprof.stats import Difference

_COLUMNS = ("before", "after", "change", "rel", "95% CI", "verdict")


# With step logs, compare judges functions on their cost to the loop per unit of work; a wait
# share of wall time also grows when more work was done, so here it only moves.
_MOVED = {"improved": "share down", "regressed": "share up"}


def _cells(d: Difference, verdict: str, shares_only: bool = False, rel: bool = True) -> list[str]:
    return [*share_cells(d, rel), _MOVED.get(verdict, verdict) if shares_only else verdict]


def waits_dict(w: WaitComparison) -> dict[str, Any]:
    return {
        "threads": [
            {"thread": t.thread, "wait_share": difference_json(t.wait), "verdict": t.verdict}
            for t in w.threads
        ],
        "blame": [
            {
                "waiter": b.waiter,
                "holder": b.holder,
                "holder_function": b.function,
                "holder_file": b.file,
                "share": difference_json(b.share),
                "verdict": b.verdict,
            }
            for b in w.blame
        ],
    }


def waits_tables(
    w: WaitComparison, shares_only: bool = False, wide: bool = False, width: int = 160
) -> list[Table]:
    """Terminal tables `width` columns wide. The figures never wrap; a name is kept whole on
    its line where the table fits that way (the verdict wraps at its words first). A blame
    row names its waiter and holder on one line, the holder's function and file on the next
    two, in one column: three name columns beside six figures were each a few letters wide at
    100 columns, cut mid-word."""
    columns = [name for name in _COLUMNS if wide or name != "rel"]  # as the share tables
    threads = [([t.thread], _cells(t.wait, t.verdict, shares_only, wide)) for t in w.threads]
    blame = [
        (
            [
                f"{b.waiter} <- {b.holder}",
                f"  in {b.function}",
                *([f"  ({b.file})"] if b.file else []),
            ],
            _cells(b.share, b.verdict, shares_only, wide),
        )
        for b in w.blame
    ]
    titles = (
        ("GIL wait per thread (share of wall)", "thread"),
        (
            "Blame: while WAITER waits, HOLDER holds the GIL in FUNCTION (share of wall)",
            "waiter <- holder",
        ),
    )
    return [
        _table(title, first, columns, rows, width)
        for (title, first), rows in zip(titles, (threads, blame), strict=True)
    ]


def _table(
    title: str, first: str, columns: list[str], rows: list[tuple[list[str], list[str]]], width: int
) -> Table:
    name_width = max([len(first), *(len(line) for lines, _ in rows for line in lines)])
    figures = [cells[:-1] for _, cells in rows]
    verdicts = [cells[-1] for _, cells in rows]
    table = Table(title=title, title_justify="left")
    table.add_column(first, no_wrap=name_fits(name_width, columns, figures, verdicts, width))
    for name in columns:
        verdict = name == "verdict"
        table.add_column(name, justify="left" if verdict else "right", no_wrap=not verdict)
    for lines, cells in rows:
        table.add_row("\n".join(lines), *cells)
    return table


def waits_markdown(w: WaitComparison, shares_only: bool = False) -> list[str]:
    head = "| " + " | ".join(_COLUMNS) + " |"
    rule = "|" + "---:|" * len(_COLUMNS)
    lines = ["**GIL wait per thread** (share of wall)", "", "| thread " + head, "|---" + rule]
    lines += [
        f"| {t.thread} | " + " | ".join(_cells(t.wait, t.verdict, shares_only)) + " |"
        for t in w.threads
    ]
    lines += ["", "**Blame** (while WAITER waits, HOLDER holds the GIL in FUNCTION)", ""]
    lines += ["| waiter | holder | function " + head, "|---|---|---" + rule]
    lines += [
        f"| {b.waiter} | {b.holder} | `{b.function}` | "
        + " | ".join(_cells(b.share, b.verdict, shares_only))
        + " |"
        for b in w.blame
    ]
    return [*lines, ""]
