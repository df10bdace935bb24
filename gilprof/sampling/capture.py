"""One capture, as `gilprof attach` and `gilprof top` run it: find (or launch) the target,
sample it until the duration ends, the target exits or a signal arrives, write the profile.

Signals: SIGINT and SIGTERM set an event instead of raising, so whatever was sampled is still
written (marked partial), and in launch mode they are forwarded to the launcher.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from gilprof.errors import (
    EXIT_INTERRUPTED,
    EXIT_PARTIAL,
    GilprofError,
    TargetError,
    UsageError,
)
from gilprof.model import Target
from gilprof.profile import Profile, check_folder, check_writable
from gilprof.redact import redact_cmdline
from gilprof.sampling.backends import Backend, SamplerSettings, WindowResult, get_backend
from gilprof.sampling.discover import (
    ProcessInfo,
    Selection,
    TargetQuery,
    parse_rank_selection,
    resolve_ranks,
)
from gilprof.sampling.launch import LaunchedJob
from gilprof.sampling.processes import exit_status, python_version_of
from gilprof.sampling.session import (
    DEFAULT_WINDOW_S,
    SessionOptions,
    run_session,
    run_sessions,
    target_alive,
)
from gilprof.sampling.triggers import (
    EndedCheck,
    Fired,
    LineSource,
    LogFollower,
    OutputPump,
    StartSpec,
    wait_for_start,
)

# Below this, even a short profile may not fit: refuse before sampling rather than after.
MIN_FREE_BYTES = 1 << 20
NO_OUTPUT_TO_READ = (
    "--start-on reads the output of a job gilprof launches (`-- COMMAND`); for a running "
    "process, use --start-on-log FILE:REGEX or --start-after SECONDS"
)


@contextmanager
def stop_on_signals(on_signal: Callable[[int], None] | None = None) -> Iterator[threading.Event]:
    """SIGINT/SIGTERM set an event instead of raising, so the profile is still written."""
    stop = threading.Event()
    signalled: list[int] = []

    def handler(signum: int, _frame: Any) -> None:
        signalled.append(signum)
        stop.set()
        if on_signal is not None:
            on_signal(signum)

    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        restore_signals(previous, stopped_by_signal=bool(signalled))


def restore_signals(previous: Mapping[signal.Signals, Any], stopped_by_signal: bool) -> None:
    """Put back the handlers that `previous` maps each signal to, SIGINT excepted after a stop
    by signal: the process is then on its way out with its exit code, and a second Ctrl-C
    there would raise KeyboardInterrupt in the exit path, which Python reports by killing
    itself with SIGINT (-2, not 130). So SIGINT stays ignored."""
    for sig, old in previous.items():
        keep_out = stopped_by_signal and sig == signal.SIGINT
        signal.signal(sig, signal.SIG_IGN if keep_out else old)


def make_target(info: ProcessInfo, keep_cmdline: bool) -> Target:
    return Target(
        **info.placement(),
        pid=info.pid,
        hostname=socket.gethostname(),
        python=python_version_of(info.pid),
        cmdline=tuple(info.cmdline) if keep_cmdline else redact_cmdline(info.cmdline),
    )


def default_output(info: ProcessInfo) -> str:
    rank = "x" if info.rank is None else str(info.rank)
    return f"gilprof-rank{rank}-{info.pid}-{datetime.now():%Y%m%d-%H%M%S}.json"


def check_output_writable(path: str) -> None:
    """A profile file can be written at `path`, with room for a short one."""
    check_writable(path, min_free=MIN_FREE_BYTES)


def prepare_folder(folder: str) -> None:
    """An output folder for one profile per rank: created if missing, checked writable."""
    check_folder(folder, create=True, min_free=MIN_FREE_BYTES)


class CaptureObserver(Protocol):
    """What a capture tells its caller as it goes (the CLI draws it; tests may record it)."""

    def sampling(self, label: str) -> None: ...
    def waiting(self, what: str, seconds: float) -> None: ...
    def clear_status(self) -> None: ...
    def window(self, profile: Profile, window: WindowResult) -> None: ...
    def message(self, text: str) -> None: ...
    def wrote(self, path: str, profile: Profile) -> None: ...
    def done(self) -> None: ...


@dataclass(frozen=True)
class CaptureRequest:
    """Which process to sample and how; the options of `gilprof attach`, checked."""

    settings: SamplerSettings
    backend: str = "py-spy"
    duration: float | None = None
    window_s: float = DEFAULT_WINDOW_S
    wanted: TargetQuery = field(default_factory=TargetQuery)
    ranks: str | None = None  # instead of one process, these ranks of `wanted`'s job
    command: tuple[str, ...] = ()
    output: str | None = None
    wait_timeout: float = 60.0
    keep_cmdline: bool = False
    start: StartSpec | None = None  # wait for this before sampling (--start-*)

    def check(self) -> None:
        if self.start is not None and self.start.on_output is not None and not self.command:
            raise UsageError(NO_OUTPUT_TO_READ)
        if self.command and self.wanted.pid is not None:
            raise UsageError("give either --pid or a command to launch, not both")
        if self.ranks is not None and (self.wanted.pid is not None or self.wanted.rank is not None):
            raise UsageError("--ranks selects ranks itself; do not combine it with --pid or --rank")


@dataclass(frozen=True)
class CaptureResult:
    profiles: tuple[Profile, ...]
    exit_code: int  # 0; EXIT_PARTIAL; EXIT_INTERRUPTED; in launch mode the job's status


def capture(request: CaptureRequest, observer: CaptureObserver) -> CaptureResult:
    request.check()
    sampler = get_backend(request.backend)
    sampler.check_settings(request.settings)
    sampler.version()  # fail before launching anything if the sampler is missing
    if request.output and request.ranks is None:
        check_output_writable(request.output)
    elif request.output:  # the folder is made once the ranks are found; refuse it now
        check_folder(request.output, min_free=MIN_FREE_BYTES)
    jobs: list[LaunchedJob] = []

    def forward(signum: int) -> None:
        for launched in jobs:
            launched.forward(signum)

    options = SessionOptions(
        settings=request.settings, duration=request.duration, window_s=request.window_s
    )
    with stop_on_signals(forward) as stop:
        launched, pump = _launch(request, observer)
        if launched:
            jobs.append(launched)
        try:
            run = _Run(request, launched, sampler, options, stop, observer, pump)
            profiles = _capture_ranks(run) if request.ranks is not None else [_capture_one(run)]
        except GilprofError:
            if launched:
                launched.shutdown()
            if pump:
                pump.join(5.0)
            raise
        if launched:
            if stop.is_set():
                launched.wait(30)  # the signal was forwarded; give the ranks time to stop
                launched.shutdown()
            else:
                launched.wait()
            if pump:
                pump.join(5.0)  # the job's last lines are passed on before gilprof ends
            code = launched.exit_code
            # An interrupted run must not look like a success, whatever mpiexec returned
            # while it tore the job down.
            return CaptureResult(
                tuple(profiles), EXIT_INTERRUPTED if stop.is_set() and code == 0 else code
            )
    partial = any(p.sampling.partial for p in profiles)
    if stop.is_set() and partial:
        return CaptureResult(tuple(profiles), EXIT_INTERRUPTED)
    return CaptureResult(tuple(profiles), EXIT_PARTIAL if partial else 0)


@dataclass(frozen=True)
class _Run:
    """One capture under way: what was asked, the job if gilprof launched it, the sampler."""

    request: CaptureRequest
    launched: LaunchedJob | None
    sampler: Backend
    options: SessionOptions
    stop: threading.Event
    observer: CaptureObserver
    pump: OutputPump | None = None

    def ended_check(self, pids: list[int]) -> EndedCheck:
        """How the wait for a trigger learns that the job (or the targets) ended."""
        launched = self.launched

        def ended() -> str | None:
            if launched is not None:
                code = launched.proc.poll()
                return None if code is None else f"the job exited (status {exit_status(code)})"
            if any(target_alive(pid) for pid in pids):
                return None
            return f"the target (PID {', '.join(map(str, pids))}) exited"

        return ended

    def await_start(self, pids: list[int]) -> SessionOptions:
        """The session options, once the start trigger (if any) fired."""
        spec = self.request.start
        if spec is None:
            return self.options
        fired = await_trigger(spec, self.pump, self.ended_check(pids), self.stop, self.observer)
        return replace(self.options, start=fired)


def await_trigger(
    spec: StartSpec,
    pump: OutputPump | None,
    ended: EndedCheck,
    stop: threading.Event,
    observer: CaptureObserver,
) -> Fired:
    """Wait for `spec` with a live status line; the line source is the job's output (`pump`)
    or the log file the spec names."""
    source: LineSource | None = pump
    follower = LogFollower(spec.on_log.path) if spec.on_log is not None else None
    if follower is not None:
        source = follower
    try:
        fired = wait_for_start(
            spec,
            source,
            ended,
            stop,
            on_wait=lambda what, seconds: observer.waiting(f"waiting for {what}", seconds),
        )
    finally:
        observer.clear_status()
        if follower is not None:
            follower.close()
    if pump is not None:
        pump.stop_matching()
    return fired


def job_output_env(spec: StartSpec | None) -> Mapping[str, str] | None:
    """The environment of a job whose output a trigger reads through a pipe: Python would
    buffer a pipe 8 KiB at a time, so PYTHONUNBUFFERED=1 (unless set) lets each line through
    when printed. None (inherit) for every other job."""
    if spec is None or spec.on_output is None or "PYTHONUNBUFFERED" in os.environ:
        return None
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def start_pump(proc: subprocess.Popen[bytes], observer: CaptureObserver) -> OutputPump:
    """The job's stdout and stderr (pipes) passed through to gilprof's, lines for a trigger."""
    assert proc.stdout is not None and proc.stderr is not None
    return OutputPump(
        [(proc.stdout, 1, "stdout"), (proc.stderr, 2, "stderr")],
        before_write=observer.clear_status,
    )


def _launch(
    request: CaptureRequest, observer: CaptureObserver
) -> tuple[LaunchedJob | None, OutputPump | None]:
    if not request.command:
        return None, None
    if request.start is None or request.start.on_output is None:
        return LaunchedJob(request.command), None
    launched = LaunchedJob(
        request.command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=job_output_env(request.start),
    )
    return launched, start_pump(launched.proc, observer)


def _capture_one(run: _Run) -> Profile:
    request, launched, stop, observer = run.request, run.launched, run.stop, run.observer
    if launched:
        wanted = request.wanted
        info = launched.wait_for_rank(wanted.rank, wanted.selection, request.wait_timeout, stop)
    else:
        info = request.wanted.resolve()
    path = request.output or default_output(info)
    check_output_writable(path)
    options = run.await_start([info.pid])
    observer.sampling(f"pid {info.pid} rank {'?' if info.rank is None else info.rank}")
    try:  # streamed to `path` as it is sampled (gilprof.profile/2): a SIGKILL leaves a partial file
        profile = run_session(
            make_target(info, request.keep_cmdline),
            run.sampler,
            options,
            stop,
            on_window=observer.window,
            output=lambda _target: path,
            on_message=observer.message,
        )
    finally:
        observer.done()
    observer.wrote(path, profile)
    return profile


def wait_for_ranks(
    launched: LaunchedJob | None,
    ranks: str,
    job: int | None,
    selection: Selection,
    timeout: float,
    stop: threading.Event,
) -> list[ProcessInfo]:
    """The ranks `ranks` names; in launch mode, once all of them have started."""
    if launched is None:
        return resolve_ranks(ranks, job, selection)
    wanted = parse_rank_selection(ranks)
    deadline = time.monotonic() + timeout
    last = "no ranks started yet"
    while time.monotonic() < deadline and not stop.is_set():
        if launched.proc.poll() is not None:
            raise TargetError(
                f"the job exited with code {launched.proc.returncode} before its ranks "
                "could be sampled"
            )
        try:
            infos = resolve_ranks(ranks, launched.pid, selection)
            sizes = {i.world_size for i in infos if i.world_size}
            expected = wanted if wanted is not None else set(range(max(sizes))) if sizes else None
            if expected is None or expected <= {i.rank for i in infos}:
                return infos
            last = f"{len(infos)} of {len(expected)} ranks started"
        except TargetError as exc:
            last = str(exc)
        stop.wait(0.1)
    raise TargetError(f"timed out waiting for the job's ranks: {last}")


def _capture_ranks(run: _Run) -> list[Profile]:
    request, observer = run.request, run.observer
    assert request.ranks is not None
    wanted = request.wanted
    infos = wait_for_ranks(
        run.launched, request.ranks, wanted.job, wanted.selection, request.wait_timeout, run.stop
    )
    options = run.await_start([info.pid for info in infos])  # before the folder is made
    folder = request.output or f"gilprof-{datetime.now():%Y%m%d-%H%M%S}"
    prepare_folder(folder)
    targets = [make_target(info, request.keep_cmdline) for info in infos]
    observer.message(
        f"sampling {len(targets)} ranks: "
        + ", ".join(f"rank {t.rank} (pid {t.pid})" for t in targets)
    )

    def path_of(target: Target) -> str:
        return os.path.join(
            folder, f"rank{'x' if target.rank is None else target.rank}-{target.pid}.json"
        )

    def session(target: Target) -> Profile:  # streamed
        return run_session(
            target, run.sampler, options, run.stop, output=path_of, on_message=observer.message
        )

    results = run_sessions(targets, session)
    profiles = []
    for target, result in zip(targets, results, strict=True):
        rank = "x" if target.rank is None else target.rank
        if isinstance(result, Exception):
            observer.message(f"rank {rank} (pid {target.pid}) not sampled: {result}")
            continue
        observer.wrote(path_of(target), result)
        profiles.append(result)
    if not profiles:
        raise TargetError("no rank could be sampled")
    return profiles
