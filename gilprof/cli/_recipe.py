"""The shared `--recipe NAME|PATH` option: a recipe supplies defaults, flags override them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from gilprof.analysis.attribution import DEFAULT_WATCH
from gilprof.recipes import Recipe, load_recipe

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
