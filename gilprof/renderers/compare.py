"""Renderers of kind "compare": table, json, markdown (a PR comment)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text

from gilprof.analysis.compare import (
    IMPROVED,
    REGRESSED,
    UNCHANGED,
    Comparison,
    ShareChange,
    StepsChange,
)
from gilprof.analysis.verdict import Verdict
from gilprof.analysis.waits import WaitComparison
from gilprof.profile import Profile
from gilprof.renderers import compare_classes, register
from gilprof.renderers._rich import console_width, to_text
from gilprof.renderers.compare_cells import (
    difference_json,
    format_pct,
    ms_cells,
    share_cells,
    share_table,
    verdict_text,
)
from gilprof.renderers.compare_costs import COST_LEGEND, cost_table, md_cost_rows, unit_label
from gilprof.renderers.compare_waits import waits_dict, waits_markdown, waits_tables

# /2: steps.verdict_before/after became the host/device verdicts of the loop thread (objects,
# null without profiles' evidence); the log-only ratio reading is steps.reading_before/after.
COMPARE_SCHEMA = "gilprof.analysis.compare/2"


def _row_dict(c: ShareChange) -> dict[str, Any]:
    return {
        "function": c.name,
        "file": c.file,
        "thread": c.thread,
        "total_share": difference_json(c.total),
        "self_share_before": c.self_before,
        "self_share_after": c.self_after,
        "verdict": c.verdict,
        "cost_ms": difference_json(c.cost) if c.cost else None,
        "share_verdict": c.share_verdict,
    }


Verdicts = tuple["Verdict | None", "Verdict | None"]


@dataclass(frozen=True)
class CompareView:
    """What every compare renderer is given: the comparison and what is shown beside it."""

    comparison: Comparison
    verdicts: Verdicts = (None, None)  # the loop's host/device verdict, before and after
    waits: WaitComparison | None = None  # who waits for whom, before and after
    profiles: tuple[Profile, Profile] | None = None  # the diff flame graph (html)
    steps: tuple[Any, Any] | None = None  # the step-time chart (html): iteration logs' steps
    wide: bool = False  # every column in a terminal table (markdown and html have all)


def _steps_dict(s: StepsChange, verdicts: Verdicts) -> dict[str, Any]:
    return {
        "rank": s.rank,
        "host_step_ms_p50": difference_json(s.host_p50),
        "device_step_ms_p50": difference_json(s.device_p50) if s.device_p50 else None,
        "host_step_ms_p90": {"before": s.host_p90_before, "after": s.host_p90_after},
        "reading_before": s.reading_before,
        "reading_after": s.reading_after,
        "verdict_before": verdicts[0].to_json() if verdicts[0] else None,
        "verdict_after": verdicts[1].to_json() if verdicts[1] else None,
        "device_host_ratio_before": s.ratio_before,
        "device_host_ratio_after": s.ratio_after,
        "step_split": [c.to_json() for c in compare_classes.part_changes(*verdicts)],
    }


def comparison_dict(c: Comparison, verdicts: Verdicts = (None, None)) -> dict[str, Any]:
    return {
        "schema": COMPARE_SCHEMA,
        "before": c.before_label,
        "after": c.after_label,
        "mode": str(c.mode),
        "confidence": c.confidence,
        "batches": list(c.batches),
        "utilization": difference_json(c.utilization.total) if c.utilization else None,
        "threads": [
            {"thread": t.name, "held_share": difference_json(t.total), "verdict": t.verdict}
            for t in c.threads
        ],
        "functions": [_row_dict(f) for f in c.functions],
        "watch": [
            {"function": w.name, "total_share": difference_json(w.total), "verdict": w.verdict}
            for w in c.watch
        ],
        "steps": _steps_dict(c.steps, verdicts) if c.steps else None,
        "cost_unit": c.costs.unit if c.costs else None,
        "renames": dict(c.renames),
    }


@register("compare", "json", extension=".json", description="machine-readable")
def render_json(view: CompareView, **_: Any) -> str:
    out = comparison_dict(view.comparison, view.verdicts)
    if view.waits is not None:
        out["waits"] = waits_dict(view.waits)
    return json.dumps(out, indent=2) + "\n"


def steps_verdict_line(s: StepsChange, verdicts: Verdicts = (None, None)) -> str:
    """Per side: the loop thread's verdict when there is one, else what the log's ratio shows."""

    def side(reading: str, ratio: float | None, verdict: Verdict | None) -> str:
        if verdict is not None:
            return verdict.headline
        text = reading + ("" if ratio is None else f" (device/host p50 {ratio:.2f})")
        return f"{text}; host- or device-bound needs a profile's loop thread"

    return (
        f"before: {side(s.reading_before, s.ratio_before, verdicts[0])}\n"
        f"after: {side(s.reading_after, s.ratio_after, verdicts[1])}"
    )


@register("compare", "table", extension=".txt", description="for a terminal")
def render_table(
    view: CompareView, *, color: bool = False, width: int | None = None, **_: Any
) -> str:
    """`color` and `width` are the terminal's; what to show is in `view`."""
    c, verdicts, waits, wide = view.comparison, view.verdicts, view.waits, view.wide
    out: list[Any] = [
        Text(
            f"before: {c.before_label}   after: {c.after_label}\n"
            f"{c.mode} mode, {100 * c.confidence:.0f}% intervals from batch means over "
            f"{c.batches[0]}/{c.batches[1]} windows"
        )
    ]
    layout: dict[str, Any] = {"wide": wide, "width": console_width(width)}
    if c.utilization:
        out.append(share_table("GIL", [c.utilization], "metric", **layout))
    if c.watch:
        out.append(
            share_table("Watched functions (total share)", list(c.watch), "function", **layout)
        )
    if c.threads:
        out.append(
            share_table(
                "Threads (held share)" if c.utilization else "Threads (sampled share)",
                list(c.threads),
                "thread",
                **layout,
            )
        )
    if c.steps:
        s = c.steps
        table = Table(title=f"Step times, rank {s.rank} (ms, median)", title_justify="left")
        for name in ("", "before", "after", "change", "rel", "95% CI"):
            table.add_column(name, justify="left" if not name else "right")
        table.add_row("host step p50", *ms_cells(s.host_p50))
        if s.device_p50:
            table.add_row("device step p50", *ms_cells(s.device_p50))
        table.add_row(
            "host step p90", f"{s.host_p90_before:.1f}", f"{s.host_p90_after:.1f}", "", "", ""
        )
        out += [table, Text(steps_verdict_line(s, verdicts))]
        by_class = compare_classes.table(compare_classes.part_changes(*verdicts))
        out += [by_class] if by_class is not None else []
    if waits is not None:
        out += waits_tables(waits, c.costs is not None, **layout)
    headline = unit_label(c)
    if headline and c.costs:
        unit = c.costs.unit
        out.append(Text(headline))
        out.append(
            cost_table(
                f"Functions (cost to the loop, ms per {unit})",
                list(c.functions),
                unit,
                wide=wide,
                width=layout["width"],
            )
        )
        out.append(Text(COST_LEGEND))
    else:
        out.append(share_table("Functions (total share)", list(c.functions), "function", **layout))
    if c.renames:
        out.append(Text("renamed: " + ", ".join(f"{a} -> {b}" for a, b in c.renames)))
    return to_text(out, color=color, width=width)


