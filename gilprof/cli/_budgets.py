"""The options of `gilprof gate` that set budgets and what they are measured against."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from gilprof.cli._options import number_option, options

F = TypeVar("F", bound=Callable[..., Any])


def _percent(
    name: str, help: str, default: float | None = None, upper: float | None = 100.0
) -> Callable[[F], F]:
    return number_option(
        name, type=click.FloatRange(0, upper), default=default, metavar="PCT", help=help
    )


budget_options = options(
    click.option(
        "--max-share",
        "max_share",
        multiple=True,
        metavar="FUNC=PCT",
        help="Fail if FUNC's total GIL share exceeds PCT percent (repeatable).",
    ),
    click.option(
        "--max-wait",
        "max_wait",
        multiple=True,
        metavar="THREAD=PCT",
        help="Fail if a thread (name regex) waits for the GIL more than PCT percent of wall "
        "time (states or contention mode; repeatable).",
    ),
    click.option(
        "--max-blame",
        "max_blame",
        multiple=True,
        metavar="FUNC=PCT",
        help="Fail if threads wait for the GIL more than PCT percent of wall time while FUNC "
        "holds it (states or contention mode; repeatable).",
    ),
    click.option("--baseline", type=click.Path(), help="Baseline profile for --max-regression."),
    _percent(
        "--max-regression",
        "Fail on a significant relative increase beyond PCT percent vs --baseline.",
        upper=None,
    ),
    _percent("--min-share", "Functions below this share are not gated for regression.", 2.0),
    _percent("--max-utilization", "Fail if GIL utilization exceeds PCT percent."),
    click.option(
        "--steps", "steps_log", type=click.Path(), help="Iteration log for --max-host-step-p50."
    ),
    number_option(
        "--max-host-step-p50",
        type=click.FloatRange(min=0),
        metavar="MS",
        help="Fail if host step p50 exceeds MS.",
    ),
    _percent(
        "--max-new-share",
        "With --max-regression: a function absent from the baseline fails only if its share "
        "is at least PCT.",
        25.0,
    ),
    click.option(
        "--allow-missing",
        is_flag=True,
        help="Pass a --max-share budget whose function never appears in the profile.",
    ),
)
"""--max-share, --baseline/--max-regression, --max-utilization, --steps/--max-host-step-p50..."""
