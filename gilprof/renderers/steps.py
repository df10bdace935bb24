"""Renderers for `gilprof steps`: table (rich), markdown and json."""

from __future__ import annotations

import io
import json

from rich import box
from rich.console import Console
from rich.table import Table

from gilprof.renderers import register
from gilprof.steps import HOST_BOUND, Percentiles, RankSteps, StepsReport

_COLUMNS = (
    "rank",
    "iters",
    "host p50",
    "host p90",
    "host p99",
    "dev p50",
    "dev p90",
    "dev p99",
    "sched p50",
    "dev/host",
    "verdict",
)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _percentile_cells(percentiles: Percentiles | None) -> list[str]:
    if percentiles is None:
        return ["-", "-", "-"]
    return [_ms(percentiles.p50), _ms(percentiles.p90), _ms(percentiles.p99)]


def _row(steps: RankSteps) -> list[str]:
    ratio = "-" if steps.device_host_ratio is None else f"{steps.device_host_ratio:.2f}"
    scheduled = "-" if steps.scheduled_requests_p50 is None else f"{steps.scheduled_requests_p50:g}"
    return [
        str(steps.rank),
        str(steps.iterations),
        *_percentile_cells(steps.host_step_ms),
        *_percentile_cells(steps.device_step_ms),
        scheduled,
        ratio,
        steps.verdict,
    ]


def explain(steps: RankSteps, host_bound_ratio: float) -> str:
    """The verdict in words, with the numbers that decided it."""
    host = steps.host_step_ms.p50
    if steps.device_step_ms is None:
        return (
            f"rank {steps.rank}: no device step times in the log "
            "(prev_device_step_time is N/A or absent) -> unknown"
        )
    device = steps.device_step_ms.p50
    if steps.device_host_ratio is None:
        return f"rank {steps.rank}: host p50 is {host:.1f} ms, no ratio to judge -> unknown"
    head = (
        f"rank {steps.rank}: device p50 {device:.1f} ms is {steps.device_host_ratio:.2f} "
        f"of host p50 {host:.1f} ms"
    )
    if steps.verdict == HOST_BOUND:
        return (
            f"{head}: the device step is dragged up to the host step -> host-bound "
            f"(ratio >= {host_bound_ratio:.2f})"
        )
    return (
        f"{head}: the device step is not dragged up to the host step -> {steps.verdict} "
        f"(ratio < {host_bound_ratio:.2f})"
    )


def _notes(report: StepsReport) -> list[str]:
    notes = []
    if report.skip_warmup:
        plural = "s" if report.skip_warmup != 1 else ""
        notes.append(
            f"first {report.skip_warmup} iteration{plural} of each rank dropped as warm-up"
        )
    notes.append(
        "dev = prev_device_step_time, sched = num_scheduled_requests; "
        f"{report.skipped_lines} lines skipped (not iteration lines)"
    )
    if any(steps.verdict == HOST_BOUND for steps in report.ranks):
        notes.append(
            "a loop paced by the device also shows device ~= host under the overlap "
            "scheduler: confirm host-bound with `gilprof report` (executor thread GIL share)"
        )
    return notes


@register("steps", "table", extension=".txt", description="for a terminal")
def render_table(report: StepsReport, width: int = 120, **_: object) -> str:
    table = Table(
        title="Step times per rank, ms",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for name in _COLUMNS:
        table.add_column(name, justify="left" if name == "verdict" else "right", no_wrap=True)
    for steps in report.ranks:
        table.add_row(*_row(steps))
    console = Console(
        file=io.StringIO(), width=width, color_system=None, force_terminal=False, soft_wrap=False
    )
    with console.capture() as capture:
        console.print(table)
        for steps in report.ranks:
            console.print(
                explain(steps, report.host_bound_ratio),
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
        for note in _notes(report):
            console.print(note, highlight=False, markup=False, soft_wrap=True)
    return "\n".join(line.rstrip() for line in capture.get().splitlines()).strip("\n")


@register("steps", "markdown", extension=".md", description="for a PR comment")
def render_markdown(report: StepsReport, **_: object) -> str:
    lines = [
        "| " + " | ".join(_COLUMNS) + " |",
        "|" + "|".join("---" if name == "verdict" else "---:" for name in _COLUMNS) + "|",
    ]
    lines.extend("| " + " | ".join(_row(steps)) + " |" for steps in report.ranks)
    lines.append("")
    lines.extend(f"- {explain(steps, report.host_bound_ratio)}" for steps in report.ranks)
    lines.append("")
    lines.extend(f"_{note}_" for note in _notes(report))
    return "\n".join(lines)


@register("steps", "json", extension=".json", description="machine-readable")
def render_json(report: StepsReport, **_: object) -> str:
    return json.dumps(report.to_json(), indent=2)
