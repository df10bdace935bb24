"""`gilprof steps`: step-time percentiles per rank from TensorRT-LLM iteration logs."""

from __future__ import annotations

import shutil

import click

from gilprof.cli._options import format_option, skip_warmup_option
from gilprof.renderers import render
from gilprof.steps import summarize_logs


@click.command("steps")
@click.argument("logs", nargs=-1, required=True, metavar="LOG...")
@skip_warmup_option
@click.option("--rank", type=int, default=None, metavar="R", help="Only this (global) rank.")
@click.option(
    "--near-ratio",
    "--host-bound-ratio",
    "near_ratio",
    type=click.FloatRange(min=0.0, min_open=True),
    default=0.9,
    show_default=True,
    metavar="F",
    help="Read p50(device) / p50(host) >= F as device ~ host (--host-bound-ratio: old name).",
)
@format_option("steps", "table")
def command(
    logs: tuple[str, ...],
    skip_warmup: int,
    rank: int | None,
    near_ratio: float,
    fmt: str,
) -> None:
    """Step times per rank from iteration logs, and the device/host ratio.

    Reads the per-iteration lines TensorRT-LLM prints with `print_iter_log: true` and
    TLLM_LOG_LEVEL=INFO (`iter = N, ... host_step_time = Xms, prev_device_step_time = Yms,
    ...`), in any of its variants and with srun/mpirun prefixes, or JSON lines with
    `host_step_ms`/`device_step_ms`. Other lines are skipped and counted. Several LOGs
    are combined (e.g. one per rank); `-` reads stdin.

    \b
    Reading of p50(device) / p50(host), per rank:
      device~host   ratio >= --near-ratio
      device<host   the device was timed busy for less than the host step
      unknown       no device step times (first iteration only, or not logged)

    \b
    What a log cannot tell: under the overlap scheduler a loop paced by the host and
    one paced by the device both log device ~ host. Whether the host or the device
    paces the loop comes from the loop thread's time:
      gilprof report PROFILE --steps LOG     (contention or wall mode profiles are sharper)

    \b
    Examples:
      gilprof steps gen_server_0.log
      gilprof steps --skip-warmup 50 --rank 0 gen.log
      gilprof steps rank*.log --format json > steps.json
      grep 'iter = ' gen.log | gilprof steps - --format markdown
    """
    report = summarize_logs(logs, skip_warmup=skip_warmup, rank=rank, near_ratio=near_ratio)
    width = max(100, min(200, shutil.get_terminal_size((120, 24)).columns))
    click.echo(render("steps", fmt, report, width=width))
