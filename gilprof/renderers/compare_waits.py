"""The GIL-wait part of a comparison (gilprof.analysis.waits): each thread's wait share and
the largest blame cells before and after, with intervals; shared by compare's renderers."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from gilprof.analysis.waits import WaitComparison
from gilprof.renderers.compare_cells import difference_json, share_cells
from gilprof.stats import Difference

_COLUMNS = ("before", "after", "change", "rel", "95% CI", "verdict")


# With step logs, compare judges functions on their cost to the loop per unit of work; a wait
# share of wall time also grows when more work was done, so here it only moves.
_MOVED = {"improved": "share down", "regressed": "share up"}


def _cells(d: Difference, verdict: str, shares_only: bool = False) -> list[str]:
    return [*share_cells(d), _MOVED.get(verdict, verdict) if shares_only else verdict]


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


def waits_tables(w: WaitComparison, shares_only: bool = False) -> list[Table]:
    threads = Table(title="GIL wait per thread (share of wall)", title_justify="left")
    threads.add_column("thread")
    for name in _COLUMNS:
        threads.add_column(name, justify="right")
    for t in w.threads:
        threads.add_row(t.thread, *_cells(t.wait, t.verdict, shares_only))
    blame = Table(
        title="Blame: while WAITER waits, HOLDER holds the GIL in FUNCTION (share of wall)",
        title_justify="left",
    )
    for name in ("waiter", "holder", "function"):
        blame.add_column(name)
    for name in _COLUMNS:
        blame.add_column(name, justify="right")
    for b in w.blame:
        where = f"{b.function} ({b.file})" if b.file else b.function
        blame.add_row(b.waiter, b.holder, where, *_cells(b.share, b.verdict, shares_only))
    return [threads, blame]


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
