"""`gilprof gate`: budgets over saved profiles and logs, as an exit code for CI."""

from __future__ import annotations

import click

from gilprof.analysis.gate import GateBudgets, evaluate, merge_budgets, parse_share
from gilprof.cli._options import format_option
from gilprof.cli._output import append_github_summary
from gilprof.cli._recipe import recipe_option
from gilprof.errors import BudgetFailed
from gilprof.profile import Profile, write_text_atomic
from gilprof.recipes import Recipe, load_budget_file
from gilprof.renderers import render
from gilprof.steps import rank_steps


@click.command("gate")
@click.argument("profile", type=click.Path())
@click.option("--max-share", "max_share", multiple=True, metavar="FUNC=PCT",
              help="Fail if FUNC's total GIL share exceeds PCT percent (repeatable).")
@click.option("--baseline", type=click.Path(), help="Baseline profile for --max-regression.")
@click.option("--max-regression", type=click.FloatRange(min=0), metavar="PCT",
              help="Fail on a significant relative increase beyond PCT percent vs --baseline.")
@click.option("--min-share", type=click.FloatRange(0, 100), default=2.0, show_default=True,
              help="Functions below this share (percent) are not gated for regression.")
@click.option("--max-utilization", type=click.FloatRange(0, 100), metavar="PCT", help="Fail if GIL utilization exceeds PCT percent.")
@click.option("--steps", "steps_log", type=click.Path(), help="Iteration log for --max-host-step-p50.")
@click.option("--steps-rank", type=int, help="Rank in the log (default: the profile's rank).")
@click.option("--skip-warmup", type=click.IntRange(min=0), default=3, show_default=True)
@click.option("--max-host-step-p50", type=click.FloatRange(min=0), metavar="MS", help="Fail if host step p50 exceeds MS.")
@click.option("--budget", "budget_file", type=click.Path(), help="TOML file with a [gate] table (a recipe works too); flags override it.")
@recipe_option
@click.option("--junit", type=click.Path(dir_okay=False), help="Also write JUnit XML (one testcase per budget).")
@format_option("gate", "table")
def command(profile: str, max_share: tuple[str, ...], baseline: str | None,
            max_regression: float | None, min_share: float, max_utilization: float | None,
            steps_log: str | None, steps_rank: int | None, skip_warmup: int,
            max_host_step_p50: float | None, budget_file: str | None, recipe: Recipe | None,
            junit: str | None, fmt: str) -> None:
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
    """
    # Precedence: recipe < budget file < flags.
    budgets = merge_budgets([
        recipe.gate if recipe else GateBudgets(),
        load_budget_file(budget_file) if budget_file else GateBudgets(),
        GateBudgets(max_share=parse_share(max_share), max_utilization=max_utilization,
                    max_host_step_p50_ms=max_host_step_p50, max_regression=max_regression)])
    if baseline is None and max_regression is None and budgets.max_regression is not None:
        # A recipe's or file's regression budget applies only when a baseline is given.
        budgets = GateBudgets(max_share=budgets.max_share, max_utilization=budgets.max_utilization,
                              max_host_step_p50_ms=budgets.max_host_step_p50_ms)
    loaded = Profile.load(profile)
    baseline_profile = Profile.load(baseline) if baseline else None
    steps = None
    if steps_log:
        rank = steps_rank if steps_rank is not None else (loaded.target.rank or 0)
        steps = rank_steps(steps_log, rank, skip_warmup)
    result = evaluate(loaded, budgets, baseline=baseline_profile, steps=steps, min_share=min_share)
    for r in result.results:
        if r.detail == "never seen in the profile":
            click.echo(f"gilprof: warning: {r.name}: the function never appears in {profile}; "
                       "check its spelling, or this budget can never fail", err=True)
    if baseline_profile is not None and budgets.max_regression is None:
        click.echo("gilprof: warning: --baseline is only used by --max-regression, which is not set",
                   err=True)
    click.echo(render("gate", fmt, result), nl=False)
    if junit:
        write_text_atomic(junit, render("gate", "junit", result))
    append_github_summary(render("gate", "markdown", result))
    if not result.passed:
        names = ", ".join(r.name for r in result.failed)
        raise BudgetFailed(f"{len(result.failed)} of {len(result.results)} budgets failed: {names}")
