"""`gilprof demo`: the whole story on the bundled example job, in about a minute."""

from __future__ import annotations

import sys

import click

from gilprof.cli._options import number_option
from gilprof.cli.demo_run import DemoSettings, demo_folder, run_demo
from gilprof.renderers import render
from gilprof.renderers.compare import CompareView
from gilprof.sampling.capture import stop_on_signals


@click.command("demo")
@click.option(
    "-o",
    "--output-dir",
    type=click.Path(),
    help="Folder for profiles, logs and report.md (default: a new gilprof-demo-* folder "
    "under the system temp dir; never the current directory).",
)
@number_option(
    "--window",
    type=click.FloatRange(min=2),
    default=20.0,
    help="Seconds of rank 0 sampled per side.",
)
@number_option(
    "--warmup",
    type=click.FloatRange(min=0),
    default=4.0,
    help="Seconds the server runs before sampling starts.",
)
@number_option("--ranks", type=click.IntRange(min=2), default=4, help="MPI ranks of the server.")
@click.option(
    "--server-arg",
    "server_args",
    multiple=True,
    help="Extra argument for examples/disagg_gen/server.py (repeatable), e.g. --server-arg=--device-ms=30.",
)
def command(
    output_dir: str | None, window: float, warmup: float, ranks: int, server_args: tuple[str, ...]
) -> None:
    """Replay the TensorRT-LLM rank-0 GIL diagnosis on the bundled simulated GEN server.

    \b
    Runs `mpiexec -n 4 python examples/disagg_gen/server.py --impl before`, samples rank 0
    with py-spy, does the same with `--impl after` (the two rank-0 GIL fixes), and prints:
      - the watched functions' GIL shares before/after with 95% intervals,
      - the executor thread's held share,
      - host/device step p50 before/after and each side's host/device verdict,
      - a plain-language summary: what held the GIL, what changed, the reference
        fix, how to find the pattern in your code (gilprof lint), next commands.
    Leaves before/after profiles, logs and report.md (a plain-language summary first,
    then the comparison) in the output folder, whose path it prints.
    """
    folder = demo_folder(output_dir)  # made and checked before anything is launched
    click.echo(f"gilprof demo: writing to {folder}", err=True)
    settings = DemoSettings(
        output_dir=folder, window_s=window, warmup_s=warmup, ranks=ranks, server_args=server_args
    )

    def say(message: str) -> None:
        click.echo(f"gilprof demo: {message}", err=True)

    with stop_on_signals() as stop:
        result = run_demo(settings, stop, say)
    click.echo(
        render(
            "compare",
            "table",
            CompareView(result.comparison, result.verdicts),
            color=sys.stdout.isatty(),
        ),
        nl=False,
    )
    click.echo("")
    click.echo("Milliseconds per step: predicted from the before profile, then measured")
    click.echo(result.check)
    click.echo("")
    click.echo(result.summary)
    click.echo(f"\nwrote, in {folder.resolve()}:")
    for path in (
        result.sides[0].profile_path,
        result.sides[1].profile_path,
        result.sides[0].log_path,
        result.sides[1].log_path,
        result.report_path,
        result.report_path.with_name("report.html"),
        result.report_path.with_name("diff.html"),
    ):
        click.echo(f"  {path.resolve()}")
    click.echo(f"next: gilprof report {result.sides[0].profile_path.resolve()} --by-thread")
