"""py-spy backend: one `py-spy record -f raw --threads` run per sampling window.

py-spy's raw format gives exact counts per (thread, stack) but no time; its chrometrace
format has timestamps only where a thread's stack changes, and in --gil mode a thread's span
runs on across ticks where another thread held the GIL, so it cannot give per-tick shares.
Windows give both: exact counts, and a start and end for each stretch of sampling.

py-spy's "Samples: N" counts recorded traces, not sampling instants, so ticks are estimated
as window seconds x rate. py-spy spaces its samples with exponential intervals of mean
1/rate (a Poisson process), so count / (seconds x rate) is an unbiased estimate of the share
of time; see README "Definitions".
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

from gilprof.errors import PermissionDenied, SamplerError
from gilprof.model import Frame, Mode, Sample, ThreadState
from gilprof.sampling.backends.base import (
    Backend,
    NotReady,
    SamplerSettings,
    WindowResult,
    run_window,
    sampler_process,
)
from gilprof.sampling.processes import find_binary

# Digit runs are bounded so that int() never meets a number it refuses (4300+ digits).
_THREAD_PREFIX = re.compile(
    r"^thread \((?P<tid>0x[0-9A-Fa-f]{1,16}|[0-9]{1,20})\)(?::\s?(?P<name>[^;]*))?$")
_VERSION = re.compile(r"py-spy (\d+)\.(\d+)\.(\d+)")
_SUMMARY = re.compile(r"Samples: (\d+) Errors: (\d+)")

PERMISSION_HINT = (
    "py-spy may not read the target's memory (ptrace is not permitted). Fix one of: run gilprof as "
    "the target's user or as root; in a container add the SYS_PTRACE capability "
    "(docker run --cap-add SYS_PTRACE); lower kernel.yama.ptrace_scope to 0 "
    "(sysctl kernel.yama.ptrace_scope=0); or start the job under `gilprof exec`, which samples "
    "its own child"
)


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
    inside = part[opening + 2:-1]
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

    def version(self) -> str:
        if self._version is None:
            try:
                out = subprocess.run([self.binary, "--version"], capture_output=True, text=True,
                                     timeout=30).stdout
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise SamplerError(f"cannot run {self.binary}: {exc}") from None
            match = _VERSION.search(out)
            if not match:
                raise SamplerError(f"{self.binary} did not report a py-spy version: {out.strip()!r}")
            found = tuple(int(x) for x in match.groups())
            if found < self.min_version:
                need = ".".join(map(str, self.min_version))
                raise SamplerError(f"py-spy {match.group(0)[7:]} is too old; gilprof needs >= {need}")
            self._version = ".".join(map(str, found))
        return self._version

    def command(self, pid: int, settings: SamplerSettings, output: str) -> list[str]:
        rate = str(round(settings.rate_hz))
        if settings.mode is Mode.CONTENTION:
            # Every thread at every tick, with native frames (py-spy then pauses the target).
            return [self.binary, "record", "--pid", str(pid), "--rate", rate, "--format",
                    "speedscope", "--output", output, "--full-filenames", "--native", "--idle"]
        cmd = [self.binary, "record", "--pid", str(pid), "--rate", rate,
               "--format", "raw", "--output", output, "--threads", "--full-filenames"]
        if settings.mode is Mode.GIL:
            cmd.append("--gil")
        elif settings.mode is Mode.WALL:
            cmd.append("--idle")
        if settings.native:
            cmd.append("--native")  # py-spy refuses --native with --nonblocking
        elif not settings.blocking:
            cmd.append("--nonblocking")
        return cmd

    def ticks(self, window: WindowResult, settings: SamplerSettings) -> tuple[float, str]:
        if settings.mode is Mode.CONTENTION and window.ticks_counted:
            return float(window.ticks_counted), "sampler"  # every thread at every tick
        if settings.mode is Mode.WALL and window.samples:
            # In wall mode every live thread is recorded at every tick, so the busiest
            # thread's count is the number of ticks.
            per_thread: dict[int, int] = {}
            for s in window.samples:
                per_thread[s.tid] = per_thread.get(s.tid, 0) + s.count
            return float(max(per_thread.values())), "sampler"
        return window.seconds * settings.rate_hz, "estimated"

    def sample_window(self, pid: int, settings: SamplerSettings, seconds: float | None,
                      stop: threading.Event) -> WindowResult:
        state = {Mode.GIL: ThreadState.HELD, Mode.WALL: ThreadState.UNKNOWN,
                 Mode.CPU: ThreadState.ACTIVE}.get(settings.mode, ThreadState.UNCLASSIFIED)
        with tempfile.TemporaryDirectory(prefix="gilprof-") as tmp:
            output = os.path.join(tmp, "window.txt")
            with sampler_process(self.command(pid, settings, output)) as proc:
                result = self._drive(proc, output, state, seconds, stop)
                if settings.mode is Mode.CONTENTION:
                    self._read_spans(output, result)
                return result

    def _drive(self, proc: subprocess.Popen[bytes], output: str, state: ThreadState,
               seconds: float | None, stop: threading.Event) -> WindowResult:
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
                    text = raw.decode("utf-8", "replace").strip()
                    if not text:
                        continue
                    if "Sampling process" in text and not started.is_set():
                        start_time[0] = time.monotonic()
                        started.set()
                    lines.append(text)
            if buffer.strip():
                lines.append(buffer.decode("utf-8", "replace").strip())

        reader = threading.Thread(target=pump, name="gilprof-pyspy-reader", daemon=True)
        reader.start()
        end_time, interrupted = run_window(proc, started, start_time, seconds, stop)
        if end_time is None:
            end_time = time.monotonic()
        reader.join(timeout=5)
        text_out = "\n".join(lines)
        if not started.is_set():
            self._raise_for_start_failure(text_out, interrupted)
        result = WindowResult(t0=start_time[0], t1=end_time, interrupted=interrupted)
        result.target_exited = "process exited" in text_out or "process ended" in text_out
        summary = _SUMMARY.search(text_out)
        if summary:
            result.sampler_samples = int(summary.group(1))
            result.errors = int(summary.group(2))
        if state is ThreadState.UNCLASSIFIED:
            return result  # contention mode: the caller reads the trace
        try:
            with open(output, encoding="utf-8", errors="replace") as handle:
                result.samples = list(parse_raw(handle.read(), state))
        except FileNotFoundError:
            result.messages.append("py-spy wrote no output for this window: " + _last_error(text_out))
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

    @staticmethod
    def _raise_for_start_failure(text: str, interrupted: bool) -> None:
        if interrupted:
            raise NotReady("interrupted before sampling started")
        lowered = text.lower()
        if "permission denied" in lowered or "operation not permitted" in lowered:
            raise PermissionDenied(PERMISSION_HINT)
        if "failed to find python version" in lowered or "failed to get process" in lowered \
                or "no such file" in lowered or "no such process" in lowered:
            raise NotReady(_last_error(text))
        raise SamplerError("py-spy failed: " + _last_error(text))


def _last_error(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("Error:"):
            return line[len("Error:"):].strip()
    meaningful = [ln for ln in text.splitlines() if ln and not ln.lstrip()[:1].isdigit()]
    return meaningful[-1] if meaningful else "no output"
