"""The protocol every sampler backend implements.

A backend samples one process for one window and returns parsed samples. Windows are the unit
of time in a profile: each carries its own start, end and tick count, which is what the
statistics of `compare` need (samples close in time are correlated; windows are not, much).
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from gilprof.errors import PermissionDenied, SamplerError
from gilprof.model import Mode, Sample
from gilprof.native_classes import LibraryRule
from gilprof.sampling.processes import child_process

# SCHED_FIFO priority of a non-blocking sampler (see `realtime_priority`), and the rate above
# which it is not used: the kernel's RT throttling bounds a runaway, but a sampler at RT
# priority that samples thousands of times a second would still starve the target's core.
REALTIME_PRIORITY = 10
REALTIME_MAX_RATE_HZ = 1000.0
_CAP_SYS_NICE = 23


@dataclass(frozen=True)
class SamplerSettings:
    mode: Mode = Mode.STATES
    rate_hz: float = 100.0
    native: bool = False
    blocking: bool = False
    realtime: bool = True  # run a non-blocking sampler at SCHED_FIFO where permitted
    # states mode: the recipe's native-library rules, ahead of the built-in ones
    native_rules: tuple[LibraryRule, ...] = ()
    # states mode: also run py-spy per window for the holders' stacks with the line running
    # (else the reader's own ticks give them, naming functions only: ~1.7 points of a core
    # less on the example server, docs/modes.md)
    lines: bool = False

    @classmethod
    def for_mode(
        cls, mode: str | Mode, rate_hz: float, native: bool = False, blocking: bool = False
    ) -> SamplerSettings:
        """Settings a sampler can honour: contention reads native stacks, and py-spy cannot
        walk native stacks without pausing the target; native frames asked for in states
        mode are contention mode (the pausing way of reading the same states)."""
        mode = Mode(mode)
        if mode is Mode.STATES and native:
            mode = Mode.CONTENTION
        if mode is Mode.CONTENTION:
            native = True
        return cls(mode=mode, rate_hz=float(rate_hz), native=native, blocking=blocking or native)


@dataclass
class WindowResult:
    t0: float  # monotonic clock, when sampling started
    t1: float  # monotonic clock, when sampling stopped
    samples: list[Sample] = field(default_factory=list)
    # contention mode: (sample, start, end) seconds since sampling started, all threads aligned
    spans: list[tuple[Sample, float, float]] = field(default_factory=list)
    sampler_samples: int | None = None  # what the sampler said it recorded
    ticks_counted: int = 0  # sampling instants the sampler's output lets us count, if any
    ticks_exact: bool = False  # ticks_counted is the sampler's own tick count (py-spy --duration)
    priority: str = ""  # the sampler's scheduling: "SCHED_FIFO 10" or "normal (why)"
    errors: int = 0
    target_exited: bool = False
    interrupted: bool = False
    messages: list[str] = field(default_factory=list)
    # states mode: the thread-state reader's ticks, its CPU seconds and thread readings
    state_ticks: int = 0
    reader_cpu_s: float = 0.0
    reader_thread_reads: int = 0
    # states mode: native readings placed by the locator, not placed, placed in the GIL's
    # own code (counted as waiting), and how native time was placed (or why not)
    native_placed: int = 0
    native_unplaced: int = 0
    native_gil: int = 0
    native_note: str = ""

    @property
    def seconds(self) -> float:
        return max(0.0, self.t1 - self.t0)


class NotReady(Exception):
    """The sampler could not read the interpreter yet (too young, or not Python)."""


def permission_hint(sampler: str) -> str:
    return (
        f"{sampler} may not read the target's memory (ptrace is not permitted). Fix one of: run "
        "gilprof as the target's user or as root; in a container add the SYS_PTRACE capability "
        "(docker run --cap-add SYS_PTRACE); lower kernel.yama.ptrace_scope to 0 "
        "(sysctl kernel.yama.ptrace_scope=0); or start the job under `gilprof exec`, which "
        "samples its own child"
    )


def realtime_refusal() -> str | None:
    """Why this process may not give a child SCHED_FIFO, or None when it may try.

    Root, CAP_SYS_NICE or an RLIMIT_RTPRIO allowance permit it; a container or a cgroup
    without an RT budget can still refuse (EPERM), so the policy a child got is read back.
    """
    if os.geteuid() == 0:
        return None
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("CapEff:") and int(line.split()[1], 16) >> _CAP_SYS_NICE & 1:
                    return None
    except (OSError, ValueError, IndexError):
        pass
    if resource.getrlimit(resource.RLIMIT_RTPRIO)[0] >= REALTIME_PRIORITY:
        return None
    return "not root, no CAP_SYS_NICE"


def realtime_priority(settings: SamplerSettings) -> tuple[int | None, str]:
    """(SCHED_FIFO priority to start the sampler with or None, why not).

    A non-blocking sampler at normal priority wakes late exactly when the target's threads
    keep the cores busy, and misses GIL holds shorter than ~1 ms after a sleep (measured:
    benchmarks/accuracy/README.md). A blocking sampler must not run at RT priority: after it
    resumes the target it samples again before the target has run, and counts one frozen
    state several times (measured 2.4-3.1x over truth).
    """
    if settings.blocking or settings.native or settings.mode is Mode.CONTENTION:
        return None, "blocking sampler"
    if not settings.realtime:
        return None, "real-time priority turned off"
    if settings.rate_hz > REALTIME_MAX_RATE_HZ:
        return None, f"rate above {REALTIME_MAX_RATE_HZ:g} Hz"
    refusal = realtime_refusal()
    if refusal is not None:
        return None, refusal
    return REALTIME_PRIORITY, ""


def scheduling_of(pid: int, reason: str) -> str:
    """The scheduling a started sampler runs with, as the profile records it."""
    try:
        if os.sched_getscheduler(pid) == os.SCHED_FIFO:
            return f"SCHED_FIFO {os.sched_getparam(pid).sched_priority}"
    except OSError:
        pass
    return f"normal ({reason or 'SCHED_FIFO refused by the kernel'})"


@contextmanager
def _sampler_process(cmd: list[str]) -> Iterator[subprocess.Popen[bytes]]:
    """Start a sampler in its own session, and kill it (and its group) on the way out.

    Own session: a terminal's Ctrl-C reaches gilprof only, which then stops the sampler itself
    with SIGINT so that the sampler still writes its file. The kernel kills it if gilprof dies.
    """
    with child_process(
        cmd,
        group="session",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    ) as child:
        yield child.proc


def raise_to_realtime(pid: int, priority: int) -> None:
    """Every thread of `pid` to SCHED_FIFO `priority` (a thread it starts later inherits
    it); where the kernel refuses, it runs on at normal priority (scheduling_of tells)."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return
    for tid in tids:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))