def _md_rows(rows: list[ShareChange]) -> list[str]:
    lines = [
        "| | before | after | change | rel | 95% CI (pp) | verdict |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        label = (
            f"`{r.name}`"
            + (f" ({os.path.basename(r.file)})" if r.file else "")
            + (f" [{r.thread}]" if r.thread and r.thread != r.name else "")
        )
        if r.share_verdict is not None and r.cost is None and r.file:
            # a function row judged on its cost per unit of work (the table above), not here
            shown = {IMPROVED: "share down", REGRESSED: "share up"}.get(r.share_verdict, UNCHANGED)
            lines.append(f"| {label} | " + " | ".join(share_cells(r.total)) + f" | {shown} |")
            continue
        mark = {IMPROVED: "✅ ", REGRESSED: "❌ "}.get(r.verdict, "")
        lines.append(
            f"| {label} | " + " | ".join(share_cells(r.total)) + f" | {mark}{verdict_text(r)} |"
        )
    return lines


@register("compare", "markdown", extension=".md", description="for a PR comment")
def render_markdown(view: CompareView, **_: Any) -> str:
    c, verdicts, waits = view.comparison, view.verdicts, view.waits
    lines = [
        "### gilprof compare",
        "",
        f"before: {c.before_label} · after: {c.after_label} · "
        f"{c.mode} mode · {100 * c.confidence:.0f}% intervals (batch means over "
        f"{c.batches[0]}/{c.batches[1]} windows)",
        "",
    ]
    if c.steps:
        s = c.steps
        lines += [
            f"**Step times, rank {s.rank}** (ms)",
            "",
            "| | before | after | change | rel | 95% CI |",
            "|---|---:|---:|---:|---:|---:|",
            "| host step p50 | " + " | ".join(ms_cells(s.host_p50)) + " |",
        ]
        if s.device_p50:
            lines.append("| device step p50 | " + " | ".join(ms_cells(s.device_p50)) + " |")
        lines += ["", *[f"- {line}" for line in steps_verdict_line(s, verdicts).splitlines()], ""]
        lines += compare_classes.markdown(compare_classes.part_changes(*verdicts))
    rows = ([c.utilization] if c.utilization else []) + list(c.watch)
    lines += ["**GIL and watched functions**", "", *_md_rows(rows), ""]
    lines += ["**Threads**", "", *_md_rows(list(c.threads)), ""]
    if waits is not None:
        lines += waits_markdown(waits, shares_only=c.costs is not None)
    headline = unit_label(c)
    if headline and c.costs:
        lines += [
            f"**Functions, cost to the loop in ms per {c.costs.unit}** ({headline})",
            "",
            *md_cost_rows(list(c.functions), c.costs.unit),
            "",
        ]
        if c.renames:
            lines += ["renamed: " + ", ".join(f"`{a}` -> `{b}`" for a, b in c.renames), ""]
    lines += [
        "<details><summary>Functions (share of wall time)</summary>",
        "",
        *_md_rows(list(c.functions)),
        "",
        "</details>",
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# The demo's plain-language summary (the opening of its report.md)

_PATTERNS = {  # watched function -> the lint rule that finds its pattern in other code
    "safe_broadcast": "GP001 (a sender unpickles the bytes it just pickled: a deep copy per call)",
    "_balance_requests_across_ranks": "GP002 (a copying getter read more than once per item)",
    "broadcast_sample_state": "GP004 (mpi4py's lowercase `bcast` with the root using the result)",
}


def _find(rows: tuple[ShareChange, ...], name: str) -> ShareChange | None:
    return next((r for r in rows if r.name == name), None)


def demo_summary(
    c: Comparison,
    verdicts: Verdicts,
    notes: dict[str, tuple[str, str | None]],
    profiles: tuple[Any, Any],
    logs: tuple[Any, Any],
) -> str:
    """What held the GIL, what changed, which fix applies, how to find it, what to run next."""
    before_path, after_path = (str(p) for p in profiles)
    held = []
    for w in c.watch:
        if w.total.before >= 0.01:
            held.append(
                f"`{w.name}` was on the GIL holder's stack {format_pct(w.total.before)} of the time"
            )
    busiest = max(c.threads, key=lambda t: t.total.before, default=None)
    lines = ["## What the demo found", ""]
    utilization = (
        f"Before the fix, some thread held rank 0's GIL {format_pct(c.utilization.total.before)} "
        "of the time"
        if c.utilization
        else "Before the fix"
    )
    lines.append(
        f"**What held the GIL.** {utilization}"
        + (
            f"; the busiest thread was `{busiest.name}` ({format_pct(busiest.total.before)})"
            if busiest
            else ""
        )
        + (": " + "; ".join(held) if held else "")
        + "."
    )
    changes = []
    for w in c.watch:
        if w.total.significant or max(w.total.before, w.total.after) >= 0.01:
            cost = (
                f"{w.cost.before:.1f} -> {w.cost.after:.1f} ms per step of the loop, "
                if w.cost
                else ""
            )
            changes.append(
                f"`{w.name}` {cost}{format_pct(w.total.before)} -> {format_pct(w.total.after)} of the GIL "
                f"({w.verdict})"
            )
    if c.steps:
        host = c.steps.host_p50
        changes.append(
            f"host step p50 {host.before:.1f} -> {host.after:.1f} ms"
            + ("" if host.relative is None else f" ({100 * host.relative:+.0f}%)")
        )
    lines += ["", "**What changed.** After the fix: " + "; ".join(changes) + "."]
    if any(verdicts):
        sides = [
            f"{side}: {v.headline}"
            for side, v in zip(("before", "after"), verdicts, strict=True)
            if v is not None
        ]
        lines += ["", "**Host- or device-bound.** " + "; ".join(sides) + "."]
        undecided = [
            (side, v)
            for side, v in zip(("before", "after"), verdicts, strict=True)
            if v is not None and v.command
        ]
        for side, v in undecided:
            # the verdict's own reason (a gil-mode profile is blind to device waits; a states
            # profile may be too short for its interval), not one cause for every mode
            lines.append(f"The {side} verdict: {v.reason}. To decide: {v.command}.")
    fixes = []
    for w in c.watch:
        why, fix = notes.get(w.name, ("", None))
        if fix and w.total.before >= 0.01:
            fixes.append(f"- `{w.name}`: {' '.join(why.split())} Reference fix: `{fix}`.")
    if fixes:
        lines += [
            "",
            "**The fix.** The after run uses these reference implementations from "
            "`gilprof.reference` (`implementation('after')`):",
            "",
            *fixes,
        ]
    rules = [f"- {_PATTERNS[w.name]} for `{w.name}`" for w in c.watch if w.name in _PATTERNS]
    lines += [
        "",
        "**Find the pattern in your own code.** `gilprof lint path/to/your/package` "
        "reports the anti-patterns these fixes remove, with the fix for each:",
        "",
        *rules,
    ]
    lines += [
        "",
        "**Next commands.**",
        "",
        f"    gilprof report {before_path} --by-thread         # who held the GIL, per thread",
        f"    gilprof report {before_path} --steps {logs[0]}   # the verdict, and what decides it",
        f"    gilprof compare {before_path} {after_path} --steps-before {logs[0]} "
        f"--steps-after {logs[1]}",
        f"    gilprof gate {after_path} --recipe disagg-gen-example   # the CI budgets",
        "    gilprof attach --rank 0 -d 20 -o rank0.json   # on your job, never paused: who "
        "waits for whom, and why each thread blocks",
        "",
    ]
    return "\n".join(lines)
