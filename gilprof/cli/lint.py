"""`gilprof lint`: find the seed's GIL-heavy anti-patterns in source, without importing it."""

from __future__ import annotations

import click

from gilprof.errors import InputError, UsageError
from gilprof.lint import DEFAULT_GETTERS, lint_paths
from gilprof.renderers import lint as lint_renderers  # registers the "lint" renderers
from gilprof.renderers import render


@click.command("lint")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(lint_renderers.FORMATS),
    default="text",
    show_default=True,
    help="text: one finding a line; json: schema gilprof.lint/1; sarif: SARIF 2.1.0.",
)
@click.option(
    "--getter",
    "getters",
    multiple=True,
    metavar="NAME",
    help="Also treat attribute/method NAME as a getter that copies on every access "
    "(GP002). Repeat for several.",
)
@click.option(
    "--no-default-getters",
    is_flag=True,
    help=f"Drop the built-in getter list ({', '.join(DEFAULT_GETTERS)}); "
    "only --getter names count.",
)
@click.pass_context
def command(
    ctx: click.Context,
    paths: tuple[str, ...],
    fmt: str,
    getters: tuple[str, ...],
    no_default_getters: bool,
) -> None:
    """Flag the seed's rank-0 GIL costs in Python source (static: nothing is imported).

    \b
    Rules:
      GP001  a sender unpickles its own serialization: `pickle.loads` of the bytes
             (or a slice/view of them) it just `pickle.dumps`-ed, a deep copy per call
             fix: gilprof.reference.broadcast.safe_broadcast (return the original
             object on the root)
      GP002  a getter that copies on every access (input_token_ids, ...) read more
             than once per item: in a sort key and again in the loop over the same
             items, or twice in one loop body or key
             fix: gilprof.reference.adp_router.balance_requests_across_ranks (read
             it once per request and carry the length)
      GP003  a length compared with a value just computed from it (`n = len(x)` then
             `len(x) != n`, with nothing rebinding or resizing either in between)
             fix: drop the check, as gilprof.reference.broadcast.safe_broadcast does

    \b
    Examples:
      gilprof lint tensorrt_llm/_torch              # a tree: every *.py, recursively
      gilprof lint communicator.py adp_router.py
      gilprof lint src --getter get_beam_tokens     # one more copying getter
      gilprof lint src --format sarif > lint.sarif  # for code-scanning upload
      gilprof lint src --format json | jq '.findings[] | .rule'

    \b
    Directories skip hidden folders (.git, .venv, ...), __pycache__, node_modules,
    site-packages and environments (folders holding pyvenv.cfg or conda-meta). A
    file given by name is scanned whatever its suffix.

    \b
    Silence a finding with a comment on the line it names:
      tokens = req.input_token_ids  # gilprof: ignore[GP002]
      (`# gilprof: ignore` alone silences every rule on that line)

    \b
    Exit status:
      0  nothing flagged
      1  at least one finding (even if some paths could not be read)
      2  nothing flagged, but a path was missing or a file could not be read or
         parsed: each is named on stderr and the scan goes on past it, so a
         typo'd path or a syntax error never passes as a clean run
    """
    bad = [name for name in getters if not name.isidentifier()]
    if bad:
        raise UsageError(f"--getter expects an attribute name, got {bad[0]!r}")
    names = tuple(
        dict.fromkeys(([] if no_default_getters else list(DEFAULT_GETTERS)) + list(getters))
    )
    result = lint_paths(paths, getters=names)
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
