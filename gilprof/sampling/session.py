"""A sampling session: consecutive windows from one backend into one Profile.

The session stops at the requested duration, when the target exits, or when `stop` is set
(Ctrl-C, SIGTERM); in the last two cases what was collected is kept and, where the run ended
early, the profile is marked partial with the reason.

With an output path the profile is streamed (gilprof.profile/2): the file is created and its
header written before the first window is sampled, each window is appended as soon as it is
sampled and then folded into one running total, so a capture's memory stays flat however
long it runs, and a SIGKILL leaves a file that reads as a partial profile.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone

import psutil

from gilprof.errors import TargetError
from gilprof.model import SamplingInfo, Target
from gilprof.profile import Profile, StreamWriter, read_streams
from gilprof.sampling.backends.base import Backend, NotReady, SamplerSettings, WindowResult
from gilprof.sampling.gpu import GpuWatch, summary
from gilprof.sampling.triggers import Fired

DEFAULT_WINDOW_S = 2.0
# A window whose sampler could not read a live target after sampling began (py-spy's "failed
# to find python version" from a read that raced the target) is sampled again this many times
# in a row before the capture ends, marked partial: ending at once left a profile of the
# windows so far that claimed to be complete (a 4 s capture of 2 s, seen in CI).
WINDOW_RETRIES = 3


@dataclass(frozen=True)
class SessionOptions:
    settings: SamplerSettings
    duration: float | None = None  # None: until the target exits or `stop` is set
    window_s: float = DEFAULT_WINDOW_S
    attach_timeout: float = 15.0  # how long a just-started target may stay unreadable
    start: Fired | None = None  # the start trigger that let this session begin, if any


WindowCallback = Callable[[Profile, WindowResult], None]
MessageCallback = Callable[[str], None]
OutputPath = Callable[[Target], str]  # where a target's profile is streamed to


def target_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.AccessDenied:
        return True  # it runs, but not for us to inspect: "exited" would be the wrong cause
    except psutil.NoSuchProcess:
        return False


def run_session(
    target: Target,
    backend: Backend,
    options: SessionOptions,
    stop: threading.Event,
    on_window: WindowCallback | None = None,
    output: OutputPath | None = None,
    on_message: MessageCallback | None = None,
) -> Profile:
    """Sample `target` into a Profile; with `output`, stream it to that file as it goes and
    return the profile read back from the file (what a later `report` will see).
    `on_message` hears, as it happens, a change of mode the target forced (a fallback)."""
    try:
        if output is None:
            return _sample(target, backend, options, stop, on_window, None, on_message)
        stream = StreamWriter.create(output(target))
        try:
            _sample(target, backend, options, stop, on_window, stream, on_message)
        except BaseException:
            stream.close()
            if stream.windows_written == 0:  # nothing sampled: no profile, as before streaming
                with contextlib.suppress(OSError):
                    os.unlink(stream.path)
            raise
        stream.close()
        return read_streams(stream.path)[0]
    finally:
        backend.release(target.pid)


def _sample(
    target: Target,
    backend: Backend,
    options: SessionOptions,
    stop: threading.Event,
    on_window: WindowCallback | None,
    stream: StreamWriter | None,
    on_message: MessageCallback | None = None,
) -> Profile:
    attach_deadline = time.monotonic() + options.attach_timeout
    settings, note = backend.prepare(target.pid, options.settings, stop, attach_deadline)
    messages: list[str] = []
    if note:
        messages.append(note)
        if on_message is not None:
            on_message(f"PID {target.pid}: {note}")
    profile = Profile(
        target,
        SamplingInfo(
            sampler=backend.name,
            sampler_version=backend.version(),
            mode=settings.mode,
            rate_hz=settings.rate_hz,
            native=settings.native,
            blocking=settings.blocking,
            window_s=options.window_s,
            started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            start_trigger=options.start.record() if options.start else None,
            stacks=backend.stacks(target.pid, settings),
        ),
    )
    origin: float | None = None
    errors = 0
    reader = _ReaderCost()
    gpu, gpu_note = GpuWatch.open(target.pid)
    gpu_busy: list[float] = []
    ticks_sources: set[str] = set()
    priorities: dict[str, int] = {}  # the sampler's scheduling -> windows sampled with it
    stopped_by = ""
    failed, failure = 0, ""  # windows failed in a row after sampling began; the last error
    covered = 0.0
    if stream is not None:
        stream.start(profile)  # before sampling: a capture killed later leaves a profile file
    while True:
        if stop.is_set():
            stopped_by = "interrupted"
            break
        elapsed = 0.0 if origin is None else time.monotonic() - origin
        if options.duration is not None and elapsed >= options.duration:
            break
        seconds = options.window_s
        if options.duration is not None:
            seconds = min(seconds, options.duration - elapsed)
        try:
            result = backend.sample_window(target.pid, settings, seconds, stop)
        except NotReady as exc:
            if stop.is_set():
                stopped_by = "interrupted"
                break
            if not target_alive(target.pid):
                if origin is None:
                    raise TargetError(
                        f"PID {target.pid} exited before it could be sampled"
                    ) from None
                stopped_by = "exited"
                break
            if origin is None and time.monotonic() < attach_deadline:
                time.sleep(0.2)  # interpreter not readable yet: a just-started process
                continue
            if origin is None:
                raise TargetError(
                    f"PID {target.pid}: {backend.name} cannot read a Python interpreter ({exc})"
                ) from None
            failed += 1
            messages.append(f"window failed ({failed} in a row): {exc}")
            if failed <= WINDOW_RETRIES:
                stop.wait(0.1)
                continue
            stopped_by, failure = "failed", str(exc)
            break
        failed = 0
        if origin is None:
            origin = result.t0
            if options.start is not None:  # how soon after the trigger sampling began
                profile.sampling = replace(
                    profile.sampling, start_trigger=options.start.record(origin)
                )
        ticks, source = backend.ticks(result, settings)
        ticks_sources.add(source)
        if result.priority:
            priorities[result.priority] = priorities.get(result.priority, 0) + 1
        window = profile.add_window(
            result.t0 - origin, result.t1 - origin, ticks, result.samples, result.spans
        )
        covered = window.t1
        if stream is not None:
            stream.window(profile, window)
        errors += result.errors
        reader.add(result)
        if gpu is not None:
            busy = gpu.busy_between(result.t0, result.t1)
            if busy is not None:
                gpu_busy.append(busy)
        messages.extend(result.messages)
        if on_window is not None:
            on_window(profile, result)  # before the fold: a live view shows the last window
        if stream is not None:
            profile.fold_windows()  # written: keep only the running totals
        if result.interrupted or stop.is_set():
            stopped_by = "interrupted"
            break
        if result.target_exited or not target_alive(target.pid):
            stopped_by = "exited"
            break

    partial_reason = None
    if stopped_by == "interrupted":
        partial_reason = f"interrupted after {covered:.1f} s"
    elif stopped_by == "failed":
        partial_reason = (
            f"the sampler failed {failed} windows in a row after {covered:.1f} s ({failure})"
        )
    elif (
        stopped_by == "exited"
        and options.duration is not None
        and covered < options.duration - options.window_s / 2
    ):
        partial_reason = f"target exited after {covered:.1f} s of {options.duration:g} s"
    if gpu is not None:
        gpu.close()
        if gpu_busy:
            gpu_note = summary(gpu, gpu_busy)
        else:
            gpu_note = f"no GPU evidence: NVML gave no reading of GPU {gpu.index} in any window"
    if reader.ticks:
        messages.append(reader.describe(settings.rate_hz))
        native = reader.native()
        if native is not None:
            messages.append(native)
    profile.finish(
        errors=errors,
        partial=partial_reason is not None,
        partial_reason=partial_reason,
        ticks_source="sampler" if ticks_sources == {"sampler"} else "estimated",
        messages=tuple(messages),
        priority=_priority(priorities),
        gpu_busy=tuple(gpu_busy),
        gpu_note=gpu_note,
        origin_monotonic=origin,
    )
    if stream is not None:
        stream.finish(profile)
        stream.sync()
    return profile


class _ReaderCost:
    """What the thread-state reader cost gilprof over a capture (states mode)."""

    def __init__(self) -> None:
        self.ticks = 0
        self.cpu_s = 0.0
        self.thread_reads = 0
        self.native_placed = self.native_unplaced = self.native_gil = 0
        self.native_note = ""

    def add(self, result: WindowResult) -> None:
        self.ticks += result.state_ticks
        self.cpu_s += result.reader_cpu_s
        self.thread_reads += result.reader_thread_reads
        self.native_placed += result.native_placed
        self.native_unplaced += result.native_unplaced
        self.native_gil += result.native_gil
        self.native_note = result.native_note or self.native_note

    def native(self) -> str | None:
        """How native readings were placed, for the profile's messages (None: none seen)."""
        total = self.native_placed + self.native_unplaced
        if not self.native_note and not total:
            return None
        counts = (
            f"native readings: {self.native_placed} of {total} placed "
            f"({self.native_gil} in the interpreter's GIL hand-off, counted as waiting), "
            f"{self.native_unplaced} not placed"
        )
        return f"{counts}; {self.native_note}" if self.native_note else counts

    def describe(self, rate_hz: float) -> str:
        per_tick = self.cpu_s / self.ticks
        per_thread = self.cpu_s / max(1, self.thread_reads)
        return (
            f"thread-state reader: {self.ticks} ticks, {1e3 * per_tick:.2f} ms of gilprof's CPU "
            f"per tick ({1e3 * per_thread:.3f} ms per Python thread read, "
            f"{self.thread_reads / self.ticks:.1f} threads per tick), "
            f"{100 * per_tick * rate_hz:.1f}% of a core at {rate_hz:g} Hz; the target is "
            "never paused"
        )