@dataclass
class SamplerRun:
    """One sampler process's run, as run_sampler() saw it."""

    lines: list[str]  # its output, a line each (progress-bar updates split at \r), blank ones too
    started: bool  # it printed the line that says it has found the interpreter
    t0: float  # monotonic clock, when it printed that line
    t1: float  # when it was ended, or when it exited by itself
    interrupted: bool  # `stop` ended it
    stopped_itself: bool  # it exited before `seconds` or `stop` ended it
    returncode: int
    priority: str = ""  # its scheduling: "SCHED_FIFO 10" or "normal (why)"

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def start_failure(
        self, sampler: str, message: str, *, denied: bool, not_ready: bool
    ) -> Exception:
        """Why a sampler exited before its first sample, as the error the session acts on:
        NotReady (interrupted, or a target it cannot read yet: the session tries again),
        PermissionDenied (no ptrace: the user must act), or SamplerError."""
        if self.interrupted:
            return NotReady("interrupted before sampling started")
        if denied:
            return PermissionDenied(permission_hint(sampler))
        if not_ready:
            return NotReady(message)
        return SamplerError(f"{sampler} failed: {message}")


def run_sampler(
    cmd: list[str],
    is_start: Callable[[str], bool],
    seconds: float | None,
    stop: threading.Event,
    settings: SamplerSettings | None = None,
    clean: Callable[[str], str] = str.strip,
) -> SamplerRun:
    """Run a sampler for `seconds` after the output line for which `is_start` holds, or
    until `stop` is set; returns once it has exited, with its output (stdout with stderr
    merged in).

    Where `settings` ask for real-time priority and the kernel allows it, the sampler is
    raised to SCHED_FIFO when it prints that line, not before: its start-up (reading the
    target's maps and symbols, ~80 ms of CPU per window for py-spy) then runs at normal
    priority, where it takes an idle core if there is one instead of preempting the
    target's thread on the core it last ran on (a SCHED_FIFO task wakes where it last ran).
    """
    priority, reason = realtime_priority(settings) if settings is not None else (None, "")
    scheduling = [f"normal ({reason or 'it never started sampling'})"]
    with _sampler_process(cmd) as proc:

        def on_start() -> None:
            if priority is not None:
                raise_to_realtime(proc.pid, priority)
            scheduling[0] = scheduling_of(proc.pid, reason)  # what it got, read back

        run = _drive(proc, is_start, seconds, stop, clean, on_start)
    run.priority = scheduling[0]
    return run


