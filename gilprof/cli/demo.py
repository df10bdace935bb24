"""`gilprof demo`: the whole story on the bundled example job, in about a minute."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import click

from gilprof.cli.demo_run import DemoSettings, run_demo
from gilprof.renderers import render
from gilprof.sampling.capture import stop_on_signals


@click.command("demo")
@click.option("-o", "--output-dir", type=click.Path(file_okay=False),
              help="Folder for profiles, logs and report (default gilprof-demo-<time>).")
@click.option("--window", type=click.FloatRange(min=2), default=20.0, show_default=True,
              help="Seconds of rank 0 sampled per side.")
@click.option("--warmup", type=click.FloatRange(min=0), default=4.0, show_default=True,
              help="Seconds the server runs before sampling starts.")
@click.option("--ranks", type=click.IntRange(min=2), default=4, show_default=True)
@click.option("--server-arg", "server_args", multiple=True,
              help="Extra argument for examples/disagg_gen/server.py (repeatable), e.g. --server-arg=--device-ms=30.")
def command(output_dir: str | None, window: float, warmup: float, ranks: int,
            server_args: tuple[str, ...]) -> None:
    """Replay the TensorRT-LLM rank-0 GIL diagnosis on the bundled simulated GEN server.

    \b
    Runs `mpiexec -n 4 python examples/disagg_gen/server.py --impl before`, samples rank 0
    with py-spy, does the same with `--impl after` (the two rank-0 GIL fixes), and prints:
      - the watched functions' GIL shares before/after with 95% intervals,
      - the executor thread's held share,
      - host/device step p50 before/after and the host-bound verdicts.
    Leaves before/after profiles, logs and report.md in the output folder.
    """
    folder = Path(output_dir or f"gilprof-demo-{datetime.now():%Y%m%d-%H%M%S}")
    settings = DemoSettings(output_dir=folder, window_s=window, warmup_s=warmup, ranks=ranks,
                            server_args=server_args)

    def say(message: str) -> None:
        click.echo(f"gilprof demo: {message}", err=True)

    with stop_on_signals() as stop:
        result = run_demo(settings, stop, say)
    click.echo(render("compare", "table", result.comparison, color=sys.stdout.isatty()), nl=False)
    click.echo(f"\nwrote {result.sides[0].profile_path}, {result.sides[1].profile_path}, "
               f"{result.sides[0].log_path}, {result.sides[1].log_path} and {result.report_path}")
    click.echo(f"next: gilprof report {result.sides[0].profile_path} --by-thread")
