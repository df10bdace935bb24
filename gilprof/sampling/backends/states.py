"""States mode: py-spy's GIL holders (non-blocking) plus every Python thread's GIL state
read by gilprof's own thread-state reader (gilprof.sampling.threadstate), neither of which
pauses the target.

Each window runs both side by side over the same seconds: py-spy's `record --gil` gives the
holder's full stacks, counted at exact ticks, as in gil mode (the function tables come from
these); the reader gives, at its own ticks, who holds, who waits, who runs native code and
who is idle, with the stack of each thread that is not idle, as spans on the window's clock
(the contention analysis, blame, wait sites and the verdict come from these). The two sets of
ticks are not joined: each answers its own question from its own instants.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace

from gilprof.errors import SamplerError
from gilprof.model import Mode, Sample, ThreadState
from gilprof.native_classes import NativeRules
from gilprof.sampling.backends.base import SamplerSettings, WindowResult
from gilprof.sampling.threadstate.reader import Recording, StateReader
from gilprof.sampling.threadstate.target import NotReadyYet, StatesUnavailable

# A window whose holder readings name no known thread this often says the layout is off.
MAX_HOLDER_UNKNOWN = 0.05
# The readers of one gilprof (one per rank with --ranks) and its other threads share its GIL.
# At CPython's default switch interval (5 ms) a reader due for a tick can wait that long for
# the GIL while another rank's reader holds it, and those waits fall where the ranks leave a
# collective together: in the slow rank's short awake phase, which its reader then misses.
# Measured by benchmarks/shared_readers.py (the 4-rank straggler job beside 4 CPU hogs, the
# slow rank's sleep share read - its own measured truth, 8 s captures): at 5 ms +6.2 points
# (3 of 3 runs high, 4.5-8.1); at 1 ms +2.1 (8 runs, -0.8 to +4.7); with that rank's reader
# alone in a process of its own +0.4 to -1.4. 0.2 ms reads no better (+1.7) and costs
# gilprof 37% more CPU; 1 ms costs none the runs resolve (3.4-3.6 s per 8 s for 4 ranks).
READER_SWITCH_INTERVAL_S = 0.001

FALLBACK_NOTE = (
    "thread states unavailable ({reason}); sampling in gil mode instead: held shares only, "
    "no waits, blame or host/device verdict (`--mode contention` reads them by pausing the "
    "target)"
)


def gil_settings(settings: SamplerSettings) -> SamplerSettings:
    """The py-spy half of a states window."""
    return replace(settings, mode=Mode.GIL)


def open_reader(
    pid: int, settings: SamplerSettings, stop: threading.Event, deadline: float
) -> tuple[StateReader | None, str]:
    """A checked reader of `pid` with its native locator, or (None, why not). A target too
    young to read is tried again until `deadline` (monotonic)."""
    while True:
        try:
            reader = StateReader.open(pid, settings.rate_hz)
        except NotReadyYet as exc:
            if stop.is_set() or time.monotonic() >= deadline:
                return None, str(exc)
            stop.wait(0.2)
            continue
        except StatesUnavailable as exc:
            return None, str(exc)
        rules = NativeRules.with_recipe(settings.native_rules)
        notes = (reader.locate_native(rules), reader.evidence.watch_wakeups())
        return reader, "; ".join(note for note in notes if note)


class ReaderThread:
    """The reader recording in a thread of its own while py-spy samples the window."""

    def __init__(self, reader: StateReader, realtime_priority: int | None) -> None:
        self.reader = reader
        self.stop = threading.Event()
        self.recording: Recording | None = None
        self.error: BaseException | None = None
        self._priority = realtime_priority
        self.scheduling = ""  # "SCHED_FIFO N" once the thread runs at it, else ""
        self._thread = threading.Thread(target=self._run, name="gilprof-states", daemon=True)

    def start(self) -> None:
        if sys.getswitchinterval() > READER_SWITCH_INTERVAL_S:
            sys.setswitchinterval(READER_SWITCH_INTERVAL_S)
        self._thread.start()

    def _run(self) -> None:
        if self._priority is not None:
            # the reader must wake on time for the same reason py-spy must (base.py); on
            # Linux pid 0 is the calling thread, so only the reader's thread is raised
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self._priority))
        with contextlib.suppress(OSError):
            if os.sched_getscheduler(0) == os.SCHED_FIFO:
                self.scheduling = f"SCHED_FIFO {os.sched_getparam(0).sched_priority}"
        try:
            self.recording = self.reader.record(self.stop)
        except BaseException as exc:  # reported with the window
            self.error = exc

    def finish(self) -> Recording | None:
        self.stop.set()
        self._thread.join(10)
        return self.recording


class ThreadNames:
    """Python thread names by Linux thread id, for threads py-spy's --gil output never names
    (those that never held the GIL while sampled). The reader cannot read them cheaply (a
    name is an attribute of a `threading.Thread` object), so `py-spy dump --nonblocking`
    reads them, in the background, at start and when an unnamed thread appears (at most
    every REFRESH_S): it does not pause the target either. A nonblocking dump reads a
    running target and fails now and then (measured: 27 of 200 on a torch worker, "Failed
    to get stack traces"), so a failed dump is tried again at once, TRIES times."""

    REFRESH_S = 30.0
    FIRST_REFRESH_S = 1.0  # a just-started target's threads appear in its first seconds
    FIRST_WAIT_S = 5.0  # how long the first dump may hold up the first window
    NAMING_WAIT_S = 2.0  # how long a window with unnamed threads waits for a dump in flight
    TRIES = 4

    def __init__(self, binary: str, pid: int) -> None:
        self.binary = binary
        self.pid = pid
        self.names: dict[int, str] = {}
        self._asked = -1e9
        # the gap between dumps doubles from FIRST_REFRESH_S to REFRESH_S: the holders'
        # stacks come from the reader, so these dumps are the only source of names
        self._gap = self.FIRST_REFRESH_S
        self._running: threading.Thread | None = None

    def first(self) -> None:
        """The first dump, waited for (up to FIRST_WAIT_S) so the first window is named."""
        self.refresh(wait_s=self.FIRST_WAIT_S)

    def refresh(self, wait_s: float = 0.0) -> None:
        """Start a dump unless one runs or the gap has not passed; then wait up to wait_s
        for the dump in flight (none: at once)."""
        self._start()
        if wait_s > 0 and self._running is not None:
            self._running.join(wait_s)

    def _start(self) -> None:
        if self._running is not None and self._running.is_alive():
            return
        if time.monotonic() - self._asked < self._gap:
            return
        if self._asked > 0:
            self._gap = min(self.REFRESH_S, 2 * self._gap)
        self._asked = time.monotonic()
        self._running = threading.Thread(target=self._dump, name="gilprof-names", daemon=True)
        self._running.start()

    def _dump(self) -> None:
        from gilprof.sampling.processes import child_process

        cmd = [self.binary, "dump", "--pid", str(self.pid), "--json", "--nonblocking"]
        threads: object = []
        for _ in range(self.TRIES):
            try:
                with child_process(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                ) as child:
                    out, _ = child.proc.communicate(timeout=30)
                threads = json.loads(out or b"[]")
            except (OSError, ValueError, subprocess.TimeoutExpired):
                return  # names are a courtesy: the ids stand in for them
            if child.proc.returncode == 0 and threads:
                break  # else a torn read of the running target: read it again
        for thread in threads if isinstance(threads, list) else []:
            name = thread.get("thread_name")
            if not isinstance(name, str) or not name:
                continue
            # a profile's thread id is the Linux id, or the pthread_t where py-spy has no
            # Linux id (3.10): keep both, they cannot collide (a pthread_t is an address)
            for key in ("os_thread_id", "thread_id"):
                tid = thread.get(key)
                if isinstance(tid, int):
                    self.names[tid] = name

    def name_samples(self, samples: list[Sample]) -> list[Sample]:
        """The samples with the names known; when one is missing, asks for a refresh and
        waits up to NAMING_WAIT_S for it, so that a window's own threads are named in it."""
        if any(sample.tid not in self.names for sample in samples):
            self.refresh(wait_s=self.NAMING_WAIT_S)
        return [
            replace(sample, thread_name=self.names[sample.tid])
            if sample.tid in self.names
            else sample
            for sample in samples
        ]

    def name(self, spans: list[tuple[Sample, float, float]]) -> list[tuple[Sample, float, float]]:
        """name_samples for spans."""
        named = self.name_samples([sample for sample, _a, _b in spans])
        return [(n, a, b) for n, (_s, a, b) in zip(named, spans, strict=True)]


def reader_window(
    reader: StateReader,
    names: ThreadNames,
    priority: tuple[int | None, str],
    seconds: float | None,
    stop: threading.Event,
) -> WindowResult:
    """A states window read by the reader alone: the holders' stacks and their exact tick
    count come from the reader's own ticks (Recording.held) instead of a py-spy process of
    the window's own. Starting py-spy costs ~45 ms of CPU each time (measured: a 2 s
    `record --gil --nonblocking` window 50 ms, a 10 s one 70 ms), more than half of what
    gilprof took of a core at 100 Hz; the reader already reads each holder's stack at
    every tick. Frames name functions (their first line), not the line running."""
    recorder = ReaderThread(reader, priority[0])
    recorder.start()
    try:
        stop.wait(seconds)  # None: until stopped
    finally:
        recording = recorder.finish()
    if recording is None:
        raise SamplerError(f"thread-state reader failed: {recorder.error}")
    result = WindowResult(
        t0=recording.t_first,
        t1=recording.t_last,
        interrupted=stop.is_set(),
        priority=recorder.scheduling or f"normal ({priority[1] or 'SCHED_FIFO refused'})",
    )
    samples = [
        Sample(profile_id, "", frames, count, ThreadState.HELD)
        for (profile_id, frames), count in recording.held.items()
    ]
    result.samples = names.name_samples(samples)
    result.sampler_samples = recording.ticks
    result.ticks_counted = recording.ticks
    result.ticks_exact = recording.ticks > 0
    merge(result, recording, None, reader.native_note)
    result.spans = names.name(result.spans)
    return result


def merge(
    result: WindowResult,
    recording: Recording | None,
    error: BaseException | None,
    native_note: str = "",
) -> None:
    """Put the reader's spans on the py-spy window's clock (seconds since its start), cut
    to the window; a recording that failed its own checks adds a message instead."""
    if recording is None:
        result.messages.append(f"thread-state reader failed in a window: {error}")
        return
    if recording.ticks and recording.holder_unknown > MAX_HOLDER_UNKNOWN * recording.ticks:
        result.messages.append(
            f"thread states dropped for a window: {recording.holder_unknown} of "
            f"{recording.ticks} ticks named a GIL holder that is none of the target's threads"
        )
        return
    if recording.cond_check_dropped:
        result.messages.append(
            f"the GIL condition variable's waiter count read impossible values at "
            f"{recording.cond_mismatch} of {recording.ticks} ticks (not glibc's layout?): from "
            "now on a running thread that is not the holder counts as native, so waits for a "
            "core after a wake-up read as native"
        )
    if recording.evidence_note:
        result.messages.append(recording.evidence_note)
    t0, t1 = result.t0, result.t1
    spans = []
    for sample, start, end in recording.spans:
        a, b = max(start, t0), min(end, t1)
        if b > a:
            spans.append((sample, a - t0, b - t0))
    result.spans = spans
    result.state_ticks = recording.ticks
    result.reader_cpu_s = recording.cpu_s
    result.reader_thread_reads = recording.thread_reads
    result.native_placed = recording.native_placed
    result.native_unplaced = recording.native_unplaced
    result.native_gil = recording.native_gil
    result.native_note = native_note
