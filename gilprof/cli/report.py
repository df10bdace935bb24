"""`gilprof report PROFILE`: who held the GIL, in which threads and functions."""

from __future__ import annotations

import sys

import click

from gilprof.analysis.attribution import DEFAULT_WATCH, attribute
from gilprof.analysis.contention import analyze
from gilprof.analysis.empty import why_empty
from gilprof.analysis.ranks import compare_ranks
from gilprof.cli._output import write_bytes_atomic
from gilprof.cli._recipe import recipe_option
from gilprof.cli._verdict import judge, loop_options
from gilprof.errors import UsageError
from gilprof.model import Mode
from gilprof.profile import load_profiles, write_text_atomic
from gilprof.recipes import Recipe
from gilprof.renderers import formats, render
from gilprof.renderers.report import ReportData
from gilprof.steps import rank_steps


@click.command("report")
@click.argument("profiles", nargs=-1, required=True, type=click.Path())
@click.option(
    "--format",
    "fmt",
    default="table",
    show_default=True,
    help="table, json, markdown, collapsed (flamegraph.pl/inferno) or speedscope.",
)
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Function rows to show, by self share (json lists every function).",
)
@click.option(
    "--all-frames",
    is_flag=True,
    help="Keep thread-bootstrap (Thread._bootstrap, Thread.run) and <module> frames in the function list.",
)
@click.option(
    "--steps",
    "steps_log",
    type=click.Path(),
    help="Iteration log of the profiled rank: adds the host/device verdict.",
)
@click.option(
    "--steps-rank", type=int, help="Rank in the log (default: the profile's rank, else 0)."
)
@click.option(
    "--skip-warmup",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="Iterations to drop from the log.",
)
@loop_options
@click.option("--by-thread", is_flag=True, help="Attribute functions per thread.")
@click.option("--thread", "thread_pattern", help="Only threads whose name matches this regex.")
@click.option("--lines", is_flag=True, help="Break functions down by line.")
@click.option(
    "--contention",
    is_flag=True,
    help="GIL wait per thread and function, and the blame matrix (needs a --mode contention profile).",
)
@click.option(
    "--watch",
    multiple=True,
    help="Also watch this function (repeatable); bare names match qualnames.",
)
@click.option(
    "--no-default-watch",
    is_flag=True,
    help="Do not watch safe_broadcast and _balance_requests_across_ranks.",
)
@recipe_option
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False), help="Write to this file instead of stdout."
)
def command(
    profiles: tuple[str, ...],
    fmt: str,
    top: int,
    all_frames: bool,
    steps_log: str | None,
    steps_rank: int | None,
    skip_warmup: int,
    loop_thread: str | None,
    device_wait: tuple[str, ...],
    by_thread: bool,
    thread_pattern: str | None,
    lines: bool,
    contention: bool,
    watch: tuple[str, ...],
    no_default_watch: bool,
    recipe: Recipe | None,
    output: str | None,
) -> None:
    """Attribute sampled GIL time to threads and functions, from a saved profile.

    \b
    Examples:
      gilprof report rank0.json                       # table: utilization, threads, functions, watch
      gilprof report rank0.json --by-thread --top 20
      gilprof report rank0.json --thread executor --lines
      gilprof report rank0.json --format json         # the gilprof.report/1 contract
      gilprof report rank0.json --format speedscope -o rank0.speedscope.json
      gilprof report prof/rank*.json                  # ranks side by side, rank-0 excess
      gilprof report rank0.json --steps rank0.log     # + host-bound or device-bound, and why

    \b
    total share: fraction of ticks at which the GIL holder had the function on its stack;
    self share: ... had it on top; seconds = share x sampled duration.

    \b
    With --steps, the report leads with the verdict: host-bound, device-bound, mixed or
    undetermined, from where the step loop's thread spends its time (README "Host-bound or
    device-bound"). gil mode can prove host-bound only; --mode contention or wall profiles
    show the device waits too.
    """
    loaded_all = [p for path in profiles for p in load_profiles(path)]
    kind = "report" if len(loaded_all) == 1 else "ranks"
    if fmt not in formats(kind):
        raise UsageError(
            f"unknown format {fmt!r} for {'one profile' if kind == 'report' else 'several profiles'}; "
            f"known: {', '.join(formats(kind))}"
        )
    watched = (
        (() if no_default_watch else DEFAULT_WATCH)
        + (recipe.watch_names() if recipe else ())
        + watch
    )
    color = output is None and sys.stdout.isatty()
    if kind == "ranks":
        if steps_log:
            raise UsageError("--steps needs one profile (the rank whose log it is)")
        text = render(
            "ranks", fmt, compare_ranks(loaded_all, top=top or 25, watch=watched), color=color
        )
        _emit(text, output)
        return
    loaded = loaded_all[0]
    warning = why_empty(loaded)
    if warning:
        click.echo(f"gilprof: warning: {profiles[0]}: {warning}", err=True)
    attribution = attribute(
        loaded,
        by_thread=by_thread,
        lines=lines,
        thread_pattern=thread_pattern,
        watch=watched,
        top=None,
    )
    verdict = None
    if steps_log:
        steps = rank_steps(
            steps_log,
            steps_rank if steps_rank is not None else (loaded.target.rank or 0),
            skip_warmup,
        )
        verdict = judge(
            loaded,
            steps,
            loop_thread=loop_thread,
            device_wait=device_wait,
            recipe=recipe,
            watch=watched,
        )
    analysis = None
    if contention:
        if loaded.sampling.mode is not Mode.CONTENTION:
            raise UsageError(
                f"--contention needs a profile sampled with --mode contention; "
                f"{profiles[0]} is {loaded.sampling.mode} mode, which records who holds "
                "the GIL but not who waits for it"
            )
        analysis = analyze(loaded)
    notes = {w.function: (w.why, w.fix) for w in recipe.watch} if recipe else {}
    text = render(
        "report",
        fmt,
        ReportData(
            loaded,
            attribution,
            lines,
            analysis,
            notes,
            verdict=verdict,
            top=top,
            all_frames=all_frames,
        ),
        color=color,
    )
    _emit(text, output)


def _emit(text: str | bytes, output: str | None) -> None:
    if isinstance(text, bytes):  # a binary format (pprof)
        if not output:
            raise UsageError("this --format writes binary data: give -o FILE")
        write_bytes_atomic(output, text)
    elif output:
        write_text_atomic(output, text)
    else:
        click.echo(text, nl=False)
