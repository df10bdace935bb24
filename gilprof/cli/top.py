"""`gilprof top`: a live view of who holds the GIL, redrawn after each sampling window."""

from __future__ import annotations

import os
import select
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import click

from gilprof.cli._options import SamplingChoice, backend_option, match_option, sampling_options
from gilprof.renderers.top import TopView
from gilprof.sampling.capture import CaptureRequest, capture
from gilprof.sampling.discover import Selection, TargetQuery


@contextmanager
def quit_key(pressed: threading.Event) -> Iterator[None]:
    """While inside, `q` on a terminal's stdin sets `pressed` and interrupts the capture the
    way Ctrl-C does (SIGINT), so the sampler is stopped by the same path."""
    if not sys.stdin.isatty():
        yield
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready and os.read(fd, 1) in (b"q", b"Q"):
                pressed.set()
                os.kill(os.getpid(), signal.SIGINT)
                return

    tty.setcbreak(fd)  # keys arrive one by one; Ctrl-C still raises SIGINT
    reader = threading.Thread(target=watch, name="gilprof-top-keys", daemon=True)
    reader.start()
    try:
        yield
    finally:
        done.set()
        reader.join(1.0)
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@click.command("top")
@click.option(
    "--pid", type=int, help="Sample this PID (a launcher PID resolves to its Python ranks)."
)
@click.option("--rank", type=int, help="Global rank to sample (default 0 when a job is found).")
@match_option
@sampling_options
@backend_option
@click.option("-o", "--output", type=click.Path(), help="Also save the profile here.")
def command(
    pid: int | None,
    rank: int | None,
    match: str | None,
    sampling: SamplingChoice,
    backend: str,
    output: str | None,
) -> None:
    """Live view by GIL: threads' held/wait shares and the top functions, per sampling window.

    \b
    Examples:
      gilprof top --rank 0
      gilprof top --pid 4242 --window 1       # held / waiting / native per thread
      gilprof top --rank 0 -o rank0.json      # also keep the profile
    q or Ctrl-C quits; the sampler stops with it.
    """
    pressed = threading.Event()
    with tempfile.TemporaryDirectory(prefix="gilprof-top-") as scratch:
        request = CaptureRequest(
            settings=sampling.settings,
            backend=backend,
            window_s=sampling.window,
            wanted=TargetQuery(pid, rank, selection=Selection(match)),
            output=output or os.path.join(scratch, "top.json"),
        )
        view = TopView()
        with quit_key(pressed):
            result = capture(request, view)
    for line in view.messages:
        if output or scratch not in line:  # the scratch profile is gone: do not mention it
            click.echo(f"gilprof: {line}", err=True)
    if result.exit_code and not pressed.is_set():
        click.get_current_context().exit(result.exit_code)
