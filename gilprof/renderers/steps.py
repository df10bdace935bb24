"""Renderers for `gilprof steps`: table (rich), markdown and json."""

from __future__ import annotations

import io
import json

from rich import box
from rich.console import Console
from rich.table import Table

from gilprof.renderers import register
from gilprof.steps import DEVICE_NEAR_HOST, Percentiles, RankSteps, StepsReport

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
    "reading",
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
        steps.reading,
    ]


CANNOT_TELL = (
    "a log cannot tell host-bound from device-bound: under an overlap scheduler a loop paced "
    "by the host and one paced by the device both log device ~ host. Decide from the loop "
    "thread's time: gilprof report PROFILE --steps LOG (sharper with a --mode contention or "
    "--mode wall profile)"
)


def explain(steps: RankSteps, near_ratio: float) -> str:
    """What the ratio shows, with the numbers, and what it cannot show."""
    host = steps.host_step_ms.p50
    if steps.device_step_ms is None:
        return (
            f"rank {steps.rank}: no device step times in the log "
            "(prev_device_step_time is N/A or absent): no ratio"
        )
    device = steps.device_step_ms.p50
    if steps.device_host_ratio is None:
        return f"rank {steps.rank}: host p50 is {host:.1f} ms: no ratio"
    head = (
        f"rank {steps.rank}: device p50 {device:.1f} ms is {steps.device_host_ratio:.2f} "
        f"of host p50 {host:.1f} ms"
    )
    if steps.reading == DEVICE_NEAR_HOST:
        return f"{head}: device ~ host (ratio >= {near_ratio:.2f}), which either side pacing the loop gives"
    return (
        f"{head}: the device was timed busy for less than the host step (ratio < "
        f"{near_ratio:.2f}), so it idles part of each step; which side paces the loop needs "
        "the loop thread's time"
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
    notes.append(CANNOT_TELL)
    return notes


@register("steps", "table", extension=".txt", description="for a terminal")
def render_table(report: StepsReport, width: int = 120, **_: object) -> str:
    table = Table(
        title="Step times per rank, ms",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for name in _COLUMNS:
        table.add_column(name, justify="left" if name == "reading" else "right", no_wrap=True)
    for steps in report.ranks:
        table.add_row(*_row(steps))
    console = Console(
        file=io.StringIO(), width=width, color_system=None, force_terminal=False, soft_wrap=False
    )
    with console.capture() as capture:
        console.print(table)
        for steps in report.ranks:
            console.print(
                explain(steps, report.near_ratio),
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
        "|" + "|".join("---" if name == "reading" else "---:" for name in _COLUMNS) + "|",
    ]
    lines.extend("| " + " | ".join(_row(steps)) + " |" for steps in report.ranks)
    lines.append("")
    lines.extend(f"- {explain(steps, report.near_ratio)}" for steps in report.ranks)
    lines.append("")
    lines.extend(f"_{note}_" for note in _notes(report))
    return "\n".join(lines)


@register("steps", "json", extension=".json", description="machine-readable")
def render_json(report: StepsReport, **_: object) -> str:
    return json.dumps(report.to_json(), indent=2)
