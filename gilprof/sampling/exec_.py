"""`gilprof exec`: become one rank of a job, and sample it if this rank is selected.

Under a launcher (`mpiexec -n 8 gilprof exec --ranks 0 -- python app.py`) every rank starts
gilprof. A rank that is not selected replaces itself with the command (os.execvp): same PID,
same environment, no sampler, nothing of gilprof left running. A selected rank starts the
command as its child and samples it: a process may ptrace its own descendants even where
kernel.yama.ptrace_scope=1 forbids attaching to anything else, and it needs no capability
for a child that runs as the same user.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import NoReturn

import psutil

from gilprof.errors import EXIT_INTERRUPTED, GilprofError, TargetError, UsageError
from gilprof.model import Target
from gilprof.profile import Profile
from gilprof.sampling.backends.base import Backend
from gilprof.sampling.capture import (
    CaptureObserver,
    await_trigger,
    make_target,
    start_pump,
    stop_on_signals,
)
from gilprof.sampling.discover import (
    EXEC_PARENT_VARIABLE,
    ProcessInfo,
    RankIdentity,
    describe,
    is_launcher,
    is_python,
)
from gilprof.sampling.processes import Child, exit_status, inherited_fds
from gilprof.sampling.session import SessionOptions, WindowCallback, run_session
from gilprof.sampling.triggers import OutputPump, StartSpec, TriggerNotFired, WaitInterrupted

# A shell's codes for a command that cannot be run, so wrappers that test for them still work.
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126


class CommandNotFound(GilprofError, exit_code=EXIT_NOT_FOUND):
    """The command to run does not exist (exit 127, as a shell says it)."""


class CommandNotExecutable(GilprofError, exit_code=EXIT_NOT_EXECUTABLE):
    """The command exists but may not be run (exit 126, as a shell says it)."""


def is_selected(rank: int, wanted: set[int] | None) -> bool:
    """`wanted` as parse_rank_selection returns it: None selects every rank."""
    return wanted is None or rank in wanted


def _raise_launch_error(program: str, exc: OSError) -> NoReturn:
    if isinstance(exc, FileNotFoundError):
        raise CommandNotFound(f"cannot run {program!r}: command not found") from None
    if isinstance(exc, PermissionError):
        raise CommandNotExecutable(f"cannot run {program!r}: permission denied") from None
    raise CommandNotExecutable(f"cannot run {program!r}: {exc.strerror or exc}") from None


def exec_command(argv: Sequence[str]) -> NoReturn:
    """Replace this process with the command, as if the launcher had started it directly."""
    if not argv:
        raise UsageError("no command given; usage: gilprof exec [OPTIONS] -- COMMAND [ARGS]...")
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    # Python ignores these two for itself and an ignored signal survives exec; the command
    # must start with the dispositions a shell would give it.
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execvp(argv[0], list(argv))
    except OSError as exc:
        _raise_launch_error(argv[0], exc)


def _in_terminal_foreground() -> bool:
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


class ChildCommand:
    """The command, started as gilprof's child; signals gilprof receives are passed on.

    Launchers (hydra, and a terminal for Ctrl-C) signal a whole process group, so a child in
    gilprof's group would get each signal twice: once from the launcher, once forwarded.
    Under a launcher the child therefore gets its own group and gilprof forwards. In an
    interactive terminal the child stays in the foreground group, where it can read the
    terminal and already gets Ctrl-C itself; only SIGTERM is forwarded then.
    """

    def __init__(self, argv: Sequence[str], read_output: bool = False) -> None:
        if not argv:
            raise UsageError("no command given; usage: gilprof exec [OPTIONS] -- COMMAND [ARGS]...")
        self.argv = tuple(argv)
        self.own_group = not _in_terminal_foreground()
        # The child is this rank: it inherits what the launcher handed gilprof (mpich
        # hydra's PMI_FD connection, or PMI_Init fails and the job hangs), and its
        # environment names gilprof's PID so discovery counts the child, not gilprof, as the rank.
        env = {**os.environ, EXEC_PARENT_VARIABLE: str(os.getpid())}
        # With read_output (--start-on) its stdout and stderr are pipes that gilprof reads
        # and passes through.
        # Python buffers a pipe 8 KiB at a time: PYTHONUNBUFFERED lets each line through.
        pipe = subprocess.PIPE if read_output else None
        if read_output:
            env.setdefault("PYTHONUNBUFFERED", "1")
        try:
            self.child = Child(
                argv,
                group="new" if self.own_group else "same",
                pass_fds=inherited_fds(),
                env=env,
                stdout=pipe,
                stderr=pipe,
            )
        except OSError as exc:
            _raise_launch_error(argv[0], exc)
        self.proc = self.child.proc

    @property
    def pid(self) -> int:
        return self.child.pid

    def forward(self, sig: int) -> None:
        if sig == signal.SIGINT and not self.own_group:
            return  # the terminal sent it to the child's group as well
        self.child.forward(sig)

    def wait(self) -> int:
        """The child's exit status as a shell reports it."""
        self.child.wait()
        return self.child.exit_status


