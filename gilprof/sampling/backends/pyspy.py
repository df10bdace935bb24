"""py-spy backend: one `py-spy record -f raw --threads` run per sampling window.

py-spy's raw format gives exact counts per (thread, stack) but no time; its chrometrace
format has timestamps only where a thread's stack changes, and in --gil mode a thread's span
runs on across ticks where another thread held the GIL, so it cannot give per-tick shares.
Windows give both: exact counts, and a start and end for each stretch of sampling.

Ticks. py-spy's "Samples: N" counts recorded traces, not sampling instants, and a --gil tick
with no holder leaves no trace at all. But a window run with `--duration N` processes exactly
N x rate - 1 ticks (py-spy counts intervals and stops before recording the N x rate-th), so
each window is run that way and its ticks are exact; ticks that errored ("Errors: E") say
nothing about the holder and are left out of the denominator. py-spy never skips a tick: when
it falls behind it samples back to back until it catches up. A window that ends early (the
target exited, the user stopped the capture, or py-spy overran its window) has an unknown
tick count; its ticks are then estimated as seconds x rate, which is unbiased (py-spy spaces
its samples with exponential intervals, a Poisson process) but carries a Poisson error of
sqrt(seconds x rate), and the profile says "estimated".

Flags. `--gil` always with `--idle`: without it py-spy drops a GIL holder whose innermost
Python frame looks idle (`threading.wait`, `selectors.select`, `poll`). Non-blocking
samplers run at SCHED_FIFO where permitted (see base.realtime_priority).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import replace

from gilprof.errors import SamplerError
from gilprof.model import Frame, Mode, Sample, ThreadState
from gilprof.sampling.backends.base import (
    Backend,
    SamplerRun,
    SamplerSettings,
    WindowResult,
    realtime_priority,
    run_sampler,
)
from gilprof.sampling.backends.states import (
    FALLBACK_NOTE,
    ReaderThread,
    ThreadNames,
    gil_settings,
    merge,
    open_reader,
    reader_window,
)
from gilprof.sampling.processes import find_binary
from gilprof.sampling.threadstate.reader import StateReader

# Digit runs are bounded so that int() never meets a number it refuses (4300+ digits).
_THREAD_PREFIX = re.compile(
    r"^thread \((?P<tid>0x[0-9A-Fa-f]{1,16}|[0-9]{1,20})\)(?::\s?(?P<name>[^;]*))?$"
)
_VERSION = re.compile(r"py-spy (\d+)\.(\d+)\.(\d+)")
_SUMMARY = re.compile(r"Samples: (\d+) Errors: (\d+)")

# What py-spy prints when the target is gone or not (yet) a Python process it can read.
_NOT_READY = (
    "failed to find python version",
    "failed to get process",
    "no such file",
    "no such process",
)


# The figures are benchmarks/accuracy's `burst` workload (0.3 ms holds after 4 ms sleeps)
# run with `--no-realtime`; docs/accuracy.md has the tables.
NORMAL_PRIORITY_NOTE = (
    "sampler not at real-time priority ({priority}): GIL holds shorter than ~1 ms right "
    "after a sleep or I/O read low, on an idle machine down to a tenth of their share "
    "(measured: 0.4-1.1% of wall for a truth of 3.2%; at SCHED_FIFO within 0.5 points), and the "
    "ticks missed go to the thread that held the GIL next; longer holds are unaffected. {fix}"
)
FIFO_FIX = "Run gilprof as root or with CAP_SYS_NICE to sample at SCHED_FIFO priority"
FIFO_FIX_OFF = "Leave out --no-realtime to sample at SCHED_FIFO priority"
# Measured tick by tick (benchmarks/accuracy/accuracy_ticks.py, docs/accuracy.md): py-spy
# 0.4.3 stops the target's threads one at a time, and a thread asleep in a system call must
# get a core to stop, so the threads not yet stopped run on meanwhile.
CONTENTION_NOTE = (
    "contention mode pauses the target at every tick, one thread after another (py-spy "
    "--native cannot sample without stopping it); without a free core the threads not yet "
    "stopped run on for up to a few ms, so GIL holds and native calls shorter than ~10 ms read "
    "low (measured: 5 ms holds every 50 ms at half their share, 1.6 ms zlib calls at 20-40%); "
    "threads that never sleep are within 10 points (the first one stopped reads a few points "
    "high, measured 3-4 on average), and their waits are the rest. For held shares use gil mode, "
    "which does not pause the target"
)


def whole_seconds(seconds: float | None) -> int | None:
    """The window as py-spy's `--duration` (whole seconds, at least 1), or None: open-ended.

    Rounded rather than cut: a session's last window may be a fraction of its window length,
    and exact ticks are worth more than the fraction of a second it over- or undershoots.
    """
    if seconds is None or not math.isfinite(seconds):
        return None
    return max(1, round(seconds))


def _ascii_number(text: str, max_digits: int) -> bool:
    return 0 < len(text) <= max_digits and text.isascii() and text.isdigit()


def parse_frame(part: str) -> Frame:
    """`name (file:line)`, `name (file)` or a bare name.

    Split with find/rpartition rather than a regex: lazy groups backtrack quadratically on
    a long part full of " (" (a minute for 64 KB).
    """
    opening = part.find(" (")
    if opening < 0 or not part.endswith(")"):
        return Frame(part, "", 0)
    inside = part[opening + 2 : -1]
    file, colon, line = inside.rpartition(":")
    if colon and _ascii_number(line, 9):
        return Frame(part[:opening], file, int(line))
    return Frame(part[:opening], inside, 0)


def parse_raw_line(line: str, state: ThreadState) -> Sample | None:
    """One line of `py-spy record -f raw --threads`: `thread (TID): NAME;frame;frame COUNT`."""
    line = line.rstrip("\n")
    stack, _, count_text = line.rpartition(" ")
    if not stack or not _ascii_number(count_text, 18):
        return None
    parts = stack.split(";")
    match = _THREAD_PREFIX.match(parts[0])
    if not match:
        return None
    tid_text = match.group("tid")
    tid = int(tid_text, 16) if tid_text.startswith("0x") else int(tid_text)
    frames = [parse_frame(part) for part in parts[1:] if part]
    return Sample(tid, (match.group("name") or "").strip(), tuple(frames), int(count_text), state)


def parse_raw(text: str, state: ThreadState) -> Iterator[Sample]:
    for line in text.splitlines():
        sample = parse_raw_line(line, state)
        if sample is not None:
            yield sample


class PySpyBackend(Backend):
    name = "py-spy"
    min_version = (0, 4, 0)

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or find_binary("py-spy")
        self._version: str | None = None
        self._told: set[tuple[int, str]] = set()  # (pid, topic) of notes already given
        self._readers: dict[int, StateReader] = {}  # states mode: one checked reader per pid
        self._names: dict[int, ThreadNames] = {}

    def prepare(
        self, pid: int, settings: SamplerSettings, stop: threading.Event, deadline: float
    ) -> tuple[SamplerSettings, str]:
        if settings.mode is not Mode.STATES:
            return settings, ""
        reader, note = open_reader(pid, settings, stop, deadline)
        if reader is None:
            return gil_settings(settings), FALLBACK_NOTE.format(reason=note)
        self._readers[pid] = reader
        self._names[pid] = ThreadNames(self.binary, pid)
        self._names[pid].first()
        return settings, note  # how native time is placed, or why it is not

    def stacks(self, pid: int, settings: SamplerSettings) -> str:
        reads = settings.mode is Mode.STATES and pid in self._readers
        reads = reads and not settings.blocking and not settings.lines
        return "reader" if reads else "sampler"

    def release(self, pid: int) -> None:
        reader = self._readers.pop(pid, None)
        self._names.pop(pid, None)
        if reader is not None:
            reader.close()

    def version(self) -> str:
        if self._version is None:
            try:
                out = subprocess.run(
                    [self.binary, "--version"], capture_output=True, text=True, timeout=30
                ).stdout
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise SamplerError(f"cannot run {self.binary}: {exc}") from None
            match = _VERSION.search(out)
            if not match:
                raise SamplerError(
                    f"{self.binary} did not report a py-spy version: {out.strip()!r}"
                )
            found = tuple(int(x) for x in match.groups())
            if found < self.min_version:
                need = ".".join(map(str, self.min_version))
                raise SamplerError(
                    f"py-spy {match.group(0)[7:]} is too old; gilprof needs >= {need}"
                )
            self._version = ".".join(map(str, found))
        return self._version

    def command(
        self, pid: int, settings: SamplerSettings, output: str, seconds: float | None = None
    ) -> list[str]:
        """The py-spy command of one window; `seconds` set: a `--duration` window (exact ticks)."""
        contention = settings.mode is Mode.CONTENTION
        cmd = [self.binary, "record", "--pid", str(pid), "--rate", str(round(settings.rate_hz))]
        cmd += ["--format", "speedscope" if contention else "raw", "--output", output]
        if contention:
            # Every thread at every tick, with native frames (py-spy then pauses the target).
            return [*cmd, "--full-filenames", "--native", "--idle", *self._duration_args(seconds)]
        cmd += ["--threads", "--full-filenames"]
        if settings.mode.counts_holders:
            cmd += ["--gil", "--idle"]  # --idle: keep holders py-spy's heuristic calls idle
        elif settings.mode is Mode.WALL:
            cmd.append("--idle")
        if settings.native:
            cmd.append("--native")  # py-spy refuses --native with --nonblocking
        elif not settings.blocking:
            cmd.append("--nonblocking")
        return cmd + self._duration_args(seconds)

    @staticmethod
    def _duration_args(seconds: float | None) -> list[str]:
        whole = whole_seconds(seconds)
        return [] if whole is None else ["--duration", str(whole)]

    def ticks(self, window: WindowResult, settings: SamplerSettings) -> tuple[float, str]:
        if window.ticks_exact or (settings.mode is Mode.CONTENTION and window.ticks_counted):
            # py-spy's own count; contention: every thread at every tick, counted
            return float(window.ticks_counted), "sampler"
        if settings.mode is Mode.WALL and window.samples:
            # In wall mode every live thread is recorded at every tick, so the busiest
            # thread's count is the number of ticks.
            per_thread: dict[int, int] = {}
            for s in window.samples:
                per_thread[s.tid] = per_thread.get(s.tid, 0) + s.count
            return float(max(per_thread.values())), "sampler"
        return window.seconds * settings.rate_hz, "estimated"

    def sample_window(
        self, pid: int, settings: SamplerSettings, seconds: float | None, stop: threading.Event
    ) -> WindowResult:
        reader = self._readers.get(pid) if settings.mode is Mode.STATES else None
        if reader is None:
            return self._sample_window(pid, settings, seconds, stop)
        if self.stacks(pid, settings) == "reader":  # the default: no py-spy per window
            result = reader_window(
                reader, self._names[pid], realtime_priority(settings), seconds, stop
            )
            self._tell_once(pid, result, settings)
            return result
        priority, _ = realtime_priority(settings)
        recorder = ReaderThread(reader, priority)
        recorder.start()
        try:
            result = self._sample_window(pid, settings, seconds, stop)
        finally:
            recording = recorder.finish()
        merge(result, recording, recorder.error, reader.native_note)
        result.spans = self._names[pid].name(result.spans)
        return result

    def _sample_window(
        self, pid: int, settings: SamplerSettings, seconds: float | None, stop: threading.Event
    ) -> WindowResult:
        state = {
            Mode.STATES: ThreadState.HELD,
            Mode.GIL: ThreadState.HELD,
            Mode.WALL: ThreadState.UNKNOWN,
            Mode.CPU: ThreadState.ACTIVE,
        }.get(settings.mode, ThreadState.UNCLASSIFIED)
        whole = whole_seconds(seconds)
        with tempfile.TemporaryDirectory(prefix="gilprof-") as tmp:
            output = os.path.join(tmp, "window.txt")
            cmd = self.command(pid, settings, output, seconds)
            timed = whole is not None
            # A --duration window is ended by py-spy; SIGINT only if it overruns by far.
            deadline = whole + max(5.0, whole) if whole is not None else seconds
            run = run_sampler(
                cmd, lambda line: "Sampling process" in line, deadline, stop, settings
            )
            result = self._window(run, output, state, timed)
            if settings.mode is Mode.CONTENTION:
                self._read_spans(output, result)
        if whole is not None and result.ticks_exact:
            result.ticks_counted = max(0, whole * round(settings.rate_hz) - 1 - result.errors)
            self._check_rate(pid, result, settings)
        self._tell_once(pid, result, settings)
        return result

    def _check_rate(self, pid: int, result: WindowResult, settings: SamplerSettings) -> None:
        """Ticks are exact however late py-spy was, but a window that took much longer than
        planned was sampled in back-to-back bursts, whose samples are correlated."""
        achieved = (
            (result.ticks_counted + result.errors) / result.seconds if result.seconds else 0.0
        )
        if achieved < 0.8 * settings.rate_hz:
            self._tell(
                pid,
                result,
                "late",
                f"py-spy fell behind: {achieved:.0f} of {settings.rate_hz:g} "
                "samples/s in a window (machine busy); shares stay unbiased but noisier",
            )

    def _tell_once(self, pid: int, result: WindowResult, settings: SamplerSettings) -> None:
        """What the user must know about this capture's accuracy, once per target."""
        if settings.mode is Mode.CONTENTION:
            self._tell(pid, result, "blocking", CONTENTION_NOTE)
        elif result.priority.startswith("normal") and "blocking" not in result.priority:
            self._tell(
                pid,
                result,
                "priority",
                NORMAL_PRIORITY_NOTE.format(
                    priority=result.priority,
                    fix=FIFO_FIX if settings.realtime else FIFO_FIX_OFF,
                ),
            )

    def _tell(self, pid: int, result: WindowResult, topic: str, message: str) -> None:
        if (pid, topic) not in self._told:
            self._told.add((pid, topic))
            result.messages.append(message)

    @staticmethod
    def _window(run: SamplerRun, output: str, state: ThreadState, timed: bool) -> WindowResult:
        """One window from py-spy's run; `timed`: py-spy ended it itself (--duration), so its
        ticks are exact unless it had to be stopped first."""
        text_out = run.text
        if not run.started:
            lowered = text_out.lower()
            raise run.start_failure(
                "py-spy",
                _last_error(text_out),
                denied="permission denied" in lowered or "operation not permitted" in lowered,
                not_ready=any(phrase in lowered for phrase in _NOT_READY),
            )
        result = WindowResult(
            t0=run.t0, t1=run.t1, interrupted=run.interrupted, priority=run.priority
        )
        result.target_exited = "process exited" in text_out or "process ended" in text_out
        summary = _SUMMARY.search(text_out)
        if summary:
            result.sampler_samples = int(summary.group(1))
            result.errors = int(summary.group(2))
        result.ticks_exact = (
            timed
            and run.stopped_itself
            and not result.target_exited
            and summary is not None
            and run.returncode == 0
        )
        if state is ThreadState.UNCLASSIFIED:
            return result  # contention mode: the caller reads the trace
        try:
            with open(output, encoding="utf-8", errors="replace") as handle:
                result.samples = list(parse_raw(handle.read(), state))
        except FileNotFoundError:
            result.ticks_exact = False
            result.messages.append(
                "py-spy wrote no output for this window: " + _last_error(text_out)
            )
        return result

    def _read_spans(self, output: str, result: WindowResult) -> None:
        from gilprof.sampling.backends.pyspy_speedscope import parse_speedscope

        try:
            with open(output, encoding="utf-8", errors="replace") as handle:
                doc = json.load(handle)
        except (OSError, ValueError, RecursionError):
            result.messages.append("py-spy wrote no readable output for this window")
            return
        ticks, runs = parse_speedscope(doc, result.seconds)
        result.spans = runs
        result.ticks_counted = ticks
        counts: dict[Sample, int] = {}
        for sample, _start, _end in runs:
            key = replace(sample, count=1)
            counts[key] = counts.get(key, 0) + sample.count
        result.samples = [replace(s, count=c) for s, c in counts.items()]


def _last_error(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("Error:"):
            return line[len("Error:") :].strip()
    meaningful = [ln for ln in text.splitlines() if ln and not ln.lstrip()[:1].isdigit()]
    return meaningful[-1] if meaningful else "no output"
