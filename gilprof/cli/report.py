"""`gilprof report PROFILE`: who held the GIL, in which threads and functions."""

from __future__ import annotations

import click

from gilprof.analysis.attribution import attribute
from gilprof.analysis.contention import analyze, has_spans
from gilprof.analysis.empty import why_empty
from gilprof.analysis.ranks import compare_ranks
from gilprof.cli._options import format_option, output_option, rows_options, watch_options
from gilprof.cli._output import check_output, emit
from gilprof.cli._per_step import PerStep, WhatIf, what_if_options
from gilprof.cli._recipe import recipe_option, watch_list
from gilprof.cli._verdict import VerdictChoice, verdict_options
from gilprof.errors import UsageError
from gilprof.profile import load_profiles
from gilprof.recipes import Recipe
from gilprof.renderers import info
from gilprof.renderers.report import ReportData


@click.command("report")
@click.argument("profiles", nargs=-1, required=True, type=click.Path())
@format_option("report", "table")
@rows_options(20, "Function rows to show, by self share (json lists every function).")
@click.option(
    "--steps", "steps_log", type=click.Path(), help="Iteration log: adds the host/device verdict."
)
@verdict_options
@what_if_options
@click.option("--by-thread", is_flag=True, help="Attribute functions per thread.")
@click.option("--thread", "thread_pattern", help="Only threads whose name matches this regex.")
@click.option("--lines", is_flag=True, help="Break functions down by line (not the default mode).")
@click.option(
    "--contention",
    is_flag=True,
    help="GIL wait per thread and function, and the blame matrix (shown by default for "
    "profiles that recorded every thread's state: states and contention mode).",
)
@click.option(
    "--notes",
    "full_notes",
    is_flag=True,
    help="Print each NOTE whole, with the rules it quotes (the table shows each one's first "
    "clause; JSON always has them whole).",
)
@watch_options
@recipe_option
@output_option
def command(
    profiles: tuple[str, ...],
    fmt: str,
    top: int,
    wide: bool,
    all_frames: bool,
    steps_log: str | None,
    verdict: VerdictChoice,
    what_if: WhatIf,
    by_thread: bool,
    thread_pattern: str | None,
    lines: bool,
    contention: bool,
    watch: tuple[str, ...],
    no_default_watch: bool,
    recipe: Recipe | None,
    output: str | None,
    full_notes: bool,
) -> None:
    """Attribute sampled GIL time to threads and functions, from a saved profile.

    \b
    Examples:
      gilprof report rank0.json                       # table: utilization, threads, functions, watch
      gilprof report rank0.json --by-thread --top 20
      gilprof report rank0.json --thread executor --by-thread
      gilprof report rank0.json --format html -o rank0.html   # flame graph + tables, one file
      gilprof report rank0.json --format pprof -o rank0.pb.gz # go tool pprof, Pyroscope, Parca
      gilprof report prof/rank*.json                  # ranks side by side, rank-0 excess
      gilprof report rank0.json --steps rank0.log     # + host-bound or device-bound, and why

    \b
    total share: fraction of ticks at which the GIL holder had the function on its stack;
    self share: ... had it on top; seconds = share x sampled duration.

    \b
    With --steps, each function's cost to the loop in ms per step leads, with what removing
    each would save (--what-if FUNC for chosen ones: the predicted host step after).

    \b
    With --steps, the report leads with the verdict: host-bound, device-bound, mixed or
    undetermined, from where the step loop's thread spends its time (README "Host-bound or
    device-bound"). gil mode can prove host-bound only; --mode contention or wall profiles
    show the device waits too.
    """
    check_output(output)  # before any profile is read
    loaded_all = [p for path in profiles for p in load_profiles(path)]
    watched = watch_list(recipe, watch, defaults=not no_default_watch)
    if len(loaded_all) > 1:
        info("ranks", fmt)  # one clear line when a format has no several-rank form
        step_ms = verdict.step_ms_by_rank(steps_log, loaded_all) if steps_log else None
        explicit = (recipe.watch_names() if recipe else ()) + tuple(watch)
        comparison = compare_ranks(
            loaded_all, top=top, watch=watched, explicit=explicit, step_ms=step_ms,
            loop_thread=verdict.loop_thread,
        )  # fmt: skip
        emit("ranks", fmt, output, comparison)
        return
    loaded = loaded_all[0]
    info("report", fmt)
    warnings = [why_empty(loaded)]
    if recipe:
        warnings.append(recipe.target.missing_threads(loaded.threads.values()))
    for warning in filter(None, warnings):
        click.echo(f"gilprof: warning: {profiles[0]}: {warning}", err=True)
    if contention and not loaded.sampling.mode.reads_states:
        raise UsageError(
            f"--contention needs a profile sampled with --mode states (the default) or "
            f"contention; {profiles[0]} is {loaded.sampling.mode} mode, which records who "
            "holds the GIL but not who waits"
        )
    # every thread's state was recorded: waits and blame are part of the answer
    contention = contention or has_spans(loaded)
    per_step = PerStep.of(loaded, steps_log, verdict, recipe, watched, what_if, all_frames)
    attribution = attribute(
        loaded, by_thread=by_thread, lines=lines, thread_pattern=thread_pattern, watch=watched
    )
    notes = {w.function: (w.why, w.fix) for w in recipe.watch} if recipe else {}
    data = ReportData(
        loaded,
        attribution,
        lines,
        analyze(loaded) if contention else None,
        notes,
        verdict=per_step.verdict,
        top=top,
        all_frames=all_frames,
        costs=per_step.costs,
        savings=per_step.savings,
        what_if=per_step.what_if,
        wide=wide,
        full_notes=full_notes,
        blocking=verdict.blocking(loaded, recipe, per_step.verdict),
    )
    emit("report", fmt, output, data)
