"""Small frozen records parsed at the edge: frames, samples, targets and sampling settings.

Everything above the backends speaks in these types, so a second sampler only has to map its
own output into them.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any


class Mode(str, Enum):
    """What a sampling tick records."""

    STATES = "states"  # GIL holders' stacks (py-spy) + every thread's state (gilprof's reader)
    GIL = "gil"  # only the thread holding the GIL
    WALL = "wall"  # every thread, idle ones included
    CPU = "cpu"  # threads the sampler sees as active
    CONTENTION = "contention"  # every thread with native frames: held, waiting, native, idle

    def __str__(self) -> str:
        return self.value

    @property
    def knows_gil(self) -> bool:
        """Whether samples say which thread held the GIL."""
        return self in (Mode.STATES, Mode.GIL, Mode.CONTENTION)

    @property
    def reads_states(self) -> bool:
        """Whether windows carry every thread's state (held, waiting, native, idle) as spans."""
        return self in (Mode.STATES, Mode.CONTENTION)

    @property
    def counts_holders(self) -> bool:
        """Whether window counts are GIL holders' stacks sampled at exact ticks (py-spy
        --gil), as opposed to every thread's stack at each tick."""
        return self in (Mode.STATES, Mode.GIL)


class ThreadState(str, Enum):
    """What the sampler knew about a thread at a tick."""

    HELD = "held"  # held the GIL
    ACTIVE = "active"  # running, GIL state not recorded
    UNKNOWN = "unknown"  # idle or running: wall-mode sample without GIL state
    WAITING = "waiting"  # blocked acquiring the GIL
    NATIVE = "native"  # running native code that released the GIL
    IDLE = "idle"  # sleeping, or blocked on I/O or a lock
    UNCLASSIFIED = "unclassified"  # native frames that name no known state

    def __str__(self) -> str:
        return self.value


def function_name_matches(wanted: str, sampled: str) -> bool:
    """Whether a recipe's function name `wanted` names the sampled frame `sampled`.

    py-spy reports qualnames on Python 3.11+ (`DefaultADPRouter._balance_requests_across_ranks`)
    and bare names before that. A bare or partly qualified `wanted` matches any qualname that
    ends in `.wanted`; a qualified `wanted` also matches a bare sampled name equal to its last
    part, so one recipe serves both kinds of target.
    """
    if wanted == sampled:
        return True
    if sampled.endswith("." + wanted):
        return True
    return "." not in sampled and "." in wanted and wanted.rsplit(".", 1)[1] == sampled


@dataclass(frozen=True, slots=True)
class Frame:
    name: str
    file: str
    line: int = 0

    @property
    def basename(self) -> str:
        return os.path.basename(self.file)

    @property
    def is_python(self) -> bool:
        """A Python frame (as opposed to a native one merged in by `--native`)."""
        f = self.file
        return f.endswith((".py", ".pyw", ".pyx")) or f.startswith("<") or f == ""

    def matches(self, function: str) -> bool:
        """Whether this frame is `function` (see function_name_matches)."""
        return function_name_matches(function, self.name)


@dataclass(frozen=True, slots=True)
class Sample:
    """One aggregated run of identical stacks on one thread, as a sampler reports it."""

    tid: int
    thread_name: str
    frames: tuple[Frame, ...]  # root first, leaf last
    count: int = 1
    state: ThreadState = ThreadState.HELD


@dataclass(frozen=True)
class Placement:
    """Where a process sits in its job, as discovery read it: shared by the process found
    (sampling.discover.ProcessInfo) and the target recorded in its profile."""

    rank: int | None = None
    rank_source: str | None = None  # the variable the rank was read from
    local_rank: int | None = None
    world_size: int | None = None
    launcher: str | None = None
    launcher_pid: int | None = None
    role: str | None = None  # gen, ctx, ... (gilprof.sampling.roles)
    role_source: str | None = None  # where the role was read

    def placement(self) -> dict[str, Any]:
        """Just these fields, to build another Placement from this one."""
        return {f.name: getattr(self, f.name) for f in fields(Placement)}


