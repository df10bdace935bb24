"""The shared `--recipe NAME|PATH` option: a recipe supplies defaults, flags override them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from gilprof.analysis.attribution import DEFAULT_WATCH
from gilprof.cli._options import StartChoice
from gilprof.recipes import Recipe, load_recipe
from gilprof.sampling.triggers import StartSpec, start_spec

F = TypeVar("F", bound=Callable[..., Any])


def _load(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Recipe | None:
    return load_recipe(value) if value else None


def recipe_option(func: F) -> F:
    return click.option(
        "--recipe",
        callback=_load,
        metavar="NAME|PATH",
        help="Built-in recipe (see `gilprof recipes`) or a recipe TOML file; flags override it.",
    )(func)


def watch_list(
    recipe: Recipe | None, watch: Sequence[str], *, defaults: bool = True
) -> tuple[str, ...]:
    """Functions to watch: the defaults (unless --no-default-watch), the recipe's, then --watch."""
    return (
        (DEFAULT_WATCH if defaults else ())
        + (recipe.watch_names() if recipe else ())
        + tuple(watch)
    )


def start_of(
    choice: StartChoice, recipe: Recipe | None, *, launch: bool, quiet: bool = False
) -> StartSpec | None:
    """The start trigger: the options' if any was given, else the recipe's [start] table.

    A recipe's `on` reads a launched job's output; attached to a running process there is
    none, so its `on_log` is used if it has one, else sampling starts at once (said on
    stderr). An explicit --start-on without a launched job is refused later (exit 2).
    """
    if choice.has_trigger or recipe is None or recipe.start is None:
        return start_spec(
            choice.start_after, choice.start_on, choice.start_on_log, choice.start_timeout
        )
    defaults = recipe.start
    on, on_log = defaults.on, defaults.on_log
    if on is not None and not launch:
        if on_log is None and not quiet:
            click.echo(
                f"gilprof: recipe {recipe.name}: start.on {on!r} needs a launched job's output "
                "(`-- COMMAND`); sampling starts at once (--start-on-log FILE:REGEX waits "
                "for a log line)",
                err=True,
            )
        on = None
    if on is not None:
        on_log = None  # launch mode: the job's own output is the surer source
    if on is None and on_log is None and defaults.after is None:
        return None
    return start_spec(defaults.after, on, on_log, choice.start_timeout)