def find_python_process(
    child: ChildCommand, match: re.Pattern[str] | None, timeout: float, stop: threading.Event
) -> ProcessInfo:
    """The process to sample: the child itself if it is Python (and matches), else the first
    Python descendant that does (a wrapper script such as start_worker.sh runs the rank)."""
    deadline = time.monotonic() + timeout
    while True:
        if stop.is_set():
            raise TargetError("interrupted before the command's Python process started")
        if child.proc.poll() is not None:
            raise TargetError(
                f"the command exited with code {exit_status(child.proc.returncode)} "
                "before a Python process could be sampled"
            )
        found = _python_candidate(child.pid, match)
        if found is not None:
            return found
        if time.monotonic() >= deadline:
            what = f"matching {match.pattern!r}" if match else "in it"
            raise TargetError(
                f"no Python process {what} after {timeout:g} s; the command "
                f"{' '.join(child.argv)[:80]!r} is still running unsampled"
            )
        stop.wait(0.1)


def _python_candidate(root_pid: int, match: re.Pattern[str] | None) -> ProcessInfo | None:
    try:
        root = psutil.Process(root_pid)
        procs = [root, *sorted(root.children(recursive=True), key=lambda p: p.pid)]
    except psutil.Error:
        return None
    for proc in procs:
        if not is_python(proc) or is_launcher(proc):
            continue
        try:
            info = describe(proc)
        except TargetError:
            continue
        if match is None or match.search(" ".join(info.cmdline)):
            return info
    return None


def sample_child(
    child: ChildCommand,
    backend: Backend,
    options: SessionOptions,
    stop: threading.Event,
    make_target: Callable[[ProcessInfo], Target],
    match: re.Pattern[str] | None = None,
    wait_timeout: float = 60.0,
    on_window: WindowCallback | None = None,
    output: Callable[[Target], str] | None = None,
    start: Callable[[], SessionOptions] | None = None,
) -> Profile:
    """Sample the command's Python process until it exits, `options.duration` ends or `stop`
    (streamed to the file `output` names, if given); `start`, if given, waits for the start
    trigger and returns the options to sample with."""
    info = find_python_process(child, match, wait_timeout, stop)
    if start is not None:
        options = start()
    return run_session(
        make_target(info), backend, options, stop, on_window=on_window, output=output
    )


@dataclass(frozen=True)
class ExecRequest:
    command: tuple[str, ...]
    rank: RankIdentity
    options: SessionOptions
    folder: str
    match: re.Pattern[str] | None = None
    wait_timeout: float = 60.0
    keep_cmdline: bool = False
    start: StartSpec | None = None  # wait for this before sampling (--start-*)


def run_and_sample(request: ExecRequest, sampler: Backend, observer: CaptureObserver) -> int:
    """Start the command as a child, sample its Python process, save the profile, and return
    the command's exit status. Sampling failures are reported, never fatal to the command."""
    rank = request.rank
    children: list[ChildCommand] = []
    pending: list[int] = []

    def forward(signum: int) -> None:
        if children:
            children[0].forward(signum)
        else:
            pending.append(signum)

    def target_of(info: ProcessInfo) -> Target:
        target = make_target(info, request.keep_cmdline)
        return replace(
            target, rank=rank.rank, rank_source=rank.variable or "gilprof exec (no rank variable)"
        )

    def path_of(target: Target) -> str:
        return os.path.join(request.folder, f"rank{rank.rank}-{target.pid}.json")

    spec = request.start
    reads_output = spec is not None and spec.on_output is not None
    pump: OutputPump | None = None
    not_fired = False

    def start() -> SessionOptions:
        assert spec is not None

        def ended() -> str | None:
            code = child.proc.poll()
            return None if code is None else f"the command exited (status {exit_status(code)})"

        fired = await_trigger(spec, pump, ended, stop, observer)
        return replace(request.options, start=fired)

    with stop_on_signals(forward) as stop:
        child = ChildCommand(request.command, read_output=reads_output)
        if reads_output:
            pump = start_pump(child.proc, observer)
        children.append(child)
        for signum in pending:
            child.forward(signum)
        try:
            profile = sample_child(
                child,
                sampler,
                request.options,
                stop,
                target_of,
                request.match,
                request.wait_timeout,
                output=path_of,
                start=start if spec is not None else None,
            )  # streamed
        except (TriggerNotFired, WaitInterrupted) as exc:
            not_fired = True
            observer.message(f"error: rank {rank.rank} not sampled: {exc}")
        except GilprofError as exc:
            observer.message(f"error: rank {rank.rank} not sampled: {exc}")
        except Exception as exc:  # a gilprof bug must not take the user's job down with it
            observer.message(
                f"error: rank {rank.rank} not sampled: internal error: {type(exc).__name__}: {exc}"
            )
        else:  # a full disk surfaced above as a GilprofError: the command is still awaited
            observer.wrote(path_of(profile.target), profile)
        code = child.wait()
        if pump is not None:
            pump.join(5.0)
    if not_fired and code == 0:  # no profile: a script must not read this as a success
        code = EXIT_INTERRUPTED if stop.is_set() else TriggerNotFired.exit_code
    returncode = child.proc.returncode
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        observer.message(f"the command was killed by {name} (exit status {code})")
    return code
