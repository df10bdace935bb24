"""The `gilprof` click group: the only place where errors become exit codes."""

from __future__ import annotations

import importlib
import signal
import sys
from typing import Any

import click

from gilprof import __version__
from gilprof.errors import GilprofError

# Command name -> module defining `command`, a click.Command; the order is that of `--help`.
# Modules load on demand: `gilprof exec` on a rank that is not sampled must start fast.
COMMANDS = {
    "demo": "demo",
    "ps": "ps",
    "attach": "attach",
    "exec": "exec_",
    "report": "report",
    "top": "top",
    "watch": "watch",
    "merge": "merge",
    "steps": "steps",
    "compare": "compare",
    "gate": "gate",
    "recipes": "recipes",
    "lint": "lint",
    "bench-reference": "bench_reference",
}


class GilprofGroup(click.Group):
    """Turns GilprofError into one `gilprof: error: ...` line and its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except GilprofError as exc:
            click.echo(f"gilprof: error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            _exiting_on_interrupt()
            click.echo("gilprof: interrupted", err=True)
            ctx.exit(130)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        loaded: click.Command = importlib.import_module(f"gilprof.cli.{module}").command
        return loaded


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


def _exiting_on_interrupt() -> None:
    """Ignore further SIGINTs: the command has cleaned up and exits 130. A second one
    (Ctrl-C pressed twice) would otherwise raise KeyboardInterrupt inside the exit path,
    and Python reports an escaped KeyboardInterrupt by killing itself with SIGINT: an exit
    status of -2 instead of 130."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _interrupt_once(_signum: int, _frame: Any) -> None:
    """SIGINT outside sampling (which sets a stop event instead): one KeyboardInterrupt,
    then the ones after it are ignored while the command unwinds and exits 130."""
    _exiting_on_interrupt()
    raise KeyboardInterrupt


def main() -> None:
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt_once)
    try:
        cli.main(prog_name="gilprof")
    except KeyboardInterrupt:  # raised outside a command's invoke
        _exiting_on_interrupt()
        click.echo("gilprof: interrupted", err=True)
        sys.exit(130)
    finally:
        _forget_caught_interrupt()
    sys.exit(0)


def _forget_caught_interrupt() -> None:
    """Under `python -m gilprof`, CPython exits by SIGINT (status -2) whenever the last
    string-compiled code it ran (a dataclass's generated methods, a namedtuple) ended in
    KeyboardInterrupt, even one gilprof caught and turned into exit 130: a Ctrl-C during a
    lazy import did that. The flag is reset at the start of each such run, so one empty run
    before exiting clears it. Measured: 13 of 40 early Ctrl-Cs exited -2 without this."""
    exec("pass", {})  # a constant string: only to reset the flag described above
