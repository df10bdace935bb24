"""`gilprof lint`: find known rank-0 GIL costs in Python source, without importing it."""

from __future__ import annotations

import click

from gilprof.cli._options import format_option
from gilprof.errors import InputError, UsageError
from gilprof.lint import DEFAULT_GETTERS, lint_paths
from gilprof.renderers import render


def _recipe_getters(name: str | None) -> tuple[str, ...]:
    if not name:
        return ()
    try:
        from gilprof.recipes import load_recipe
    except ImportError:  # pragma: no cover - recipes are part of every install
        raise UsageError("--recipe needs gilprof.recipes, which cannot be imported") from None
    return tuple(load_recipe(name).lint_getters)


@click.command("lint")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@format_option("lint", "table")
@click.option(
    "--getter",
    "getters",
    multiple=True,
    metavar="NAME",
    help="Treat attribute/method NAME as a getter that copies on every access "
    "(GP002), whatever the scanned code says. Repeat for several.",
)
@click.option(
    "--recipe",
    metavar="NAME|PATH",
    help="Also take the copying getters of this recipe's `lint_getters`.",
)
@click.option(
    "--no-default-getters",
    is_flag=True,
    help=f"Drop the built-in getter list ({', '.join(DEFAULT_GETTERS)}).",
)
@click.option(
    "--no-config",
    is_flag=True,
    help="Ignore [tool.gilprof.lint] in the scanned project's pyproject.toml.",
)
@click.option(
    "--include-tests",
    is_flag=True,
    help="Also lint test files in directories (reported at level note).",
)
@click.pass_context
def command(
    ctx: click.Context,
    paths: tuple[str, ...],
    fmt: str,
    getters: tuple[str, ...],
    recipe: str | None,
    no_default_getters: bool,
    no_config: bool,
    include_tests: bool,
) -> None:
    """Flag rank-0 GIL costs found in TensorRT-LLM, in any Python source (nothing is imported).

    \b
    Rules:
      GP001  a sender unpickles its own serialization: `pickle.loads` of the bytes
             (or a view of them) it just `pickle.dumps`-ed, a deep copy per call
             fix: gilprof.reference.broadcast.safe_broadcast (root returns its object)
      GP002  a getter that copies on every access read more than once per item: in
             a sort key and again in the loop over the same items, or twice in one
             loop body or key
             fix: gilprof.reference.adp_router.balance_requests_across_ranks (read
             it once per request and carry the length)
      GP003  a length compared with a value just computed from it, also when it was
             read back from a header this rank itself broadcast
             fix: drop the check, as gilprof.reference.broadcast.safe_broadcast does
      GP004  mpi4py's lowercase `bcast` (or a function returning its result) run per
             iteration, with the root using the result: the root gets an unpickled
             copy of the object it sent
             fix: gilprof.reference.bcast.bcast_after (`out = obj if rank == root else
             comm.bcast(None, root=root)`)

    \b
    Copying getters (GP002): --getter names, the recipe's lint_getters, and
    `getters = [...]` under [tool.gilprof.lint] in the nearest pyproject.toml
    above each PATH always count. Built-in TensorRT-LLM getters and properties the
    scanned code defines that build a new list/dict/set (list(...), a
    comprehension, .copy(), copy.deepcopy) count unless the scanned code also
    defines the name as a plain attribute or field.

    \b
    Examples:
      gilprof lint tensorrt_llm/_torch              # a tree: every *.py, recursively
      gilprof lint communicator.py adp_router.py
      gilprof lint src --getter get_beam_tokens     # one more copying getter
      gilprof lint tensorrt_llm --recipe trtllm-serve  # the recipe's getters
      gilprof lint src --format sarif > lint.sarif  # for code-scanning upload
      gilprof lint src --format json | jq '.findings[] | .rule'

    \b
    In a directory, test code (under tests/ or test/, test_*.py, *_test.py,
    conftest.py) is skipped unless --include-tests; hidden folders, __pycache__,
    node_modules, site-packages and environments are never walked. A file given
    by name is always scanned, whatever its name or suffix.

    \b
    Silence a finding with a comment on the line it names:
      tokens = req.input_token_ids  # gilprof: ignore[GP002]

    \b
    Exit status: 0 nothing flagged; 1 at least one finding; 2 nothing flagged but
    a path was missing, unreadable or unparseable (each named on stderr), or the
    options or the pyproject table were wrong.
    """
    explicit = (*getters, *_recipe_getters(recipe))
    bad = [name for name in explicit if not name.isidentifier()]
    if bad:
        raise UsageError(f"--getter expects an attribute name, got {bad[0]!r}")
    result = lint_paths(
        paths,
        () if no_default_getters else DEFAULT_GETTERS,
        extra_getters=explicit,
        include_tests=include_tests,
        project_config=not no_config,
    )
    for error in result.errors:
        click.echo(f"{error.location()}: error: {error.message}", err=True)
    click.echo(render("lint", fmt, result))
    if result.exit_code == 1:
        ctx.exit(1)
    if result.exit_code == 2:
        raise InputError(
            f"{len(result.errors)} of the given paths could not be read or parsed "
            "(listed above); nothing was flagged in the rest"
        )
