"""Helpers shared by the benchmark scripts: machine facts, child processes and their rusage,
options, output.

The scripts run from a checkout (`python benchmarks/overhead.py`), so this module also makes
the checkout's `gilprof` importable when the package is not installed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

REPO_ROOT = Path(__file__).resolve().parents[1]


def ensure_gilprof_importable() -> None:
    try:
        import gilprof  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(REPO_ROOT))


def child_env() -> dict[str, str]:
    """Environment for child Pythons: they must import the same gilprof as this script."""
    env = dict(os.environ)
    import gilprof

    root = str(Path(gilprof.__file__).resolve().parents[1])
    paths = [root, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


class BenchmarkError(Exception):
    """A failure the user can act on; printed as one line."""


def fail(message: str) -> NoReturn:
    print(f"benchmark: error: {message}", file=sys.stderr)
    sys.exit(2)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine_info() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "load_average": load_average(),
    }


def start_in_session(
    argv: Sequence[str],
    *,
    stdin: Any = subprocess.DEVNULL,
    stdout: Any = subprocess.DEVNULL,
    stderr: Any = subprocess.DEVNULL,
    **popen: Any,
) -> subprocess.Popen[bytes]:
    """`argv` in a session (and process group) of its own, its streams /dev/null unless given:
    `stop_session` then stops it whole, and a Ctrl-C at the terminal reaches only this script.

    Not gilprof.sampling.processes.Child: that registers the child as gilprof's own, and
    discovery never picks its own processes as targets, while a benchmark's jobs are targets.
    """
    return subprocess.Popen(
        list(argv), stdin=stdin, stdout=stdout, stderr=stderr, start_new_session=True, **popen
    )


def stop_session(proc: subprocess.Popen[Any], grace: float = 10.0) -> None:
    """SIGTERM to the process group of a child from `start_in_session`; SIGKILL after `grace` s."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def timed(func: Callable[[], Any]) -> tuple[Any, float]:
    """`func()` and the wall seconds it took."""
    started = time.perf_counter()
    value = func()
    return value, time.perf_counter() - started


def wait_with_rusage(
    proc: subprocess.Popen[Any],
    timeout: float,
    poll: float = 0.02,
    on_poll: Callable[[], None] | None = None,
) -> tuple[int, Any]:
    """Reap `proc` with wait4, which gives that child's own rusage (its py-spy included).

    RUSAGE_CHILDREN would be the maximum over every child reaped so far, so one small run
    after a big one would report the big one's peak.
    """
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage
        if time.monotonic() > deadline:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            args = proc.args if isinstance(proc.args, (list, tuple)) else [proc.args]
            raise BenchmarkError(f"{' '.join(map(str, args))} did not finish in {timeout:g} s")
        if on_poll is not None:
            on_poll()
        time.sleep(poll)


def print_json(data: Any) -> None:
    try:
        print(json.dumps(data, indent=2), flush=True)
    except BrokenPipeError:
        # The reader (`| head`) went away: not an error worth a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def print_table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], notes: Sequence[str] = ()
) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*row)
    # Piped output gets a fixed width rather than 80 columns, so the rows stay on one line.
    console = Console(width=None if sys.stdout.isatty() else 140)
    console.print(table)
    for note in notes:
        console.print(note, highlight=False)


def megabytes(count: float) -> str:
    return f"{count / 1e6:.1f} MB"


def output_options(
    parser: argparse.ArgumentParser,
    *,
    quick: str | None = None,
    json_help: str = "print JSON instead of a table",
) -> None:
    """The options every benchmark ends with: `--quick`, a smoke run that `quick` describes
    (none when it is None), and `--json`."""
    if quick is not None:
        parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--json", action="store_true", help=json_help)


def run_main(
    argv: list[str] | None,
    parse_args: Callable[[list[str] | None], Any],
    run: Callable[[Any], Any],
    print_report: Callable[[Any], None],
) -> int:
    """The shared entry point: parse, run, print as JSON or a table; one line on failure."""
    from gilprof.errors import GilprofError

    options = parse_args(argv)
    try:
        result = run(options)
    except (BenchmarkError, GilprofError) as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail("interrupted")
    if options.json:
        print_json(result)
    else:
        print_report(result)
    return 0