def _drive(
    proc: subprocess.Popen[bytes],
    is_start: Callable[[str], bool],
    seconds: float | None,
    stop: threading.Event,
    clean: Callable[[str], str],
    on_start: Callable[[], None] = lambda: None,
) -> SamplerRun:
    """Both samplers write their output when they receive SIGINT, so a window is ended
    that way."""
    lines: list[str] = []
    started = threading.Event()
    start_time = [0.0]

    def pump() -> None:
        assert proc.stdout is not None
        buffer = b""
        for chunk in iter(lambda: proc.stdout.read1(4096), b""):  # type: ignore[attr-defined,union-attr]
            buffer += chunk
            *complete, buffer = re.split(rb"[\r\n]", buffer)
            for raw in complete:
                text = clean(raw.decode("utf-8", "replace"))
                if text and is_start(text) and not started.is_set():
                    start_time[0] = time.monotonic()
                    on_start()
                    started.set()
                lines.append(text)  # blank ones too: austin separates its messages by them
        if buffer.strip():
            lines.append(clean(buffer.decode("utf-8", "replace")))

    reader = threading.Thread(target=pump, name="gilprof-sampler-output", daemon=True)
    reader.start()
    end_time: float | None = None
    interrupted = False
    while proc.poll() is None:
        if started.is_set() and seconds is not None and time.monotonic() - start_time[0] >= seconds:
            end_time = time.monotonic()
            proc.send_signal(signal.SIGINT)
            break
        if stop.is_set():
            end_time = time.monotonic()
            interrupted = True
            proc.send_signal(signal.SIGINT)
            break
        stop.wait(0.01)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    reader.join(timeout=5)
    return SamplerRun(
        lines=lines,
        started=started.is_set(),
        t0=start_time[0],
        t1=time.monotonic() if end_time is None else end_time,
        interrupted=interrupted,
        stopped_itself=end_time is None,
        returncode=proc.returncode,
    )


class Backend(ABC):
    name: str = ""
    min_version: tuple[int, ...] = ()

    @abstractmethod
    def version(self) -> str:
        """The sampler binary's version; raises SamplerError when missing or too old."""

    def check_settings(self, settings: SamplerSettings) -> None:  # noqa: B027 - optional hook
        """Raise UsageError for settings this sampler cannot honour, before anything starts."""

    def prepare(
        self, pid: int, settings: SamplerSettings, stop: threading.Event, deadline: float
    ) -> tuple[SamplerSettings, str]:
        """The settings this target will be sampled with, and a one-line note when they
        differ from those asked for (a target whose thread states cannot be read falls back
        to gil mode); called once per target before its first window."""
        return settings, ""

    def stacks(self, pid: int, settings: SamplerSettings) -> str:
        """Where a prepared target's holder stacks come from (SamplingInfo.stacks)."""
        return "sampler"

    def release(self, pid: int) -> None:  # noqa: B027 - optional hook
        """The session of `pid` is over: free what prepare() kept for it."""

    @abstractmethod
    def sample_window(
        self, pid: int, settings: SamplerSettings, seconds: float | None, stop: threading.Event
    ) -> WindowResult:
        """Sample `pid` for `seconds` (None: until it exits) or until `stop` is set."""

    @abstractmethod
    def ticks(self, window: WindowResult, settings: SamplerSettings) -> tuple[float, str]:
        """Sampling instants in the window and where that number came from."""
