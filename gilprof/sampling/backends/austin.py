"""austin backend: one `austin -p PID -o FILE` run per sampling window, parsed from its text.

Pinned to austin 3.x, installed as `austin-dist==3.7.0` (the `austin` extra). austin-dist 4.x
ships a binary linked against glibc 2.38, which does not start on Debian 12 (glibc 2.36), so
its output could not be checked here and 4.x is refused. This parser reads the 3.x
collapsed-stack text (checked with austin 3.7.0 on Linux against CPython 3.10-3.13), one line
per thread per sampling instant, root frame first:

    # austin: 3.7.0                                  metadata: `# key: value`, head and tail
    P<pid>;T<iid>:<tid>;<file>:<function>:<line>;... <metric>
    P<pid>;T<iid>:<tid>;... <time>,<idle>,<memory>   with -f (full metrics)

`tid` is the OS thread id, as in py-spy's `--threads` output, so both backends give a thread
the same id. Frame files are the code objects' `co_filename`, as py-spy's `--full-filenames`
reports them, so attribution keys (function, file) match across backends. austin marks a
stack it could not unwind with an `:INVALID:` frame; those samples count as errors.

What austin cannot do, and gilprof refuses rather than approximates:
- GIL state: austin 3.x reads no GIL holder (`-g` is the garbage collector's state), so gil
  and contention modes are usage errors. wall mode samples every thread at every tick
  (state UNKNOWN); cpu mode runs with `-f` and keeps the samples austin did not mark idle
  (state ACTIVE). `-s` (sleepless) would drop idle samples too, but then a tick at which
  every thread slept leaves no line and could not be counted.
- Native frames (`austinp` needs ptrace) and pausing the target: austin never pauses it.

Ticks: austin writes one line per thread per sampling instant, in thread order, so a thread
seen again starts a new instant; counting instants this way (ticks_source "sampler") also
holds while threads start and stop inside a window. austin's interval is the pause between
samples, so it samples somewhat below the requested rate; shares are counts over counted
ticks and do not depend on it.

Thread names: austin reports ids only. The OS thread name (`/proc/PID/task/TID/comm`, 15
characters at most) is the Python thread name only where Python sets it (CPython's threading
does from 3.14; 3.10-3.13 do not, checked here); otherwise a thread carries the process name,
which is not used, and shows as "tid N". The thread whose id is the PID is the interpreter's
main thread and is named "MainThread".

Stopping: SIGINT at the window end, as for py-spy (not `-x`, which takes a whole number of
seconds and would not follow Ctrl-C); austin then finishes its output file (tail metadata
included) and exits (status 254 on 3.7, which is not an error here). Its stderr line "Python
version" marks the start of sampling. austin 3.7 reports a target it may not read (ptrace
denied) as "not a Python process", so that case is told apart by trying to open
/proc/PID/mem, which needs the same permission.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

import psutil

from gilprof.errors import SamplerError, UsageError
from gilprof.model import Frame, Mode, Sample, ThreadState
from gilprof.sampling.backends.base import (
    Backend,
    SamplerRun,
    SamplerSettings,
    WindowResult,
    run_sampler,
)
from gilprof.sampling.processes import INSTALL_HINTS, find_binary

SUPPORTED = ((3, 0, 0), (4, 0, 0))  # [min, max): the output format this module parses
INSTALL_HINT = INSTALL_HINTS["austin"]
GIL_MODE_ERROR = "austin cannot sample GIL state; use --mode wall or cpu, or --backend py-spy"
# What austin prints when the target is gone or not (yet) a Python process it can read.
_NOT_READY = ("not a python", "doesn't seem to be a python", "cannot attach", "no such process")

_VERSION = re.compile(r"austin (\d+)\.(\d+)(?:\.(\d+))?")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ERROR_RATE = re.compile(r"Error rate\s*:\s*(\d+)\s*/\s*(\d+)")
# ASCII digits in bounded runs: int() refuses superscripts that isdigit() accepts, and
# numbers of 4300+ digits.
_THREAD = re.compile(r"^T(?:(?P<iid>[0-9]{1,20}):)?(?P<tid>(?:0x)?[0-9A-Fa-f]{1,16})$")
_STARTED = "Python version"  # austin's stderr once it has found the interpreter
_INVALID_FRAME = ":INVALID:"
_GC_FRAME = ":GC:"


# -- parsing ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AustinLine:
    """One sample line: one thread at one sampling instant."""

    pid: int
    tid: int
    frames: tuple[Frame, ...]  # root first
    idle: bool | None  # None unless austin ran with -f
    invalid: bool  # austin could not unwind the whole stack


@dataclass
class AustinOutput:
    samples: list[Sample] = field(default_factory=list)  # aggregated per (thread, stack)
    ticks: int = 0  # sampling instants, counted from the line order
    lines: int = 0  # sample lines read
    invalid: int = 0  # lines austin marked :INVALID: (left out of `samples`)
    skipped: int = 0  # lines that were neither samples nor metadata (garbage, truncated)
    metadata: dict[str, str] = field(default_factory=dict)


def _is_number(text: str, max_digits: int = 18) -> bool:
    return 0 < len(text) <= max_digits and text.isascii() and text.isdigit()


def parse_frame(text: str) -> Frame:
    """`<file>:<function>:<line>`; the file may itself contain colons, the other two do not."""
    file, sep, rest = text.rpartition(":")
    if not sep:
        return Frame(text, "", 0)
    line = int(rest) if _is_number(rest, 9) else 0
    file, sep, function = file.rpartition(":")
    if not sep:
        return Frame(file, "", line)
    return Frame(function, file, line)


def _parse_tid(text: str) -> int | None:
    match = _THREAD.match(text)
    if not match:
        return None
    tid = match.group("tid")
    if tid.startswith("0x"):
        return int(tid, 16)
    return int(tid) if tid.isdigit() else int(tid, 16)  # the regex admits ASCII only


def parse_line(line: str, frame_cache: dict[str, Frame] | None = None) -> AustinLine | None:
    """One `P<pid>;T<iid>:<tid>;frames <metrics>` line; None for anything else."""
    head, sep, metrics = line.rstrip("\r\n").rpartition(" ")
    if not sep or not head.startswith("P"):
        return None
    values = metrics.split(",")
    if len(values) not in (1, 3) or not all(_is_number(v.removeprefix("-")) for v in values):
        return None
    parts = head.split(";")
    if len(parts) < 2 or not _is_number(parts[0][1:], 10):
        return None
    tid = _parse_tid(parts[1])
    if tid is None:
        return None
    frames: list[Frame] = []
    invalid = False
    for part in parts[2:]:
        if part == _INVALID_FRAME:
            invalid = True
            continue
        if part == _GC_FRAME or not part:
            continue
        frame = frame_cache.get(part) if frame_cache is not None else None
        if frame is None:
            frame = parse_frame(part)
            if frame_cache is not None:
                frame_cache[part] = frame
        frames.append(frame)
    idle = values[1] != "0" if len(values) == 3 else None
    return AustinLine(int(parts[0][1:]), tid, tuple(frames), idle, invalid)


def parse_output(
    text: str,
    state: ThreadState,
    *,
    drop_idle: bool = False,
    names: Mapping[int, str] | None = None,
) -> AustinOutput:
    """A whole austin output file -> samples aggregated per (thread, stack), and ticks.

    `drop_idle` leaves out samples austin marked idle (cpu mode; needs -f output). Samples
    without frames (a thread outside Python code) and :INVALID: ones count for ticks only.
    """
    out = AustinOutput()
    names = names or {}
    counts: dict[tuple[int, tuple[Frame, ...]], int] = {}
    cache: dict[str, Frame] = {}
    in_tick: set[tuple[int, int]] = set()
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if raw.startswith("#"):
            key, sep, value = raw[1:].strip().partition(":")
            if sep:
                out.metadata[key.strip()] = value.strip()
            continue
        parsed = parse_line(raw, cache)
        if parsed is None:
            out.skipped += 1
            continue
        out.lines += 1
        thread = (parsed.pid, parsed.tid)
        if thread in in_tick:
            out.ticks += 1
            in_tick.clear()
        in_tick.add(thread)
        if parsed.invalid:
            out.invalid += 1
            continue
        if not parsed.frames or (drop_idle and parsed.idle):
            continue
        stack = (parsed.tid, parsed.frames)
        counts[stack] = counts.get(stack, 0) + 1
    if in_tick:
        out.ticks += 1
    out.samples = [
        Sample(tid, names.get(tid, ""), frames, count, state)
        for (tid, frames), count in counts.items()
    ]
    return out


# -- the binary and the target ----------------------------------------------------------------
def read_thread_names(pid: int) -> dict[int, str]:
    """OS thread names that say something: see the module docstring."""
    task = f"/proc/{pid}/task"
    try:
        tids = [int(t) for t in os.listdir(task) if t.isdigit()]
    except OSError:
        return {}
    comms: dict[int, str] = {}
    for tid in tids:
        with (
            contextlib.suppress(OSError),
            open(f"{task}/{tid}/comm", encoding="utf-8", errors="replace") as handle,
        ):
            comms[tid] = handle.read().strip()
    process_name = comms.get(pid, "")
    names = {tid: comm for tid, comm in comms.items() if comm and comm != process_name}
    names[pid] = "MainThread"
    return names


def may_read_memory(pid: int) -> bool:
    """False only when the kernel refuses us the target's memory (the ptrace check)."""
    try:
        with open(f"/proc/{pid}/mem", "rb"):
            return True
    except PermissionError:
        return False
    except OSError:
        return True


