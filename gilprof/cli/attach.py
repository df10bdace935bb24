"""`gilprof attach`: find a rank (or launch its job), sample it, write one profile."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import click

from gilprof.attribution import attribute
from gilprof.backends import BACKEND_NAMES, Backend, SamplerSettings, WindowResult, get_backend
from gilprof.cli._recipe import given, recipe_option
from gilprof.discover import ProcessInfo, parse_rank_selection, resolve_ranks, resolve_target
from gilprof.errors import GilprofError, TargetError, UsageError
from gilprof.launch import LaunchedJob
from gilprof.model import Mode, Target
from gilprof.procs import python_version_of
from gilprof.profile import Profile
from gilprof.recipes import Recipe
from gilprof.redact import redact_cmdline
from gilprof.sampling import DEFAULT_WINDOW_S, SessionOptions, run_session, run_sessions

EXIT_INTERRUPTED = 130
# The target exited before --duration ended: the profile is written but covers less time.
EXIT_PARTIAL = 6
# Below this, even a short profile may not fit: refuse before sampling rather than after.
MIN_FREE_BYTES = 1 << 20


@contextmanager
def stop_on_signals(on_signal: Any = None) -> Iterator[threading.Event]:
    """SIGINT/SIGTERM set an event instead of raising, so the profile is still written."""
    stop = threading.Event()
    received: list[int] = []

    def handler(signum: int, _frame: Any) -> None:
        received.append(signum)
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
        for sig, old in previous.items():
            signal.signal(sig, old)


def make_target(info: ProcessInfo, keep_cmdline: bool) -> Target:
    return Target(
        pid=info.pid, rank=info.rank, rank_source=info.rank_source, local_rank=info.local_rank,
        world_size=info.world_size, launcher=info.launcher, launcher_pid=info.launcher_pid,
        hostname=socket.gethostname(), python=python_version_of(info.pid),
        cmdline=tuple(info.cmdline) if keep_cmdline else redact_cmdline(info.cmdline),
    )


def default_output(info: ProcessInfo) -> str:
    rank = "x" if info.rank is None else str(info.rank)
    return f"gilprof-rank{rank}-{info.pid}-{datetime.now():%Y%m%d-%H%M%S}.json"


def check_output_writable(path: str) -> None:
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(folder):
        raise UsageError(f"output folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"output folder {folder} is not writable")
    if os.path.isdir(path):
        raise UsageError(f"output path {path} is a directory")
    if os.path.exists(path) and not os.path.isfile(path):
        # The profile is written by rename, which would replace a device or FIFO (-o /dev/null).
        raise UsageError(f"output path {path} is not a regular file")
    try:
        vfs = os.statvfs(folder)
    except OSError:
        return
    if vfs.f_bavail * vfs.f_frsize < MIN_FREE_BYTES:
        raise UsageError(f"output folder {folder} is (nearly) full: "
                         f"{vfs.f_bavail * vfs.f_frsize // 1024} KiB free")


def save_profile(profile: Profile, path: str) -> None:
    try:
        profile.save(path)
    except OSError as exc:  # the disk filled up while sampling, the folder went away, ...
        raise GilprofError(f"cannot write {path}: {exc.strerror or exc}") from None


class LiveStatus:
    """One status line on a terminal: elapsed, samples, top GIL holders so far."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label = label
        self.enabled = enabled
        self.started = time.monotonic()
        self._live: Any = None

    def __enter__(self) -> LiveStatus:
        if self.enabled:
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            self._live = Live(Text(f"sampling {self.label}: attaching..."),
                              console=Console(stderr=True), refresh_per_second=4, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def update(self, profile: Profile, _window: WindowResult) -> None:
        if self._live is None:
            return
        from rich.text import Text

        profile.finish()  # fold the windows so far into ticks and duration
        attribution = attribute(profile, watch=())
        by_self = sorted(attribution.functions, key=lambda f: -f.self_samples)[:3]
        holders = ", ".join(f"{f.key.name} {100 * f.self_share:.0f}%" for f in by_self) or "-"
        self._live.update(Text(
            f"sampling {self.label}  {time.monotonic() - self.started:5.1f} s  "
            f"{attribution.samples} samples  top: {holders}  (Ctrl-C stops and saves)"))


@click.command("attach", context_settings={"ignore_unknown_options": True})
@click.option("--ranks", metavar="all|local|N-M|N,M",
              help="Sample several ranks at once (one sampler each); -o is then a folder.")
@click.option("--pid", type=int, help="Sample this PID; a shell or launcher PID resolves to its Python descendants.")
@click.option("--rank", type=int, help="Global rank to sample (default 0 when a job is found).")
@click.option("--job", type=int, help="Only consider descendants of this launcher PID.")
@click.option("--match", "match", help="Only consider processes whose command line matches this regex.")
@click.option("-d", "--duration", type=click.FloatRange(min=0.1), help="Seconds to sample (default: until the target exits or Ctrl-C).")
@click.option("-r", "--rate", type=click.IntRange(1, 10000), default=100, show_default=True, help="Samples per second.")
@click.option("--mode", type=click.Choice([m.value for m in Mode]), default="gil", show_default=True,
              help="gil: only the GIL holder; wall: all threads, idle included; cpu: active threads; "
                   "contention: all threads with native frames, to tell holding, waiting for the GIL, "
                   "native and idle apart (pauses the target per sample).")
@click.option("--native", is_flag=True, help="Include native (C/C++) frames; implies --blocking.")
@click.option("--blocking", is_flag=True, help="Pause the target at each sample (more exact, much slower targets).")
@click.option("--window", type=click.FloatRange(min=0.2), default=DEFAULT_WINDOW_S, show_default=True,
              help="Seconds per sampling window (the unit of time for confidence intervals).")
@click.option("--backend", type=click.Choice(BACKEND_NAMES), default="py-spy", show_default=True)
@click.option("-o", "--output", type=click.Path(), help="Profile file (default gilprof-rank<R>-<pid>-<time>.json); a folder with --ranks.")
@click.option("--wait-timeout", type=float, default=60.0, show_default=True, help="Launch mode: seconds to wait for the rank to start.")
@click.option("--keep-cmdline", is_flag=True, help="Keep secret-looking command-line values (redacted by default).")
@recipe_option
@click.option("-q", "--quiet", is_flag=True, help="No live status line.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def command(ranks: str | None, pid: int | None, rank: int | None, job: int | None, match: str | None,
            duration: float | None, rate: int, mode: str, native: bool, blocking: bool,
            window: float, backend: str, output: str | None, wait_timeout: float,
            keep_cmdline: bool, recipe: Recipe | None, quiet: bool, command: tuple[str, ...]) -> None:
    """Sample one rank of a running or just-launched job with py-spy (or austin).

    \b
    Attach to a running job:
      gilprof attach --rank 0 -d 20 -o rank0.json      # rank 0 of the job on this host
      gilprof attach --pid 4242 -d 20                  # a shell or mpiexec PID resolves to its ranks
      gilprof attach --job $(pgrep -n mpiexec) --rank 3
      gilprof attach --ranks all -d 20 -o prof/       # every local rank, one profile each
      gilprof attach --rank 0 --mode contention -d 20  # who waits for the GIL, and for whom
      gilprof attach --rank 0 --backend austin --mode wall -d 20
    Launch a job and sample it (exits with the job's exit code):
      gilprof attach --rank 0 -o rank0.json -- mpiexec -n 4 python app.py

    The profile keeps the raw stacks per sampling window; read it with `gilprof report`.
    Ctrl-C stops sampling and still writes the profile, marked partial.

    \b
    Exit status:
      0    profile complete
      6    profile written but partial: the target exited before --duration ended
      130  interrupted (SIGINT/SIGTERM); profile written, marked partial
      2 usage, 3 target not found or gone, 4 no ptrace permission, 5 sampler failed
      launch mode: the job's exit status
    """
    parent_match = None
    if recipe is not None:
        ctx = click.get_current_context()
        target_spec, defaults = recipe.target, recipe.sampling
        rank = rank if given(ctx, "rank") or pid is not None else target_spec.rank
        match = match if given(ctx, "match") else target_spec.match
        parent_match = target_spec.parent_match
        mode = mode if given(ctx, "mode") or not defaults.mode else defaults.mode
        rate = rate if given(ctx, "rate") or not defaults.rate else int(defaults.rate)
        duration = duration if given(ctx, "duration") else defaults.duration
        native = native if given(ctx, "native") or defaults.native is None else defaults.native
    if command and pid is not None:
        raise UsageError("give either --pid or a command to launch, not both")
    if ranks is not None and (pid is not None or rank is not None):
        raise UsageError("--ranks selects ranks itself; do not combine it with --pid or --rank")
    if mode == Mode.CONTENTION.value:
        native = blocking = True  # the state of a thread is read off its native frames
    if native and not blocking:
        blocking = True  # py-spy cannot walk native stacks without pausing the target
    settings = SamplerSettings(mode=Mode(mode), rate_hz=float(rate), native=native, blocking=blocking)
    sampler = get_backend(backend)
    sampler.check_settings(settings)
    sampler.version()  # fail before launching anything if the sampler is missing
    if output and ranks is None:
        check_output_writable(output)

    job_ref: list[LaunchedJob] = []

    def forward(signum: int) -> None:
        for launched in job_ref:
            launched.forward(signum)

    options = SessionOptions(settings=settings, duration=duration, window_s=window)
    with stop_on_signals(forward) as stop:
        launched = LaunchedJob(command) if command else None
        if launched:
            job_ref.append(launched)
        try:
            if ranks is not None:
                infos = _wait_for_ranks(launched, ranks, job, match, parent_match, wait_timeout, stop)
                profiles = _sample_many(infos, sampler, options, stop, output, keep_cmdline)
            else:
                if launched:
                    info = launched.wait_for_rank(rank, match, wait_timeout, stop, parent_match)
                else:
                    info = resolve_target(pid=pid, rank=rank, job=job, match=match,
                                          parent_match=parent_match)
                path = output or default_output(info)
                check_output_writable(path)
                label = f"pid {info.pid} rank {'?' if info.rank is None else info.rank}"
                with LiveStatus(label, enabled=not quiet and sys.stderr.isatty()) as status:
                    profile = run_session(make_target(info, keep_cmdline), sampler, options, stop,
                                          on_window=status.update)
                save_profile(profile, path)
                _summarize(profile, path)
                profiles = [profile]
        except GilprofError:
            if launched:
                launched.shutdown()
            raise
        if launched:
            if stop.is_set():
                launched.wait(30)  # the signal was forwarded; give the ranks time to stop
                launched.shutdown()
            else:
                launched.wait()
            code = launched.exit_code
            # An interrupted run must not look like a success, whatever mpiexec returned
            # while it tore the job down.
            click.get_current_context().exit(EXIT_INTERRUPTED if stop.is_set() and code == 0 else code)
    if stop.is_set() and any(p.sampling.partial for p in profiles):
        click.get_current_context().exit(EXIT_INTERRUPTED)
    if any(p.sampling.partial for p in profiles):
        click.get_current_context().exit(EXIT_PARTIAL)


def _wait_for_ranks(launched: LaunchedJob | None, selection: str, job: int | None,
                    match: str | None, parent_match: str | None, timeout: float,
                    stop: threading.Event) -> list[ProcessInfo]:
    if launched is None:
        return resolve_ranks(selection, job=job, match=match, parent_match=parent_match)
    wanted = parse_rank_selection(selection)
    deadline = time.monotonic() + timeout
    last = "no ranks started yet"
    while time.monotonic() < deadline and not stop.is_set():
        if launched.proc.poll() is not None:
            raise TargetError(f"the job exited with code {launched.proc.returncode} before its ranks "
                              "could be sampled")
        try:
            infos = resolve_ranks(selection, job=launched.pid, match=match, parent_match=parent_match)
            sizes = {i.world_size for i in infos if i.world_size}
            expected = wanted if wanted is not None else set(range(max(sizes))) if sizes else None
            if expected is None or expected <= {i.rank for i in infos}:
                return infos
            last = f"{len(infos)} of {len(expected)} ranks started"
        except TargetError as exc:
            last = str(exc)
        stop.wait(0.1)
    raise TargetError(f"timed out waiting for the job's ranks: {last}")


def _sample_many(infos: list[ProcessInfo], sampler: Backend, options: SessionOptions,
                 stop: threading.Event, output: str | None, keep_cmdline: bool) -> list[Profile]:
    folder = output or f"gilprof-{datetime.now():%Y%m%d-%H%M%S}"
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise UsageError(f"with --ranks, -o names a folder; {folder} is a file")
    os.makedirs(folder, exist_ok=True)
    check_output_writable(os.path.join(folder, "x.json"))
    targets = [make_target(info, keep_cmdline) for info in infos]
    click.echo(f"gilprof: sampling {len(targets)} ranks: "
               + ", ".join(f"rank {t.rank} (pid {t.pid})" for t in targets), err=True)
    results = run_sessions(targets, sampler, options, stop)
    profiles = []
    for target, result in zip(targets, results, strict=True):
        rank = "x" if target.rank is None else target.rank
        if isinstance(result, Exception):
            click.echo(f"gilprof: rank {rank} (pid {target.pid}) not sampled: {result}", err=True)
            continue
        path = os.path.join(folder, f"rank{rank}-{target.pid}.json")
        save_profile(result, path)
        _summarize(result, path)
        profiles.append(result)
    if not profiles:
        raise TargetError("no rank could be sampled")
    return profiles


def _summarize(profile: Profile, path: str) -> None:
    s = profile.sampling
    note = f", PARTIAL: {s.partial_reason}" if s.partial else ""
    click.echo(f"gilprof: wrote {path} ({s.samples} samples over {s.duration_s:.1f} s, "
               f"{len(profile.windows)} windows{note})", err=True)
    top = attribute(profile)
    by_self = sorted(top.functions, key=lambda f: -f.self_samples)[:3]
    if by_self and s.mode.knows_gil:
        holders = ", ".join(f"{f.key.name} {100 * f.self_share:.1f}%" for f in by_self)
        click.echo(f"gilprof: GIL utilization {100 * (top.utilization or 0):.1f}%; top self: {holders}",
                   err=True)
