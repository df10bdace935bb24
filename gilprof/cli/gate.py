"""`gilprof gate`: budgets over saved profiles and logs, as an exit code for CI."""

from __future__ import annotations

import click

from gilprof.analysis.attribution import DEFAULT_WATCH
from gilprof.analysis.gate import GateBudgets, evaluate, merge_budgets, parse_share
from gilprof.cli._options import format_option
from gilprof.cli._output import append_github_summary
from gilprof.cli._recipe import recipe_option
from gilprof.cli._verdict import judge, loop_options
from gilprof.errors import BudgetFailed, UsageError
from gilprof.profile import Profile, write_text_atomic
from gilprof.recipes import Recipe, load_budget_file
from gilprof.renderers import render
from gilprof.steps import rank_steps


@click.command("gate")
@click.argument("profile", type=click.Path())
@click.option(
    "--max-share",
    "max_share",
    multiple=True,
    metavar="FUNC=PCT",
    help="Fail if FUNC's total GIL share exceeds PCT percent (repeatable).",
)
@click.option("--baseline", type=click.Path(), help="Baseline profile for --max-regression.")
@click.option(
    "--max-regression",
    type=click.FloatRange(min=0),
    metavar="PCT",
    help="Fail on a significant relative increase beyond PCT percent vs --baseline.",
)
@click.option(
    "--min-share",
    type=click.FloatRange(0, 100),
    default=2.0,
    show_default=True,
    help="Functions below this share (percent) are not gated for regression.",
)
@click.option(
    "--max-utilization",
    type=click.FloatRange(0, 100),
    metavar="PCT",
    help="Fail if GIL utilization exceeds PCT percent.",
)
@click.option(
    "--steps", "steps_log", type=click.Path(), help="Iteration log for --max-host-step-p50."
)
@click.option("--steps-rank", type=int, help="Rank in the log (default: the profile's rank).")
@click.option("--skip-warmup", type=click.IntRange(min=0), default=3, show_default=True)
@click.option(
    "--max-host-step-p50",
    type=click.FloatRange(min=0),
    metavar="MS",
    help="Fail if host step p50 exceeds MS.",
)
@click.option(
    "--max-new-share",
    type=click.FloatRange(0, 100),
    default=25.0,
    show_default=True,
    metavar="PCT",
    help="With --max-regression: a function absent from the baseline fails only if its share is at least PCT.",
)
@click.option(
    "--allow-missing",
    is_flag=True,
    help="Pass a --max-share budget whose function never appears in the profile.",
)
@loop_options
@click.option(
    "--budget",
    "budget_file",
    type=click.Path(),
    help="TOML file with a [gate] table (a recipe works too); flags override it.",
)
@recipe_option
@click.option(
    "--junit",
    type=click.Path(dir_okay=False),
    help="Also write JUnit XML (one testcase per budget).",
)
@format_option("gate", "table")
def command(
    profile: str,
    max_share: tuple[str, ...],
    baseline: str | None,
    max_regression: float | None,
    min_share: float,
    max_utilization: float | None,
    steps_log: str | None,
    steps_rank: int | None,
    skip_warmup: int,
    max_host_step_p50: float | None,
    max_new_share: float,
    allow_missing: bool,
    loop_thread: str | None,
    device_wait: tuple[str, ...],
    budget_file: str | None,
    recipe: Recipe | None,
    junit: str | None,
    fmt: str,
) -> None:
    """Check a profile against budgets; exit 0 pass, 1 a budget failed, 2 bad input.

    \b
    Examples:
      gilprof gate after.json --max-share safe_broadcast=5 --max-utilization 80
      gilprof gate after.json --baseline main.json --max-regression 10
      gilprof gate after.json --steps rank0.log --max-host-step-p50 110 --junit gate.xml
      gilprof gate after.json --budget budgets.toml

    \b
    budgets.toml:
      [gate]
      max_utilization = 80
      max_regression = 10
      [gate.max_share]
      safe_broadcast = 5

    Every failed budget is printed with its measured value and limit. When
    GITHUB_STEP_SUMMARY is set, a markdown summary is appended to it.

    \b
    A --max-share function never seen in the profile fails (a misspelt name would
    pass forever) unless --allow-missing. For --max-regression a function absent from
    the baseline (a fix's replacement) is reported as new and fails only when its share
    reaches --max-new-share; GIL utilization catches time added in total. With --steps
    the host/device verdict is printed too (information, not a budget).
    """
    # Precedence: recipe < budget file < flags.
    file_budgets = load_budget_file(budget_file) if budget_file else GateBudgets()
    if file_budgets.max_regression is not None and baseline is None:
        raise UsageError(
            f"{budget_file} sets max_regression, which needs a baseline profile "
            "(--baseline PROFILE)"
        )
    budgets = merge_budgets(
        [
            recipe.gate if recipe else GateBudgets(),
            file_budgets,
            GateBudgets(
                max_share=parse_share(max_share),
                max_utilization=max_utilization,
                max_host_step_p50_ms=max_host_step_p50,
                max_regression=max_regression,
            ),
        ]
    )
    if baseline is None and max_regression is None and budgets.max_regression is not None:
        # A recipe's regression budget is a default for runs with a baseline: without one it is
        # skipped, and said so (a budget file's or flag's is an error above / in evaluate).
        click.echo(
            f"gilprof: note: the recipe's max_regression ({budgets.max_regression:g}%) "
            "is not checked without --baseline",
            err=True,
        )
        budgets = GateBudgets(
            max_share=budgets.max_share,
            max_utilization=budgets.max_utilization,
            max_host_step_p50_ms=budgets.max_host_step_p50_ms,
        )
    loaded = Profile.load(profile)
    baseline_profile = Profile.load(baseline) if baseline else None
    steps = verdict = None
    if steps_log:
        rank = steps_rank if steps_rank is not None else (loaded.target.rank or 0)
        steps = rank_steps(steps_log, rank, skip_warmup)
    result = evaluate(
        loaded,
        budgets,
        baseline=baseline_profile,
        steps=steps,
        min_share=min_share,
        allow_missing=allow_missing,
        max_new_share=max_new_share,
    )
    if steps is not None:
        watch = DEFAULT_WATCH + (recipe.watch_names() if recipe else ()) + tuple(budgets.max_share)
        verdict = judge(
            loaded,
            steps,
            loop_thread=loop_thread,
            device_wait=device_wait,
            recipe=recipe,
            watch=watch,
        )
    if baseline_profile is not None and budgets.max_regression is None:
        click.echo(
            "gilprof: warning: --baseline is only used by --max-regression, which is not set",
            err=True,
        )
    click.echo(render("gate", fmt, result, verdict=verdict), nl=False)
    if junit:
        write_text_atomic(junit, render("gate", "junit", result))
    append_github_summary(render("gate", "markdown", result, verdict=verdict))
    if not result.passed:
        names = ", ".join(r.name for r in result.failed)
        raise BudgetFailed(f"{len(result.failed)} of {len(result.results)} budgets failed: {names}")