def clean_text(text: str) -> str:
    return _ANSI.sub("", text)


def last_message(text: str) -> str:
    """austin's last paragraph on stderr as one line, without its leading emoji."""
    paragraphs = [p for p in re.split(r"\n\s*\n", clean_text(text).strip()) if p.strip()]
    if not paragraphs:
        return "no output"
    words = " ".join(paragraphs[-1].split())
    first, _, rest = words.partition(" ")
    return (rest if rest and not first.isascii() else words).rstrip(".")


# -- the backend ------------------------------------------------------------------------------
# austin counts its own ticks into WindowResult.ticks_counted; the name stays for readers.


class AustinBackend(Backend):
    name = "austin"
    min_version = SUPPORTED[0]

    def __init__(self, binary: str | None = None) -> None:
        self.binary = binary or find_binary("austin")
        self._version: str | None = None

    def version(self) -> str:
        if self._version is None:
            try:
                run = subprocess.run(
                    [self.binary, "--version"], capture_output=True, text=True, timeout=30
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise SamplerError(f"cannot run {self.binary}: {exc}; {INSTALL_HINT}") from None
            out = clean_text(run.stdout + run.stderr)
            if "GLIBC" in out:
                raise SamplerError(
                    f"{self.binary} needs a newer glibc than this system has (austin-dist 4.x "
                    f"needs glibc 2.38); {INSTALL_HINT}"
                )
            match = _VERSION.search(out)
            if run.returncode != 0 or not match:
                raise SamplerError(
                    f"{self.binary} did not report an austin version "
                    f"({out.strip()[:200]!r}); {INSTALL_HINT}"
                )
            found = tuple(int(x or 0) for x in match.groups())
            text = ".".join(map(str, found))
            if not SUPPORTED[0] <= found < SUPPORTED[1]:
                raise SamplerError(
                    f"austin {text} is not supported: gilprof reads austin "
                    f"3.x output; {INSTALL_HINT}"
                )
            self._version = text
        return self._version

    @staticmethod
    def check_settings(settings: SamplerSettings) -> None:
        """Refuse what austin cannot do, before anything is started."""
        if settings.mode not in (Mode.WALL, Mode.CPU):  # gil and contention need GIL state
            raise UsageError(GIL_MODE_ERROR)
        if settings.native:
            raise UsageError(
                "austin cannot sample native frames; drop --native or use --backend py-spy"
            )
        if settings.blocking:
            raise UsageError(
                "austin never pauses the target; drop --blocking or use --backend py-spy"
            )

    def command(self, pid: int, settings: SamplerSettings, output: str) -> list[str]:
        interval_us = max(1, round(1e6 / settings.rate_hz))
        cmd = [self.binary, "-p", str(pid), "-i", str(interval_us), "-o", output]
        if settings.mode is Mode.CPU:
            cmd.append("-f")  # idle flag per sample; see the module docstring
        return cmd

    def ticks(self, window: WindowResult, settings: SamplerSettings) -> tuple[float, str]:
        if window.ticks_counted > 0:
            return float(window.ticks_counted), "sampler"
        return window.seconds * settings.rate_hz, "estimated"

    def sample_window(
        self, pid: int, settings: SamplerSettings, seconds: float | None, stop: threading.Event
    ) -> WindowResult:
        self.check_settings(settings)
        names = read_thread_names(pid)
        with tempfile.TemporaryDirectory(prefix="gilprof-austin-") as tmp:
            output = os.path.join(tmp, "window.austin")
            # austin keeps normal priority: its accuracy at SCHED_FIFO is unmeasured.
            run = run_sampler(
                self.command(pid, settings, output),
                lambda line: _STARTED in line,
                seconds,
                stop,
                clean=lambda line: clean_text(line).strip(),
            )
            window, log = self._window(run, pid)
            # Recorded as the profile's priority (run_sampler's own reason would blame the
            # kernel, which was never asked).
            window.priority = "normal (austin is not run at real-time priority)"
            # Threads that started during the window are named from their state at its end.
            names = {**read_thread_names(pid), **names}
            self._read_output(window, output, settings, names, log)
        return window

    @staticmethod
    def _window(run: SamplerRun, pid: int) -> tuple[WindowResult, str]:
        log = run.text
        if not run.started:
            lowered = log.lower()
            if "glibc" in lowered and not run.interrupted:
                raise SamplerError(
                    f"austin does not start on this system's glibc: {last_message(log)}; "
                    + INSTALL_HINT
                )
            raise run.start_failure(
                "austin",
                last_message(log),
                denied="insufficient permissions" in lowered or not may_read_memory(pid),
                not_ready=any(phrase in lowered for phrase in _NOT_READY),
            )
        window = WindowResult(t0=run.t0, t1=run.t1, interrupted=run.interrupted)
        if run.stopped_itself:
            window.target_exited = not _alive(pid)
            if not window.target_exited:
                window.messages.append(
                    f"austin stopped early (status {run.returncode}): {last_message(log)}"
                )
        return window, log

    @staticmethod
    def _read_output(
        window: WindowResult,
        output: str,
        settings: SamplerSettings,
        names: Mapping[int, str],
        log: str,
    ) -> None:
        state = ThreadState.UNKNOWN if settings.mode is Mode.WALL else ThreadState.ACTIVE
        try:
            with open(output, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except FileNotFoundError:
            window.messages.append("austin wrote no output for this window: " + last_message(log))
            return
        parsed = parse_output(text, state, drop_idle=settings.mode is Mode.CPU, names=names)
        window.samples = parsed.samples
        window.ticks_counted = parsed.ticks
        rate = _ERROR_RATE.search(clean_text(log))
        if rate:
            window.errors = int(rate.group(1))
            window.sampler_samples = int(rate.group(2))
        else:
            window.errors = parsed.invalid
            window.sampler_samples = parsed.lines
        if parsed.skipped:
            window.messages.append(f"austin output: {parsed.skipped} unreadable lines skipped")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
