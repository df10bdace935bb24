"""`gilprof compare BEFORE AFTER`: did the change take GIL time off rank 0?"""

from __future__ import annotations

import click

from gilprof.analysis.compare import compare_profiles
from gilprof.analysis.verdict import Verdict
from gilprof.analysis.waits import compare_waits
from gilprof.cli._options import (
    all_frames_option,
    format_option,
    output_option,
    top_option,
    watch_options,
)
from gilprof.cli._output import check_output, emit
from gilprof.cli._recipe import recipe_option, watch_list
from gilprof.cli._verdict import VerdictChoice, verdict_options
from gilprof.errors import UsageError
from gilprof.profile import Profile
from gilprof.recipes import Recipe
from gilprof.renderers import info


@click.command("compare")
@click.argument("before", type=click.Path())
@click.argument("after", type=click.Path())
@click.option("--steps-before", type=click.Path(), help="Iteration log of the before run.")
@click.option("--steps-after", type=click.Path(), help="Iteration log of the after run.")
@verdict_options
@click.option("--by-thread", is_flag=True, help="Compare functions per thread.")
@watch_options
@top_option(30)
@all_frames_option
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
    by_thread: bool,
    watch: tuple[str, ...],
    no_default_watch: bool,
    top: int,
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
    also gets its host/device verdict from its loop thread (see `gilprof report --steps`).
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
    )
    verdicts: tuple[Verdict | None, Verdict | None] = (None, None)
    if sb is not None and sa is not None:
        verdicts = tuple(  # type: ignore[assignment]  # exactly two, one per side
            verdict.judge(p, s, recipe, watched) for p, s in ((b, sb), (a, sa))
        )
    waits = compare_waits(b, a, confidence=confidence) if fmt != "html" else None
    emit(
        "compare",
        fmt,
        output,
        comparison,
        profiles=(b, a),
        steps=(sb, sa),
        verdicts=verdicts,
        waits=waits,
    )
