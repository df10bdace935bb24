"""Options and glue shared by the commands that give the host/device verdict
(report, compare, gate, demo): which thread runs the step loop, where it waits for the device."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from gilprof.analysis.verdict import Verdict, verdict
from gilprof.profile import Profile
from gilprof.recipes import Recipe
from gilprof.steps import RankSteps, rank_steps

F = TypeVar("F", bound=Callable[..., Any])


def loop_options(func: F) -> F:
    """--loop-thread REGEX and --device-wait FUNC (repeatable)."""
    for option in reversed(
        (
            click.option(
                "--loop-thread",
                metavar="REGEX",
                help="Thread that runs the step loop, for the host/device verdict "
                "(default: the recipe's loop_thread, else the busiest thread running "
                "a watched function).",
            ),
            click.option(
                "--device-wait",
                multiple=True,
                metavar="FUNC",
                help="Also count time in FUNC as waiting for the device (repeatable; "
                "synchronize, Event.wait and Condition.wait always count).",
            ),
        )
    ):
        func = option(func)
    return func


def judge(
    profile: Profile,
    steps: RankSteps,
    *,
    loop_thread: str | None,
    device_wait: Sequence[str],
    recipe: Recipe | None,
    watch: Sequence[str],
) -> Verdict:
    """The verdict for one profile and its rank's step statistics."""
    spec = recipe.steps if recipe else None
    return verdict(
        profile,
        steps.host_step_ms.p50,
        steps.device_step_ms.p50 if steps.device_step_ms else None,
        loop_thread=loop_thread,
        recipe_loop_thread=spec.loop_thread if spec else None,
        watch=watch,
        device_wait=tuple(device_wait) + (spec.device_wait if spec else ()),
    )


def verdict_from_log(
    profile: Profile,
    steps_log: str,
    *,
    steps_rank: int | None,
    skip_warmup: int,
    loop_thread: str | None,
    device_wait: Sequence[str],
    recipe: Recipe | None,
    watch: Sequence[str],
) -> Verdict:
    """The verdict for a profile and the iteration log of its rank (the profile's, else 0)."""
    rank = steps_rank if steps_rank is not None else (profile.target.rank or 0)
    steps = rank_steps(steps_log, rank, skip_warmup)
    return judge(
        profile,
        steps,
        loop_thread=loop_thread,
        device_wait=device_wait,
        recipe=recipe,
        watch=watch,
    )
