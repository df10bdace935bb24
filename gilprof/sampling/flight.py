"""The flight recorder's loop: sample one target in short windows for as long as it runs,
keep the last minutes, write them as a profile when a trigger fires.

Triggers: a followed iteration log whose host step p50 crosses a threshold, SIGUSR1, a
deadline (--until), the end of the run (Ctrl-C, SIGTERM, the target exiting). Each capture
holds `keep_s` before its trigger and `after_s` after it, and says in its messages which
trigger fired, when, and the log lines around it. Captures are written whole and atomically
(gilprof.profile.files), so killing the recorder never leaves a torn one.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

from gilprof.errors import EXIT_INTERRUPTED, GilprofError, TargetError
from gilprof.model import SamplingInfo, Target
from gilprof.sampling.backends import get_backend
from gilprof.sampling.backends.base import Backend, NotReady, SamplerSettings, WindowResult
from gilprof.sampling.capture import make_target, prepare_folder, restore_signals
from gilprof.sampling.discover import TargetQuery
from gilprof.sampling.recorder import StepMonitor, StepThreshold, WindowRing, with_messages
from gilprof.sampling.session import WINDOW_RETRIES, target_alive

EXIT_TERMINATED = 143  # 128 + SIGTERM
# How many log lines after a step trigger a capture quotes (those before: StepMonitor).
LINES_AFTER = 5


@dataclass(frozen=True)
class RecorderOptions:
    settings: SamplerSettings
    folder: str
    window_s: float = 2.0
    keep_s: float = 300.0
    after_s: float = 60.0
    min_gap_s: float = 600.0
    max_captures: int | None = None
    until_s: float | None = None
    steps_log: str | None = None
    trigger: StepThreshold | None = None
    over: int = 20
    baseline_s: float = 120.0
    attach_timeout: float = 15.0
    # a log line -> its host step time in ms, None for other lines (gilprof.steps parses;
    # the CLI passes it in, sampling does not import its sibling layer)
    host_ms_of: Callable[[str], float | None] | None = None
    # live metrics (`watch --metrics`): each window, with the ring it went into and its
    # ticks; each line of the followed log
    on_window: Callable[[Target, WindowRing, WindowResult, float], None] | None = None
    on_line: Callable[[Target, str], None] | None = None
    # a capture's file names start with this (one recorder per rank in one folder)
    prefix: str = ""


@dataclass
class Trigger:
    kind: str  # steps, signal, until, interrupt, terminate, exited
    at: float  # monotonic clock
    detail: str
    lines: tuple[str, ...] = ()
    lines_after: list[str] = field(default_factory=list)
    wall: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


class RecorderObserver(Protocol):
    def status(self, text: str) -> None: ...
    def message(self, text: str) -> None: ...
    def wrote(self, path: str, trigger: Trigger) -> None: ...


ENDING = {"interrupt": EXIT_INTERRUPTED, "terminate": EXIT_TERMINATED, "until": 0, "exited": 0}


class StepsFollower:
    """Follows an iteration log from its end (from its start if it appears later), feeding
    each line to a StepMonitor; a fire becomes a Trigger in `events`."""

    def __init__(
        self,
        path: str,
        host_ms_of: Callable[[str], float | None],
        monitor: StepMonitor | None,
        events: deque[Trigger],
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.path = path
        self.monitor = monitor
        self.events = events
        self.listeners: list[list[str]] = []  # pending captures collecting the lines after
        self._host_ms_of = host_ms_of
        self._on_line = on_line
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gilprof-steps", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2.0)

    def _run(self) -> None:
        handle = None
        position = 0
        try:
            if os.path.exists(self.path):
                handle = open(self.path, "rb")  # noqa: SIM115 - closed in finally
                position = handle.seek(0, os.SEEK_END)
            partial = b""
            while not self._stop.is_set():
                if handle is None:
                    if os.path.exists(self.path):
                        handle = open(self.path, "rb")  # noqa: SIM115
                        position = 0
                    else:
                        self._stop.wait(0.5)
                        continue
                if os.path.getsize(self.path) < position:  # truncated or rotated: start over
                    handle.seek(0)
                    position, partial = 0, b""
                chunk = handle.read(1 << 16)
                if not chunk:
                    self._stop.wait(0.2)
                    continue
                position += len(chunk)
                *complete, partial = (partial + chunk).split(b"\n")
                for raw in complete:
                    self._line(raw.decode("utf-8", "replace"))
        except OSError:
            return
        finally:
            if handle is not None:
                handle.close()

    def _line(self, line: str) -> None:
        for listener in self.listeners:
            if len(listener) < LINES_AFTER:
                listener.append(line)
        if self._on_line is not None:
            self._on_line(line)
        if self.monitor is None:
            return
        fire = self.monitor.add(line, self._host_ms_of(line), now())
        if fire is not None:
            self.events.append(Trigger("steps", now(), fire.detail, fire.lines))


def now() -> float:
    return time.monotonic()


@contextmanager
def recorder_signals(events: deque[Trigger], stop: threading.Event) -> Iterator[None]:
    """SIGUSR1 asks for a capture; SIGINT/SIGTERM end the run (after writing what is kept)."""
    kinds = {signal.SIGUSR1: "signal", signal.SIGINT: "interrupt", signal.SIGTERM: "terminate"}
    ended: list[int] = []

    def handler(signum: int, _frame: Any) -> None:
        kind = kinds[signal.Signals(signum)]
        name = signal.Signals(signum).name
        events.append(Trigger(kind, now(), f"{name} received"))
        if kind != "signal":
            ended.append(signum)
            stop.set()

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in kinds}
    try:
        yield
    finally:
        restore_signals(previous, stopped_by_signal=bool(ended))


class FlightRecorder:
    def __init__(
        self,
        target: Target,
        backend: Backend,
        options: RecorderOptions,
        observer: RecorderObserver,
    ) -> None:
        self.target = target
        self.backend = backend
        self.options = options
        self.observer = observer
        self.events: deque[Trigger] = deque()
        self.stop = threading.Event()
        self.captures = 0
        self.pending: Trigger | None = None
        self.last_trigger: float | None = None
        self.monitor: StepMonitor | None = None
        if options.trigger is not None:
            self.monitor = StepMonitor(options.trigger, options.over, options.baseline_s)
        self._mono0 = now()
        self._wall0 = datetime.now(timezone.utc)

    def run(self) -> int:
        """Sample until a run-ending trigger or --max-captures; the exit status."""
        follower = None
        log, host_ms_of = self.options.steps_log, self.options.host_ms_of
        on_line = self.options.on_line
        if log and host_ms_of is not None and (self.monitor is not None or on_line is not None):
            follower = StepsFollower(
                log,
                host_ms_of,
                self.monitor,
                self.events,
                None if on_line is None else (lambda line: on_line(self.target, line)),
            )
        with recorder_signals(self.events, self.stop):
            if follower is not None:
                follower.start()
            try:
                return self._loop(follower)
            finally:
                if follower is not None:
                    follower.stop()
                self.backend.release(self.target.pid)

    def _loop(self, follower: StepsFollower | None) -> int:
        options, backend, pid = self.options, self.backend, self.target.pid
        deadline = now() + options.attach_timeout
        settings, note = backend.prepare(pid, options.settings, self.stop, deadline)
        if note:
            self.observer.message(f"PID {pid}: {note}")
        self.ring = WindowRing(self.target, self._sampling(settings, ""))
        until = None if options.until_s is None else now() + options.until_s
        started = False
        failed = 0  # windows failed in a row since the last one sampled (session.WINDOW_RETRIES)
        ticks_sources: set[str] = set()
        while True:
            ending: Trigger | None = None
            if not self.stop.is_set():
                try:
                    result = backend.sample_window(pid, settings, options.window_s, self.stop)
                except NotReady as exc:
                    if not started and now() < deadline and target_alive(pid):
                        time.sleep(0.2)
                        continue
                    if not started:
                        raise TargetError(f"PID {pid}: cannot be sampled ({exc})") from None
                    failed += 1
                    if failed <= WINDOW_RETRIES and target_alive(pid):
                        self.observer.message(f"PID {pid}: window failed, sampling again ({exc})")
                        self.stop.wait(0.1)
                        continue
                    ending = Trigger("exited", now(), f"PID {pid} can no longer be read ({exc})")
                else:
                    started, failed = True, 0
                    ticks, source = backend.ticks(result, settings)
                    ticks_sources.add(source)
                    self.ring.add(result, ticks)
                    if options.on_window is not None:
                        options.on_window(self.target, self.ring, result, ticks)
                    if result.target_exited or not target_alive(pid):
                        ending = Trigger("exited", now(), f"PID {pid} exited")
            if until is not None and now() >= until and ending is None:
                ending = Trigger("until", now(), "--until reached")
            ending = self._take_events(follower) or ending
            if self.stop.is_set() and ending is None:
                ending = Trigger("interrupt", now(), "stopped")
            if self.pending is not None and (ending or now() >= self.pending.at + options.after_s):
                self._write(self.pending, settings, cut_short=ending is not None)
                self.pending = None
                if options.max_captures is not None and self.captures >= options.max_captures:
                    self.observer.message(f"{self.captures} captures written (--max-captures)")
                    return 0
            elif ending is not None:
                self._write(ending, settings, cut_short=ending.kind in ("interrupt", "terminate"))
            if ending is not None:
                return ENDING[ending.kind]
            self._trim()
            self.observer.status(self._status())

    def _take_events(self, follower: StepsFollower | None) -> Trigger | None:
        """Start a capture for the first acceptable trigger; the run-ending one, if any."""
        ending = None
        while self.events:
            event = self.events.popleft()
            if event.kind in ENDING:
                ending = ending or event
                continue
            if self.pending is not None:
                self.observer.message(f"trigger {event.kind} ignored: a capture is under way")
                continue
            if self.last_trigger is not None and event.at - self.last_trigger < (
                self.options.min_gap_s
            ):
                self.observer.message(
                    f"trigger {event.kind} ignored: {event.at - self.last_trigger:.0f} s after "
                    f"the last one (--min-gap {self.options.min_gap_s:g} s): {event.detail}"
                )
                continue
            self.observer.message(f"trigger {event.kind}: {event.detail}; capturing")
            self.pending, self.last_trigger = event, event.at
            if follower is not None and event.kind == "steps":
                follower.listeners[:] = [event.lines_after]
        return ending

    def _trim(self) -> None:
        start = now() - self.options.keep_s
        if self.pending is not None:
            start = min(start, self.pending.at - self.options.keep_s)
        self.ring.trim(start)

    def _write(self, trigger: Trigger, settings: SamplerSettings, cut_short: bool) -> None:
        self.captures += 1
        stamp = trigger.wall.astimezone().strftime("%Y%m%d-%H%M%S")
        path = os.path.join(
            self.options.folder,
            f"{self.options.prefix}capture-{self.captures}-{trigger.kind}-{stamp}.json",
        )
        end = now()
        windows = [w for w in self.ring.windows if w.t1 > trigger.at - self.options.keep_s]
        first = windows[0].t0 if windows else trigger.at
        wall_first = self._wall(first)
        before, after = trigger.at - first, max(0.0, end - trigger.at)
        messages = [
            f"flight recorder: trigger {trigger.kind} at "
            f"{trigger.wall.isoformat(timespec='seconds')} (t = {before:.1f} s in this "
            f"profile): {trigger.detail}",
            f"flight recorder: capture {self.captures} holds {before:.0f} s before the "
            f"trigger and {after:.0f} s after it (--keep {self.options.keep_s:g} s, "
            f"--after {self.options.after_s:g} s)",
            *(f"log before trigger: {line}" for line in trigger.lines),
            *(f"log after trigger: {line}" for line in trigger.lines_after),
        ]
        sampling = with_messages(self._sampling(settings, wall_first), messages)
        profile = self.ring.snapshot(trigger.at - self.options.keep_s, end, sampling)
        reason = None
        if cut_short and trigger.kind not in ENDING:
            reason = f"the recorder stopped {after:.0f} s after the trigger"
        elif cut_short:
            reason = trigger.detail
        profile.finish(partial=reason is not None, partial_reason=reason)
        try:
            # a gilprof.profile/2 stream, as `attach` writes: a record per window, so that
            # writing a capture of many minutes does not build it as one document first
            profile.save(path, version=2)
        except (OSError, GilprofError) as exc:
            self.observer.message(f"capture {self.captures} not written: {exc}")
            return
        self.observer.wrote(path, trigger)

    def _wall(self, monotonic: float) -> str:
        at = self._wall0 + timedelta(seconds=monotonic - self._mono0)
        return at.isoformat(timespec="seconds")

    def _sampling(self, settings: SamplerSettings, started_at: str) -> SamplingInfo:
        return SamplingInfo(
            sampler=self.backend.name,
            sampler_version=self.backend.version(),
            mode=settings.mode,
            rate_hz=settings.rate_hz,
            native=settings.native,
            blocking=settings.blocking,
            window_s=self.options.window_s,
            started_at=started_at,
            stacks=self.backend.stacks(self.target.pid, settings),
        )

    def _status(self) -> str:
        windows = self.ring.windows
        kept = windows[-1].t1 - windows[0].t0 if windows else 0.0
        parts = [
            f"watching pid {self.target.pid}",
            f"kept {kept:.0f} s ({len(windows)} windows, {len(self.ring.profile.stacks)} stacks)",
            f"captures {self.captures}",
        ]
        if self.monitor is not None:
            parts.append(self.monitor.describe())
        if self.pending is not None:
            left = self.pending.at + self.options.after_s - now()
            parts.append(f"capturing ({left:.0f} s to go)")
        return " | ".join(parts)


@dataclass(frozen=True)
class WatchRequest:
    """Which process `gilprof watch` records, and how."""

    options: RecorderOptions
    backend: str = "py-spy"
    wanted: TargetQuery = field(default_factory=TargetQuery)
    keep_cmdline: bool = False


def watch(request: WatchRequest, observer: RecorderObserver) -> int:
    """Check the output folder and the sampler, find the target, record it: the exit status."""
    prepare_folder(request.options.folder)
    sampler = get_backend(request.backend)
    sampler.check_settings(request.options.settings)
    sampler.version()
    if request.options.steps_log and not os.path.exists(request.options.steps_log):
        observer.message(f"{request.options.steps_log} does not exist yet: waiting for it")
    info = request.wanted.resolve()
    target = make_target(info, request.keep_cmdline)
    observer.message(
        f"recording pid {info.pid} rank {'?' if info.rank is None else info.rank} into "
        f"{request.options.folder}/ (keeps {request.options.keep_s:g} s)"
    )
    return FlightRecorder(target, sampler, request.options, observer).run()
