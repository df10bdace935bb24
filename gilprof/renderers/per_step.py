"""Costs per step and what-if predictions, as rows for the report's table, markdown and json."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rich.table import Table
from rich.text import Text

from gilprof.analysis.per_step import LoopCosts
from gilprof.analysis.what_if import Prediction
from gilprof.stats import Estimate


def _ci(e: Estimate, digits: int = 1) -> str:
    if not math.isfinite(e.low):
        return "n/a"
    return f"[{e.low:.{digits}f}, {e.high:.{digits}f}]"


def cost_headline(costs: LoopCosts) -> str:
    unit = costs.unit
    per = (
        f", {unit.requests_per_step:g} scheduled requests per step (median)"
        if unit.requests_per_step
        else ""
    )
    blame = "" if costs.blame else " (own time only: this mode records no GIL waits)"
    return (
        f"Cost per step: loop thread {costs.thread}, mean host step {unit.step_ms:.1f} ms over "
        f"{unit.iterations} iterations{per}; each function's own time plus the loop's GIL wait "
        f"while another thread held the GIL in it{blame}"
    )


def prediction_line(p: Prediction) -> str:
    step = p.step_after_ms
    return (
        f"removing {', '.join(p.removed)}: host work {p.host_work_ms:.1f} -> "
        f"{p.host_after_ms.value:.1f} ms per step (saves {p.saving_ms.value:.1f} ms, 95% CI "
        f"{_ci(p.saving_ms)}); predicted host step {p.period_ms:.1f} -> {step.value:.1f} ms "
        f"{_ci(step)}"
        + (
            f"; device chain {p.device_ms:.1f} - {p.feeder_saving_ms.value:.1f} ms (the "
            f"feeding thread's time cut), host after {p.host_after_ms.value:.1f} ms: the "
            f"larger paces the step"
            if p.device_paced and p.device_ms is not None and p.feeder_saving_ms is not None
            else f"; overlap scheduler: max(host after, device {p.device_ms:.1f} ms) = "
            f"{max(p.host_after_ms.value, p.device_ms):.1f} ms"
            if p.device_paced and p.device_ms is not None
            else f"; each step after max(its host time - saving, device {p.device_ms:.1f} ms)"
            if p.device_given and p.device_ms is not None
            else ""
        )
    )


def cost_rows(costs: LoopCosts, top: int | None) -> list[list[str]]:
    rows = []
    for c in costs.functions[:top]:
        loop = ", loop frame" if costs.is_loop_frame(c) else ""
        rows.append(
            [
                c.name + (f" ({c.file}{loop})" if c.file else loop),
                f"{c.per_step_ms.value:.2f}",
                _ci(c.per_step_ms, 2),
                f"{c.per_request_ms.value * 1e3:.1f}" if c.per_request_ms else "",
                f"{100 * c.share.value:.1f}%",
                f"{100 * c.own_share:.1f}%",
                f"{100 * c.blamed_share:.1f}%",
            ]
            + ([f"{c.feeder_wait_ms.value:.2f}"] if c.feeder_wait_ms is not None else [])
        )
    return rows


def cost_head(costs: LoopCosts) -> list[str]:
    """The columns, with the feeding threads' waits when they were named (--feeder-thread)."""
    fed = any(c.feeder_wait_ms is not None for c in costs.functions)
    return COST_HEAD + (["feeder wait ms/step"] if fed else [])


COST_HEAD = ["function", "ms/step", "95% CI", "µs/request", "of loop", "own", "blamed wait"]
NARROW = (0, 1, 2, 5, 6)  # the columns a terminal gets without --wide
SAVING_HEAD = ["remove", "saves ms/step", "95% CI", "host step after", "95% CI"]


def saving_rows(savings: tuple[Prediction, ...]) -> list[list[str]]:
    return [
        [
            ", ".join(p.removed),
            f"{p.step_saving_ms.value:.1f}",
            _ci(p.step_saving_ms),
            f"{p.step_after_ms.value:.1f}",
            _ci(p.step_after_ms),
        ]
        for p in savings
    ]


def tables(
    costs: LoopCosts,
    savings: tuple[Prediction, ...],
    what_if: Prediction | None,
    top: int | None,
    wide: bool = False,
) -> list[Any]:
    out: list[Any] = [Text(cost_headline(costs), style="bold")]
    table = Table(title="Cost to the loop per step", title_justify="left")
    head = cost_head(costs)
    shown = list(range(len(head))) if wide else [*NARROW, *range(len(COST_HEAD), len(head))]
    for i in shown:
        table.add_column(head[i], justify="left" if i == 0 else "right")
    for row in cost_rows(costs, top):
        table.add_row(*(row[i] for i in shown))
    out.append(table)
    if savings:
        saving = Table(
            title="What removing each function's cost from the loop would save",
            title_justify="left",
        )
        for i, name in enumerate(SAVING_HEAD):
            saving.add_column(name, justify="left" if i == 0 else "right")
        for row in saving_rows(savings):
            saving.add_row(*row)
        out += [saving, Text(savings[0].note)]
    if what_if is not None:
        out += [Text("what if: " + prediction_line(what_if), style="bold"), Text(what_if.note)]
    return out


