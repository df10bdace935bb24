"""The protocol every sampler backend implements.

A backend samples one process for one window and returns parsed samples. Windows are the unit
of time in a profile: each carries its own start, end and tick count, which is what the
statistics of `compare` need (samples close in time are correlated; windows are not, much).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from gilprof.model import Mode, Sample
from gilprof.procs import die_with_parent


@dataclass(frozen=True)
class SamplerSettings:
    mode: Mode = Mode.GIL
    rate_hz: float = 100.0
    native: bool = False
    blocking: bool = False


@dataclass
class WindowResult:
    t0: float  # monotonic clock, when sampling started
    t1: float  # monotonic clock, when sampling stopped
    samples: list[Sample] = field(default_factory=list)
    # contention mode: (sample, start, end) seconds since sampling started, all threads aligned
    spans: list[tuple[Sample, float, float]] = field(default_factory=list)
    sampler_samples: int | None = None  # what the sampler said it recorded
    ticks_counted: int = 0  # sampling instants the sampler's output lets us count, if any
    errors: int = 0
    target_exited: bool = False
    interrupted: bool = False
    messages: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return max(0.0, self.t1 - self.t0)


# Every sampler process gilprof starts, so that none outlives it (kill_all_children).
_children: set[subprocess.Popen[bytes]] = set()
_children_lock = threading.Lock()


@contextmanager
def sampler_process(cmd: list[str]) -> Iterator[subprocess.Popen[bytes]]:
    """Start a sampler in its own process group, and kill it (and its group) on the way out.

    Own group: a terminal's Ctrl-C reaches gilprof only, which then stops the sampler itself
    with SIGINT so that the sampler still writes its file. The kernel kills it if gilprof dies.
    """
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=die_with_parent)
    with _children_lock:
        _children.add(proc)
    try:
        yield proc
    finally:
        _reap(proc)
        with _children_lock:
            _children.discard(proc)


def kill_all_children() -> None:
    with _children_lock:
        procs = list(_children)
    for proc in procs:
        _reap(proc)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def run_window(proc: subprocess.Popen[bytes], started: threading.Event, start_time: list[float],
               seconds: float | None, stop: threading.Event) -> tuple[float | None, bool]:
    """Let a sampler process run for `seconds` after it `started`, or until `stop` is set.

    Both samplers write their output when they receive SIGINT, so the window is ended that
    way. Returns (when it was ended, or None if the sampler stopped by itself; whether
    `stop` ended it).
    """
    end_time: float | None = None
    interrupted = False
    while proc.poll() is None:
        if started.is_set() and seconds is not None and \
                time.monotonic() - start_time[0] >= seconds:
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
    return end_time, interrupted


class Backend(ABC):
    name: str = ""
    min_version: tuple[int, ...] = ()

    @abstractmethod
    def version(self) -> str:
        """The sampler binary's version; raises SamplerError when missing or too old."""

    def check_settings(self, settings: SamplerSettings) -> None:  # noqa: B027 - optional hook
        """Raise UsageError for settings this sampler cannot honour, before anything starts."""

    @abstractmethod
    def sample_window(self, pid: int, settings: SamplerSettings, seconds: float | None,
                      stop: threading.Event) -> WindowResult:
        """Sample `pid` for `seconds` (None: until it exits) or until `stop` is set."""

    @abstractmethod
    def ticks(self, window: WindowResult, settings: SamplerSettings) -> tuple[float, str]:
        """Sampling instants in the window and where that number came from."""
