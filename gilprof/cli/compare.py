"""`gilprof compare BEFORE AFTER`: did the change take GIL time off rank 0?"""

from __future__ import annotations

import click

from gilprof.analysis.compare import compare_profiles
from gilprof.analysis.per_step import compare_costs, parse_renames, side_costs
from gilprof.analysis.verdict import Verdict
from gilprof.analysis.waits import compare_waits
from gilprof.cli._options import (
    format_option,
    output_option,
    rows_options,
    watch_options,
)
from gilprof.cli._output import check_output, emit
from gilprof.cli._recipe import recipe_option, watch_list
from gilprof.cli._verdict import VerdictChoice, verdict_options
from gilprof.errors import UsageError
from gilprof.profile import Profile
from gilprof.recipes import Recipe
from gilprof.renderers import info
from gilprof.renderers.compare import CompareView


@click.command("compare")
@click.argument("before", type=click.Path())
@click.argument("after", type=click.Path())
@click.option("--steps-before", type=click.Path(), help="Iteration log of the before run.")
@click.option("--steps-after", type=click.Path(), help="Iteration log of the after run.")
@verdict_options
@click.option(
    "--rename",
    "renames",
    multiple=True,
    metavar="OLD=NEW",
    help="Function OLD in the before profile is NEW in the after one (repeatable): one row "
    "per hot spot, e.g. --rename safe_broadcast_before=safe_broadcast.",
)
@click.option(
    "--unit",
    type=click.Choice(["step", "request"]),
    default="step",
    show_default=True,
    help="With step logs: judge functions on their cost to the loop in ms per step, or per "
    "scheduled request (the logs' num_scheduled_requests).",
)
@click.option("--by-thread", is_flag=True, help="Compare functions per thread.")
@watch_options
@rows_options(30)
@click.option("--confidence", type=click.FloatRange(0.5, 0.999), default=0.95, show_default=True)
@format_option("compare", "table")
@recipe_option
@output_option
def command(
    before: str,
    after: str,
    steps_before: str | None,
    steps_after: str | None,
    verdict: VerdictChoice,
    renames: tuple[str, ...],
    unit: str,
    by_thread: bool,
    watch: tuple[str, ...],
    no_default_watch: bool,
    top: int,
    wide: bool,
    all_frames: bool,
    confidence: float,
    fmt: str,
    recipe: Recipe | None,
    output: str | None,
) -> None:
    """Per-function GIL share before and after, with confidence intervals.

    \b
    Examples:
      gilprof compare before.json after.json
      gilprof compare before.json after.json --steps-before b.log --steps-after a.log
      gilprof compare before.json after.json --format markdown -o pr-comment.md

    \b
    Functions are matched by (name, file base name), so profiles from different machines
    line up. Intervals come from batch means over sampling windows (samples close in time
    are correlated; a binomial interval would claim changes that are not there). A row is
    "improved"/"regressed" only when its interval excludes zero. With step logs, each side
    also gets its host/device verdict from its loop thread (see `gilprof report --steps`),
    and a function is judged on its cost to the loop per unit of work (ms per step, or per
    request with --unit request), not on its share of wall time, which also grows when the
    job simply did more work (docs/per-step.md).
    """
    info("compare", fmt)  # an unknown format fails before any file is read
    check_output(output)  # and so does an -o that cannot be written
    if (steps_before is None) != (steps_after is None):
        raise UsageError("give both --steps-before and --steps-after, or neither")
    b, a = Profile.load(before), Profile.load(after)
    sb = sa = None
    if steps_before and steps_after:
        sb, sa = verdict.steps(steps_before, b), verdict.steps(steps_after, b)
    watched = watch_list(recipe, watch, defaults=not no_default_watch)
    renamed = parse_renames(renames)
    verdicts: tuple[Verdict | None, Verdict | None] = (None, None)
    costs = None
    if sb is not None and sa is not None:
        vb, va = verdict.judge(b, sb, recipe, watched), verdict.judge(a, sa, recipe, watched)
        verdicts = (vb, va)
        costs = compare_costs(
            side_costs(b, vb.loop.thread.tid, sb, renamed),
            side_costs(a, va.loop.thread.tid, sa, renamed),
            confidence,
            unit,
        )
    comparison = compare_profiles(
        b,
        a,
        by_thread=by_thread,
        watch=watched,
        top=top,
        all_frames=all_frames,
        confidence=confidence,
        steps_before=sb,
        steps_after=sa,
        renames=renamed,
        costs=costs,
    )
    waits = compare_waits(b, a, confidence=confidence) if fmt != "html" else None
    emit(
        "compare",
        fmt,
        output,
        CompareView(comparison, verdicts, waits, profiles=(b, a), steps=(sb, sa), wide=wide),
    )