@dataclass(frozen=True, kw_only=True)
class Target(Placement):
    pid: int
    hostname: str = ""
    python: str = ""
    cmdline: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The profile's `target` object (pid first, as a reader looks for it)."""
        return {"pid": self.pid, **asdict(self), "cmdline": list(self.cmdline)}


@dataclass(frozen=True)
class StartTrigger:
    """What started sampling (attach/exec --start-after, --start-on, --start-on-log)."""

    kind: str  # "after" (seconds), "output" (a line of the launched job), "log" (a log file)
    description: str  # the trigger as the user gave it, e.g. "output line matching 'iter ='"
    fired_at: str  # wall clock (ISO 8601, UTC, milliseconds) when gilprof saw it fire
    waited_s: float = 0.0  # from the start of the wait until it fired
    line: str | None = None  # the matched line, secret-looking values redacted
    source: str | None = None  # "stdout", "stderr" or the log file's path
    # first sampling window's start minus the firing, seconds (None until the first window)
    first_window_after_s: float | None = None

    def summary(self) -> str:
        """One line: what fired, when, and how soon sampling followed."""
        parts = [f"{self.description} fired at {self.fired_at} after {self.waited_s:.1f} s"]
        if self.line is not None:
            parts.append(f"line {self.line[:120]!r}" + (f" ({self.source})" if self.source else ""))
        if self.first_window_after_s is not None:
            parts.append(f"first window {self.first_window_after_s:.2f} s later")
        return "; ".join(parts)


@dataclass(frozen=True)
class SamplingInfo:
    sampler: str
    sampler_version: str
    mode: Mode
    rate_hz: float
    native: bool = False
    blocking: bool = False
    window_s: float = 0.0
    duration_s: float = 0.0  # seconds actually covered by sampling windows
    elapsed_s: float = 0.0  # wall seconds from first window start to last window end
    ticks: float = 0.0
    ticks_source: str = "estimated"
    samples: int = 0
    errors: int = 0
    partial: bool = False
    partial_reason: str | None = None
    started_at: str = ""
    messages: tuple[str, ...] = field(default=())
    # the sampler's scheduling: "SCHED_FIFO 10", or "normal (why)" (see backends.base)
    priority: str = ""
    start_trigger: StartTrigger | None = None  # None: sampling began as soon as it could
    # NVML's busy share of the target's GPU per window (empty: no GPU evidence), and the
    # line that says which GPU, or why there is none (gilprof.sampling.gpu)
    gpu_busy: tuple[float, ...] = field(default=())
    gpu_note: str = ""
    # where the holders' stacks (the function tables) come from: "sampler" (its own
    # samples, with the line running) or "reader" (the thread-state reader's ticks, whose
    # frames name functions at their first line: no line numbers)
    stacks: str = "sampler"
    # CLOCK_MONOTONIC seconds (system-wide on Linux: the clock of bpftrace's nsecs and of
    # time.monotonic in any process) at which window 0 began: lines windows up with a
    # kernel trace of the same seconds (None: not recorded, or the capture was killed)
    origin_monotonic: float | None = None

    @property
    def has_lines(self) -> bool:
        return self.stacks != "reader"

    def to_dict(self) -> dict[str, Any]:
        """The profile's `sampling` object."""
        return {
            **asdict(self),
            "mode": str(self.mode),
            "messages": list(self.messages),
            "gpu_busy": list(self.gpu_busy),
        }


# Frames every thread or script has below its real work: they hold the GIL whenever their
# thread does, so they crowd the top of a by-total list without saying anything.
_WRAPPER_FRAMES = {
    ("_bootstrap", "threading.py"),
    ("_bootstrap_inner", "threading.py"),
    ("run", "threading.py"),
}


def is_wrapper_frame(name: str, file: str) -> bool:
    """Thread bootstrap (`Thread._bootstrap`, `_bootstrap_inner`, `Thread.run`) or a module entry."""
    bare = name.rsplit(".", 1)[-1]
    return (
        name == "<module>" or (bare, file.replace("\\", "/").rsplit("/", 1)[-1]) in _WRAPPER_FRAMES
    )
