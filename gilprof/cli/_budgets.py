"""The options of `gilprof gate` that set budgets and what they are measured against."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from gilprof.cli._options import skip_warmup_option, steps_rank_option

F = TypeVar("F", bound=Callable[..., Any])


def budget_options(func: F) -> F:
    """--max-share, --baseline/--max-regression, --max-utilization, --steps/--max-host-step-p50..."""
    for option in reversed(
        (
            click.option(
                "--max-share",
                "max_share",
                multiple=True,
                metavar="FUNC=PCT",
                help="Fail if FUNC's total GIL share exceeds PCT percent (repeatable).",
            ),
            click.option(
                "--baseline", type=click.Path(), help="Baseline profile for --max-regression."
            ),
            click.option(
                "--max-regression",
                type=click.FloatRange(min=0),
                metavar="PCT",
                help="Fail on a significant relative increase beyond PCT percent vs --baseline.",
            ),
            click.option(
                "--min-share",
                type=click.FloatRange(0, 100),
                default=2.0,
                show_default=True,
                help="Functions below this share (percent) are not gated for regression.",
            ),
            click.option(
                "--max-utilization",
                type=click.FloatRange(0, 100),
                metavar="PCT",
                help="Fail if GIL utilization exceeds PCT percent.",
            ),
            click.option(
                "--steps",
                "steps_log",
                type=click.Path(),
                help="Iteration log for --max-host-step-p50.",
            ),
            steps_rank_option,
            skip_warmup_option,
            click.option(
                "--max-host-step-p50",
                type=click.FloatRange(min=0),
                metavar="MS",
                help="Fail if host step p50 exceeds MS.",
            ),
            click.option(
                "--max-new-share",
                type=click.FloatRange(0, 100),
                default=25.0,
                show_default=True,
                metavar="PCT",
                help="With --max-regression: a function absent from the baseline fails only if its share is at least PCT.",
            ),
            click.option(
                "--allow-missing",
                is_flag=True,
                help="Pass a --max-share budget whose function never appears in the profile.",
            ),
        )
    ):
        func = option(func)
    return func
