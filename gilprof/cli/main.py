"""The `gilprof` click group: the only place where errors become exit codes."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from gilprof import __version__
from gilprof.errors import GilprofError

# Each module defines `command`, a click.Command; the order is the order of `--help`.
COMMAND_MODULES = (
    "demo",
    "ps",
    "attach",
    "exec_",
    "report",
    "merge",
    "steps",
    "compare",
    "gate",
    "recipes",
    "lint",
    "bench_reference",
)


class GilprofGroup(click.Group):
    """Turns GilprofError into one `gilprof: error: ...` line and its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except GilprofError as exc:
            click.echo(f"gilprof: error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("gilprof: interrupted", err=True)
            ctx.exit(130)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(cls=GilprofGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gilprof")
def cli() -> None:
    """Find and fix GIL contention on the host side of distributed Python jobs.

    \b
    Typical session:
      gilprof ps                              # which Python ranks run here?
      gilprof attach --rank 0 -d 20 -o before.json
      gilprof report before.json              # who held the GIL, in which functions
      gilprof compare before.json after.json  # did the fix take GIL time off rank 0?
      gilprof gate after.json --max-share safe_broadcast=5
    """


def _register_commands() -> None:
    for name in COMMAND_MODULES:
        module_name = f"gilprof.cli.{name}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # command not shipped in this build
            raise
        cli.add_command(module.command)


_register_commands()


def main() -> None:
    cli.main(prog_name="gilprof")
    sys.exit(0)