def markdown(
    costs: LoopCosts, savings: tuple[Prediction, ...], what_if: Prediction | None, top: int | None
) -> list[str]:
    head = cost_head(costs)
    lines = [f"**{cost_headline(costs)}**", "", "| " + " | ".join(head) + " |"]
    lines.append("|---|" + "---:|" * (len(head) - 1))
    lines += ["| `" + r[0] + "` | " + " | ".join(r[1:]) + " |" for r in cost_rows(costs, top)]
    if savings:
        lines += [
            "",
            "**What removing each function's cost from the loop would save**",
            "",
            "| " + " | ".join(SAVING_HEAD) + " |",
            "|---|" + "---:|" * (len(SAVING_HEAD) - 1),
        ]
        lines += ["| `" + r[0] + "` | " + " | ".join(r[1:]) + " |" for r in saving_rows(savings)]
        lines += ["", savings[0].note]
    if what_if is not None:
        lines += ["", f"**What if:** {prediction_line(what_if)}", "", what_if.note]
    return [*lines, ""]


def _estimate(e: Estimate) -> dict[str, Any]:
    finite = math.isfinite(e.low)
    return {
        "value": e.value,
        "ci_low": e.low if finite else None,
        "ci_high": e.high if finite else None,
    }


def prediction_dict(p: Prediction) -> dict[str, Any]:
    return {
        "removed": list(p.removed),
        "saving_ms": _estimate(p.saving_ms),
        "host_step_before_ms": p.period_ms,
        "host_work_ms": p.host_work_ms,
        "host_work_after_ms": _estimate(p.host_after_ms),
        "host_step_after_ms": _estimate(p.step_after_ms),
        "step_saving_ms": _estimate(p.step_saving_ms),
        "device_ms": p.device_ms,
        "device_paced": p.device_paced,
        "device_ms_given": p.device_given,
        "line_fractions": dict(p.line_fractions),
        "feeder_saving_ms": _estimate(p.feeder_saving_ms) if p.feeder_saving_ms else None,
        "note": p.note,
    }


def costs_dict(
    costs: LoopCosts, savings: tuple[Prediction, ...], what_if: Prediction | None
) -> dict[str, Any]:
    return {
        "loop_thread": costs.thread,
        "host_step_mean_ms": costs.unit.step_ms,
        "iterations": costs.unit.iterations,
        "requests_per_step": costs.unit.requests_per_step,
        "blame": costs.blame,
        "functions": [
            {
                "function": c.name,
                "file": c.file,
                "ms_per_step": _estimate(c.per_step_ms),
                "ms_per_request": _estimate(c.per_request_ms) if c.per_request_ms else None,
                "loop_share": c.share.value,
                "own_share": c.own_share,
                "blamed_share": c.blamed_share,
                "feeder_wait_ms": _estimate(c.feeder_wait_ms) if c.feeder_wait_ms else None,
            }
            for c in costs.functions
        ],
        "savings": [prediction_dict(p) for p in savings],
        "what_if": prediction_dict(what_if) if what_if else None,
    }


def html_section(
    costs: LoopCosts,
    savings: tuple[Prediction, ...],
    what_if: Prediction | None,
    top: int | None,
    esc: Callable[[str], str],
    table: Callable[[list[str], list[list[str]], str], str],
) -> str:
    """report.html: cost to the loop in ms per step, and what removing each would save."""
    parts = [
        '<section id="per-step-section"><h2>Cost per step</h2>',
        f'<p class="help">{esc(cost_headline(costs))}</p>',
        table(
            cost_head(costs), [[esc(c) for c in row] for row in cost_rows(costs, top)], "per-step"
        ),
    ]
    if savings:
        parts += [
            "<h3>What removing each function's cost from the loop would save</h3>",
            table(SAVING_HEAD, [[esc(c) for c in row] for row in saving_rows(savings)], "savings"),
            f'<p class="help">{esc(savings[0].note)}</p>',
        ]
    if what_if is not None:
        parts += [
            f'<p class="verdict">What if: {esc(prediction_line(what_if))}</p>',
            f"<p>{esc(what_if.note)}</p>",
        ]
    return "".join(parts) + "</section>"
