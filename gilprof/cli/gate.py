"""`gilprof gate`: budgets over saved profiles and logs, as an exit code for CI."""

from __future__ import annotations

from dataclasses import replace

import click

from gilprof.analysis.gate import GateBudgets, evaluate, parse_share, resolve_budgets
from gilprof.analysis.gate_per_step import parse_ms, per_step_results
from gilprof.analysis.per_step import loop_costs
from gilprof.cli._budgets import budget_options
from gilprof.cli._options import format_option
from gilprof.cli._output import append_github_summary
from gilprof.cli._recipe import recipe_option, watch_list
from gilprof.cli._verdict import VerdictChoice, verdict_options
from gilprof.errors import BudgetFailed, UsageError
from gilprof.profile import Profile, check_writable, write_text_atomic
from gilprof.recipes import Recipe, load_budget_file
from gilprof.renderers import info, render


@click.command("gate")
@click.argument("profile", type=click.Path())
@budget_options
@verdict_options
@click.option(
    "--budget",
    "budget_file",
    type=click.Path(),
    help="TOML file with a [gate] table (a recipe works too); flags override it.",
)
@click.option(
    "--max-ms-per-step",
    "max_ms_per_step",
    multiple=True,
    metavar="FUNC=MS",
    help="With --steps: FUNC's cost to the step loop (its own time plus the loop's GIL wait "
    "blamed on it) must stay at or under MS milliseconds per iteration (repeatable).",
)
@recipe_option
@click.option(
    "--junit",
    type=click.Path(),
    help="Also write JUnit XML (one testcase per budget).",
)
@format_option("gate", "table")
def command(
    profile: str,
    max_share: tuple[str, ...],
    max_wait: tuple[str, ...],
    max_blame: tuple[str, ...],
    baseline: str | None,
    max_regression: float | None,
    min_share: float,
    max_utilization: float | None,
    steps_log: str | None,
    max_host_step_p50: float | None,
    max_new_share: float,
    allow_missing: bool,
    verdict: VerdictChoice,
    max_ms_per_step: tuple[str, ...],
    budget_file: str | None,
    recipe: Recipe | None,
    junit: str | None,
    fmt: str,
) -> None:
    """Check a profile against budgets; exit 0 pass, 1 a budget failed, 2 bad input.

    \b
    Examples:
      gilprof gate after.json --max-share safe_broadcast=5 --max-utilization 80
      gilprof gate after.json --max-wait executor=10 --max-blame tokenize=5
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
      [gate.max_ms_per_step]   # with --steps
      safe_broadcast = 15

    Every failed budget is printed with its measured value and limit. When
    GITHUB_STEP_SUMMARY is set, a markdown summary is appended to it.

    \b
    A --max-share function never seen in the profile fails (a misspelt name would
    pass forever) unless --allow-missing. For --max-regression a function absent from
    the baseline (a fix's replacement) is reported as new and fails only when its share
    reaches --max-new-share; GIL utilization catches time added in total. With --steps
    the host/device verdict is printed too (information, not a budget), and
    --max-ms-per-step FUNC=MS budgets a function's cost to the loop per iteration.
    """
    info("gate", fmt)  # an unknown format fails before any file is read
    flag_ms = parse_ms(max_ms_per_step)
    if flag_ms and not steps_log:
        raise UsageError("--max-ms-per-step needs --steps LOG: costs are per iteration")
    if junit:
        check_writable(junit)
    budgets, note = resolve_budgets(
        recipe.gate if recipe else GateBudgets(),
        load_budget_file(budget_file) if budget_file else GateBudgets(),
        GateBudgets(
            max_share=parse_share(max_share),
            max_wait=parse_share(max_wait, "--max-wait", "THREAD"),
            max_blame=parse_share(max_blame, "--max-blame", "FUNC"),
            max_utilization=max_utilization,
            max_host_step_p50_ms=max_host_step_p50,
            max_regression=max_regression,
            max_ms_per_step=flag_ms,
        ),
        has_baseline=baseline is not None,
    )
    if budgets.max_ms_per_step and not steps_log:  # a file's or recipe's: flags need --steps
        note = "the budget file's max_ms_per_step is not checked without --steps LOG"
        budgets = replace(budgets, max_ms_per_step={})
    if note:
        click.echo(f"gilprof: note: {note}", err=True)
    if baseline is not None and budgets.max_regression is None:
        click.echo("gilprof: warning: --baseline is only used by --max-regression", err=True)
    loaded = Profile.load(profile)
    steps = verdict.steps(steps_log, loaded) if steps_log else None
    result = evaluate(
        loaded,
        budgets,
        baseline=Profile.load(baseline) if baseline else None,
        steps=steps,
        min_share=min_share,
        allow_missing=allow_missing,
        max_new_share=max_new_share,
    )
    judged = None
    if steps is not None:
        judged = verdict.judge(loaded, steps, recipe, watch_list(recipe, tuple(budgets.max_share)))
        if budgets.max_ms_per_step:
            costs = loop_costs(loaded, judged.loop.thread.tid, steps, all_frames=True)
            extra = tuple(per_step_results(costs, budgets.max_ms_per_step))
            result = replace(result, results=result.results + extra)
    click.echo(render("gate", fmt, result, verdict=judged), nl=False)
    if junit:
        write_text_atomic(junit, render("gate", "junit", result))
    append_github_summary(render("gate", "markdown", result, verdict=judged))
    if not result.passed:
        names = ", ".join(r.name for r in result.failed)
        raise BudgetFailed(f"{len(result.failed)} of {len(result.results)} budgets failed: {names}")
