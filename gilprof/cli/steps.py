"""`gilprof steps`: step-time percentiles per rank from TensorRT-LLM iteration logs."""

from __future__ import annotations

import shutil

import click

from gilprof.renderers import render
from gilprof.steps import summarize_logs


@click.command("steps")
@click.argument("logs", nargs=-1, required=True, metavar="LOG...")
@click.option(
    "--skip-warmup",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="N",
    help="Drop the first N iterations of each rank (warm-up, CUDA graph capture).",
)
@click.option("--rank", type=int, default=None, metavar="R", help="Only this (global) rank.")
@click.option(
    "--host-bound-ratio",
    type=click.FloatRange(min=0.0, min_open=True),
    default=0.9,
    show_default=True,
    metavar="F",
    help="Call a rank host-bound when p50(device) / p50(host) >= F.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown"]),
    default="table",
    show_default=True,
    help="Output format; json follows the schema gilprof.steps/1.",
)
def command(
    logs: tuple[str, ...],
    skip_warmup: int,
    rank: int | None,
    host_bound_ratio: float,
    fmt: str,
) -> None:
    """Step times per rank from iteration logs, and whether the host paces the step.

    Reads the per-iteration lines TensorRT-LLM prints with `print_iter_log: true` and
    TLLM_LOG_LEVEL=INFO (`iter = N, ... host_step_time = Xms, prev_device_step_time = Yms,
    ...`), in any of its variants and with srun/mpirun prefixes, or JSON lines with
    `host_step_ms`/`device_step_ms`. Other lines are skipped and counted. Several LOGs
    are combined (e.g. one per rank); `-` reads stdin.

    \b
    Verdict, per rank:
      host-bound    p50(device) / p50(host) >= --host-bound-ratio: under the overlap
                    scheduler the device step is dragged up to the host step
      device-bound  the ratio is lower
      unknown       no device step times (first iteration only, or not logged)

    \b
    Limit: under the overlap scheduler a loop paced by the device also shows
    device ~= host, so the ratio alone cannot tell the two apart. Confirm a
    host-bound verdict with `gilprof report`: a high GIL-held share on the
    executor-loop thread of rank 0 is the host-side evidence.

    \b
    Examples:
      gilprof steps gen_server_0.log
      gilprof steps --skip-warmup 50 --rank 0 gen.log
      gilprof steps rank*.log --format json > steps.json
      grep 'iter = ' gen.log | gilprof steps - --format markdown
    """
    report = summarize_logs(
        logs, skip_warmup=skip_warmup, rank=rank, host_bound_ratio=host_bound_ratio
    )
    width = max(100, min(200, shutil.get_terminal_size((120, 24)).columns))
    click.echo(render("steps", fmt, report, width=width))
