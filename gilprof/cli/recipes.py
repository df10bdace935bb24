"""`gilprof recipes`: list the built-in recipes, or show and validate one."""

from __future__ import annotations

import click

from gilprof.cli._options import format_option
from gilprof.errors import UsageError
from gilprof.recipes import list_recipes, load_recipe
from gilprof.renderers import render


@click.command("recipes")
@click.option("--show", "show", metavar="NAME|FILE", help="Print one recipe and check it.")
@format_option("recipes", "table")
@click.option("--json", "as_json", is_flag=True, hidden=True, help="Same as --format json.")
@click.option("--plain", is_flag=True, help="Same as --format plain: tab-separated list, no table.")
def command(show: str | None, fmt: str, as_json: bool, plain: bool) -> None:
    """List the recipes for known serving stacks, or show one.

    A recipe tells gilprof how to find the process that matters (rank, role,
    command line, ancestors), how to sample it, which functions are known GIL
    hot spots there and why, where the iteration log is, and gate budgets.

    \b
    Examples:
      gilprof recipes                          # name and description of each
      gilprof recipes --show trtllm-disagg-gen # the TOML plus a checked summary
      gilprof recipes --show ./my-stack.toml   # validate your own recipe file
      gilprof recipes --format json            # for scripts (--json for short)

    A file given to --show is only parsed and checked; nothing in it is run.
    """
    if as_json and plain:
        raise UsageError("--json and --plain are alternatives; give one")
    fmt = "json" if as_json else "plain" if plain else fmt
    if show is not None:
        click.echo(render("recipe", fmt, load_recipe(show)))
        return
    click.echo(render("recipes", fmt, list_recipes()))
