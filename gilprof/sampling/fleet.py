"""`gilprof watch --ranks local`: one flight recorder per local rank, following the job.

The fleet rescans the host's ranks every few seconds: a rank that starts (or restarts under
a new pid) gets its own recorder thread (and sampler), one whose pid is gone ends its
recorder, and `on_end` tells the caller (the metrics drop its series). Captures of all ranks
go to one folder, each named rank<R>-<pid>-capture-...json. SIGUSR1 asks every recorder for
a capture; SIGINT/SIGTERM end every recorder, each writing what it kept first.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

import psutil

from gilprof.errors import GilprofError, TargetError
from gilprof.model import Target
from gilprof.sampling.backends import get_backend
from gilprof.sampling.backends.base import Backend
from gilprof.sampling.capture import make_target, prepare_folder
from gilprof.sampling.discover import ProcessInfo, Selection, resolve_ranks
from gilprof.sampling.flight import (
    ENDING,
    FlightRecorder,
    RecorderObserver,
    RecorderOptions,
    Trigger,
    WatchRequest,
    now,
    recorder_signals,
)
from gilprof.sampling.session import target_alive

RESCAN_S = 2.0
# a rank younger than this is left to the next scan: its interpreter's thread states may not
# be readable yet (and the states backend would fall back to gil mode for its whole run)
MIN_AGE_S = 1.5


def _old_enough(pid: int) -> bool:
    try:
        return time.time() - psutil.Process(pid).create_time() >= MIN_AGE_S
    except psutil.Error:
        return False


@dataclass
class _Running:
    target: Target
    recorder: FlightRecorder
    thread: threading.Thread
    code: int | None = None


@dataclass(frozen=True)
class FleetRequest:
    ranks: str
    job: int | None
    selection: Selection
    keep_cmdline: bool = False
    rescan_s: float = RESCAN_S
    # False: one target (watch --pid/--rank with --metrics): the run ends when it does,
    # and its captures keep the single recorder's names
    follow: bool = True


class Fleet:
    def __init__(
        self,
        request: FleetRequest,
        backend: Backend,
        options: RecorderOptions,
        observer: RecorderObserver,
        on_start: Callable[[Target], None] = lambda _t: None,
        on_end: Callable[[Target], None] = lambda _t: None,
        scan: Callable[[], list[ProcessInfo]] | None = None,
    ) -> None:
        self.request = request
        self.backend = backend
        self.options = options
        self.observer = observer
        self.on_start = on_start
        self.on_end = on_end
        self.events: deque[Trigger] = deque()
        self.stop = threading.Event()
        self.running: dict[int, _Running] = {}
        self.started = 0
        self._scan = scan or (lambda: resolve_ranks(request.ranks, request.job, request.selection))

    def _start(self, info: ProcessInfo) -> None:
        target = make_target(info, self.request.keep_cmdline)
        rank = "x" if target.rank is None else target.rank
        # the fleet holds the signals and the deadline: each recorder runs until stopped
        prefix = f"rank{rank}-{target.pid}-" if self.request.follow else ""
        options = replace(self.options, prefix=prefix, until_s=None, steps_log=self._log(target))
        recorder = FlightRecorder(target, self.backend, options, self.observer)
        entry = _Running(target, recorder, threading.Thread())

        def run() -> None:
            try:
                entry.code = recorder.run()
            except GilprofError as exc:
                self.observer.message(f"rank {rank} (pid {target.pid}) not recorded: {exc}")
                entry.code = exc.exit_code

        entry.thread = threading.Thread(target=run, name=f"gilprof-rank{rank}", daemon=True)
        self.running[target.pid] = entry
        self.on_start(target)
        self.observer.message(f"recording rank {rank} pid {target.pid}")
        entry.thread.start()

    def _log(self, target: Target) -> str | None:
        """The rank's iteration log: --steps-log with {rank} filled in; without {rank}, the
        log is rank 0's (or the one target's)."""
        log = self.options.steps_log
        if log is None or not self.request.follow:
            return log
        if "{rank}" in log:
            return log.replace("{rank}", str(target.rank))
        return log if target.rank in (0, None) else None

    def _rescan(self) -> None:
        try:
            found = {info.pid: info for info in self._scan()}
        except TargetError as exc:
            found = {}
            if not self.running:
                self.observer.status(f"waiting for ranks: {exc}")
        for pid, entry in list(self.running.items()):
            if not entry.thread.is_alive():
                del self.running[pid]
                self.on_end(entry.target)
                self.observer.message(f"rank {entry.target.rank} pid {pid} ended")
        for pid, info in found.items():
            if not _old_enough(pid):  # its interpreter may not be readable yet: next scan
                continue
            if pid not in self.running and (self.request.follow or not self.started):
                self._start(info)
                self.started += 1

    def run(self) -> int:
        until = None if self.options.until_s is None else now() + self.options.until_s
        ending: Trigger | None = None
        with recorder_signals(self.events, self.stop):
            while ending is None:
                self._rescan()
                while self.events:
                    event = self.events.popleft()
                    if event.kind in ENDING:
                        ending = ending or event
                    for entry in self.running.values():
                        entry.recorder.events.append(event)
                if not self.request.follow and self.started and not self.running:
                    ending = ending or Trigger("exited", now(), "the target exited")
                if until is not None and now() >= until and ending is None:
                    ending = Trigger("until", now(), "--until reached")
                    for entry in self.running.values():
                        entry.recorder.events.append(ending)
                if ending is None:
                    self.stop.wait(self.request.rescan_s)
                    if self.stop.is_set() and not self.events:
                        ending = Trigger("interrupt", now(), "stopped")
            for entry in self.running.values():
                entry.recorder.stop.set()
            deadline = time.monotonic() + 60.0
            for entry in self.running.values():
                entry.thread.join(max(0.1, deadline - time.monotonic()))
                self.on_end(entry.target)
        return ENDING[ending.kind]


def watch_fleet(
    request: WatchRequest,
    fleet: FleetRequest,
    observer: RecorderObserver,
    on_start: Callable[[Target], None],
    on_end: Callable[[Target], None],
) -> int:
    """`watch` (gilprof.sampling.flight) over every rank `fleet.ranks` selects."""
    prepare_folder(request.options.folder)
    sampler = get_backend(request.backend)
    sampler.check_settings(request.options.settings)
    sampler.version()
    scan = None
    if not fleet.follow:
        info = request.wanted.resolve()

        def scan() -> list[ProcessInfo]:
            return [info] if target_alive(info.pid) else []

    return Fleet(fleet, sampler, request.options, observer, on_start, on_end, scan).run()
