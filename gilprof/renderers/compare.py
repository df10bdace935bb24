"""Renderers of kind "compare": table, json, markdown (a PR comment)."""

from __future__ import annotations

import json
import math
import os
from typing import Any

from rich.table import Table
from rich.text import Text

from gilprof.analysis.compare import IMPROVED, REGRESSED, Comparison, ShareChange, StepsChange
from gilprof.renderers import register
from gilprof.renderers._rich import to_text
from gilprof.stats import Difference

COMPARE_SCHEMA = "gilprof.analysis.compare/1"
_STYLE = {IMPROVED: "green", REGRESSED: "red"}


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


def _diff_dict(d: Difference) -> dict[str, Any]:
    return {"before": d.before, "after": d.after, "delta": d.delta, "ci_low": _num(d.low),
            "ci_high": _num(d.high), "relative": d.relative, "significant": d.significant}


def _row_dict(c: ShareChange) -> dict[str, Any]:
    return {"function": c.name, "file": c.file, "thread": c.thread,
            "total_share": _diff_dict(c.total), "self_share_before": c.self_before,
            "self_share_after": c.self_after, "verdict": c.verdict}


def _steps_dict(s: StepsChange) -> dict[str, Any]:
    return {"rank": s.rank, "host_step_ms_p50": _diff_dict(s.host_p50),
            "device_step_ms_p50": _diff_dict(s.device_p50) if s.device_p50 else None,
            "host_step_ms_p90": {"before": s.host_p90_before, "after": s.host_p90_after},
            "verdict_before": s.verdict_before, "verdict_after": s.verdict_after,
            "device_host_ratio_before": s.ratio_before, "device_host_ratio_after": s.ratio_after}


def comparison_dict(c: Comparison) -> dict[str, Any]:
    return {
        "schema": COMPARE_SCHEMA, "before": c.before_label, "after": c.after_label,
        "mode": str(c.mode), "confidence": c.confidence, "batches": list(c.batches),
        "utilization": _diff_dict(c.utilization.total) if c.utilization else None,
        "threads": [{"thread": t.name, "held_share": _diff_dict(t.total), "verdict": t.verdict}
                    for t in c.threads],
        "functions": [_row_dict(f) for f in c.functions],
        "watch": [{"function": w.name, "total_share": _diff_dict(w.total), "verdict": w.verdict}
                  for w in c.watch],
        "steps": _steps_dict(c.steps) if c.steps else None,
    }


@register("compare", "json", extension=".json", description="machine-readable")
def render_json(c: Comparison, **_: Any) -> str:
    return json.dumps(comparison_dict(c), indent=2) + "\n"


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def _pp(v: float) -> str:
    return "±inf" if not math.isfinite(v) else f"{100 * v:+.1f}"


def share_cells(d: Difference) -> list[str]:
    rel = "" if d.relative is None else f"{100 * d.relative:+.0f}%"
    return [_pct(d.before), _pct(d.after), f"{_pp(d.delta)} pp", rel,
            f"[{_pp(d.low)}, {_pp(d.high)}]"]


def ms_cells(d: Difference) -> list[str]:
    rel = "" if d.relative is None else f"{100 * d.relative:+.1f}%"
    ci = "n/a" if not math.isfinite(d.low) else f"[{d.low:+.1f}, {d.high:+.1f}]"
    return [f"{d.before:.1f}", f"{d.after:.1f}", f"{d.delta:+.1f}", rel, ci]


def _share_table(title: str, rows: list[ShareChange], first: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column(first)
    for name in ("before", "after", "change", "rel", "95% CI (pp)", "verdict"):
        table.add_column(name, justify="left" if name == "verdict" else "right")
    for row in rows:
        label = row.name + (f" ({row.file})" if row.file else "") + \
            (f" [{row.thread}]" if row.thread and first == "function" else "")
        table.add_row(label, *share_cells(row.total), Text(row.verdict, style=_STYLE.get(row.verdict, "")))
    return table


def steps_verdict_line(s: StepsChange) -> str:
    def side(verdict: str, ratio: float | None) -> str:
        return verdict + ("" if ratio is None else f" (device/host p50 {ratio:.2f})")

    return f"before: {side(s.verdict_before, s.ratio_before)}; after: {side(s.verdict_after, s.ratio_after)}"


@register("compare", "table", extension=".txt", description="for a terminal")
def render_table(c: Comparison, *, color: bool = False, width: int | None = None, **_: Any) -> str:
    out: list[Any] = [Text(f"before: {c.before_label}   after: {c.after_label}   "
                           f"({c.mode} mode, {c.batches[0]}/{c.batches[1]} batches, "
                           f"{100 * c.confidence:.0f}% intervals)")]
    if c.utilization:
        out.append(_share_table("GIL", [c.utilization], "metric"))
    if c.watch:
        out.append(_share_table("Watched functions (total share)", list(c.watch), "function"))
    if c.threads:
        out.append(_share_table("Threads (held share)" if c.utilization else "Threads (sampled share)",
                                list(c.threads), "thread"))
    if c.steps:
        s = c.steps
        table = Table(title=f"Step times, rank {s.rank} (ms, median)", title_justify="left")
        for name in ("", "before", "after", "change", "rel", "95% CI"):
            table.add_column(name, justify="left" if not name else "right")
        table.add_row("host step p50", *ms_cells(s.host_p50))
        if s.device_p50:
            table.add_row("device step p50", *ms_cells(s.device_p50))
        table.add_row("host step p90", f"{s.host_p90_before:.1f}", f"{s.host_p90_after:.1f}", "", "", "")
        out += [table, Text(steps_verdict_line(s))]
    out.append(_share_table("Functions (total share)", list(c.functions), "function"))
    return to_text(out, color=color, width=width)


def _md_rows(rows: list[ShareChange]) -> list[str]:
    lines = ["| | before | after | change | rel | 95% CI (pp) | verdict |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        label = f"`{r.name}`" + (f" ({os.path.basename(r.file)})" if r.file else "") + \
            (f" [{r.thread}]" if r.thread and r.thread != r.name else "")
        mark = {IMPROVED: "✅ ", REGRESSED: "❌ "}.get(r.verdict, "")
        lines.append(f"| {label} | " + " | ".join(share_cells(r.total)) + f" | {mark}{r.verdict} |")
    return lines


@register("compare", "markdown", extension=".md", description="for a PR comment")
def render_markdown(c: Comparison, **_: Any) -> str:
    lines = ["### gilprof compare", "", f"before: {c.before_label} · after: {c.after_label} · "
             f"{c.mode} mode · {100 * c.confidence:.0f}% intervals (batch means over "
             f"{c.batches[0]}/{c.batches[1]} windows)", ""]
    if c.steps:
        s = c.steps
        lines += [f"**Step times, rank {s.rank}** (ms)", "",
                  "| | before | after | change | rel | 95% CI |", "|---|---:|---:|---:|---:|---:|",
                  "| host step p50 | " + " | ".join(ms_cells(s.host_p50)) + " |"]
        if s.device_p50:
            lines.append("| device step p50 | " + " | ".join(ms_cells(s.device_p50)) + " |")
        lines += ["", steps_verdict_line(s), ""]
    rows = ([c.utilization] if c.utilization else []) + list(c.watch)
    lines += ["**GIL and watched functions**", "", *_md_rows(rows), ""]
    lines += ["**Threads**", "", *_md_rows(list(c.threads)), ""]
    lines += ["<details><summary>Functions</summary>", "", *_md_rows(list(c.functions)), "", "</details>", ""]
    return "\n".join(lines)