def _priority(windows: dict[str, int]) -> str:
    """The sampler's scheduling over the capture, as SamplingInfo.priority records it.

    Each window starts its own sampler process, and SCHED_FIFO can be granted to one and
    refused to the next (an RT budget used up by other processes), so a mixed capture names
    every policy with its window count rather than claiming the first window's for all.
    """
    if len(windows) <= 1:
        return next(iter(windows), "")
    return "; ".join(f"{policy} ({count} windows)" for policy, count in windows.items())


def run_sessions(
    targets: list[Target], session: Callable[[Target], Profile]
) -> list[Profile | Exception]:
    """`session(target)` (a `run_session` of one target) for every target, concurrently: one
    sampler process each; the sessions should share one stop event.

    A rank that fails (exited before sampling, unreadable) yields its exception in place of
    a profile, so the other ranks' profiles are still written.
    """
    results: list[Profile | Exception] = [RuntimeError("not run")] * len(targets)

    def work(index: int, target: Target) -> None:
        try:
            results[index] = session(target)
        except Exception as exc:  # reported per rank by the caller
            results[index] = exc

    threads = [
        threading.Thread(target=work, args=(i, t), name=f"gilprof-rank-{t.rank}", daemon=True)
        for i, t in enumerate(targets)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(0.1)  # short joins keep the main thread responsive to signals
    return results
