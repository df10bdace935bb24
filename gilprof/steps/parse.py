"""TensorRT-LLM iteration logs (and JSON lines) -> StepRecords, streamed.

A log is read line by line; lines that are not iteration lines are counted and skipped,
never fatal, because real logs interleave them with everything else the job prints.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from gilprof.errors import InputError

# /2: the per-rank "verdict" (host-bound / device-bound) became "reading", what the ratio of
# the medians alone shows, since a log cannot tell a host-paced from a device-paced loop.
SCHEMA = "gilprof.steps/2"
DEVICE_NEAR_HOST = "device~host"  # p50 device / host >= the near ratio: the log cannot tell
DEVICE_BELOW_HOST = "device<host"  # the device was timed busy for less than the host step
UNKNOWN = "unknown"  # no device step times
# Longer lines are skipped whole: an iteration line is well under 4 KiB, and a bound keeps
# memory flat on binary input without newlines.
MAX_LINE_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class StepRecord:
    rank: int
    iteration: int
    host_step_ms: float
    device_step_ms: float | None
    num_scheduled_requests: int | None
    timestamp: str | None


# `iter = N` starts the key/value part; the lookbehind keeps `max_iter` from matching.
_ITER_RE = re.compile(r"(?<![\w.])iter\s*=\s*(\d{1,18})(?!\d)")
# The states dict holds nested braces and quoted commas: key lookups stop before it.
_STATES_RE = re.compile(r",\s*states\s*[=:]")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_VALUE_END = r"(?=\s*(?:,|$))"
# Bounded so that int() never meets a number too long to convert (a garbage line).
_INTEGER = r"(\d{1,18})"


def _key_re(key: str, value: str) -> re.Pattern[str]:
    """`key = value` or `key: value` where the value runs to the next comma.

    The key comes first so that the regex engine can skip ahead by its literal prefix;
    `_search_key` rejects matches inside longer names (`rank` in `global_rank`).
    """
    return re.compile(rf"{key}\s*[=:]\s*{value}{_VALUE_END}")


def _search_key(pattern: re.Pattern[str], line: str, start: int, end: int) -> re.Match[str] | None:
    while True:
        match = pattern.search(line, start, end)
        if match is None:
            return None
        before = line[match.start() - 1] if match.start() > 0 else " "
        if not (before.isalnum() or before in "_."):
            return match
        start = match.start() + 1


_HOST_RE = _key_re("host_step_time", rf"({_NUMBER})\s*(?:ms)?")
_DEVICE_RE = _key_re("prev_device_step_time", rf"({_NUMBER})\s*(?:ms)?")
_GLOBAL_RANK_RE = _key_re("global_rank", _INTEGER)
_RANK_RE = _key_re("rank", _INTEGER)
_SCHEDULED_RE = _key_re("num_scheduled_requests", _INTEGER)
_TIMESTAMP_RE = _key_re("timestamp", r"([^,]*?)")
_MS_RE = re.compile(rf"({_NUMBER})\s*(?:ms)?")
_INT_RE = re.compile(r"[-+]?\d{1,18}")
_RANK_PREFIX_RE = re.compile(r"\[RANK\s+(\d{1,9})\]")
_MPIRUN_PREFIX_RE = re.compile(r"\[\d+,(\d{1,9})\]<std(?:out|err)>")
_SRUN_LABEL_RE = re.compile(r"^\s*(\d{1,9}): ")


# Beyond this a "step time" is garbage (1e12 ms is 30 years); the bound also keeps sums
# and means of many step times inside the float range.
MAX_STEP_MS = 1e12


def _plausible(value: float) -> float | None:
    return value if math.isfinite(value) and abs(value) <= MAX_STEP_MS else None


def _finite(text: str) -> float | None:
    return _plausible(float(text))


def _parse_ms(text: str | None) -> float | None:
    """`12.5ms`, `12.5`, `1e2 ms` -> float; `N/A`, garbage, inf and nan -> None."""
    if text is None:
        return None
    match = _MS_RE.fullmatch(text.strip())
    if match is None:
        return None
    return _plausible(float(match.group(1)))


def _parse_int(text: str | None) -> int | None:
    if text is None:
        return None
    stripped = text.strip()
    return int(stripped) if _INT_RE.fullmatch(stripped) else None


def _rank_from_prefix(prefix: str) -> int | None:
    for pattern in (_RANK_PREFIX_RE, _MPIRUN_PREFIX_RE, _SRUN_LABEL_RE):
        match = pattern.search(prefix)
        if match:
            return int(match.group(1))
    return None


def _json_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range
            return None
        return _plausible(number)
    if isinstance(value, str):
        return _parse_ms(value)
    return None


def _json_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return _parse_int(value)
    return None


def _first_present(obj: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in obj and obj[key] is not None:
            return obj[key]
    return None


class StepParser:
    """Turns lines into StepRecords and counts what it could not use.

    One parser can read several files in turn; its counters then cover all of them.
    """

    def __init__(self) -> None:
        self.lines_read = 0
        self.skipped_lines = 0
        self.records = 0
        self._next_iteration: dict[int, int] = {}

    def parse(self, lines: Iterable[str]) -> Iterator[StepRecord]:
        for line in lines:
            record = self.parse_line(line)
            if record is not None:
                yield record

    def parse_line(self, line: str) -> StepRecord | None:
        self.lines_read += 1
        record = self._parse(line)
        if record is None:
            if line.strip():
                self.skipped_lines += 1
            return None
        self.records += 1
        self._next_iteration[record.rank] = record.iteration + 1
        return record

    def parse_binary(self, stream: IO[bytes]) -> Iterator[StepRecord]:
        """Reads bytes line by line; undecodable bytes become U+FFFD, overlong lines are skipped."""
        in_overlong_line = False
        while True:
            raw = stream.readline(MAX_LINE_BYTES)
            if not raw:
                return
            complete = raw.endswith(b"\n")
            if in_overlong_line or (not complete and len(raw) == MAX_LINE_BYTES):
                if not in_overlong_line:
                    self.lines_read += 1
                    self.skipped_lines += 1
                in_overlong_line = not complete
                continue
            record = self.parse_line(raw.decode("utf-8", errors="replace"))
            if record is not None:
                yield record

    def _parse(self, line: str) -> StepRecord | None:
        if "iter" in line:
            match = _ITER_RE.search(line)
            brace = line.find("{")
            if match and (brace < 0 or match.start() < brace):
                return self._parse_key_values(line, match)
        if "{" in line:
            return self._parse_json(line)
        return None

    def _parse_key_values(self, line: str, iter_match: re.Match[str]) -> StepRecord | None:
        # Searching between `iter` and `states` (pos/endpos) avoids copying the line.
        start = iter_match.start()
        states = _STATES_RE.search(line, start)
        end = states.start() if states else len(line)
        host_match = _search_key(_HOST_RE, line, start, end)
        if host_match is None:
            return None
        host = _finite(host_match.group(1))
        if host is None:
            return None
        device_match = _search_key(_DEVICE_RE, line, start, end)
        rank_match = _search_key(_GLOBAL_RANK_RE, line, start, end) or _search_key(
            _RANK_RE, line, start, end
        )
        rank = int(rank_match.group(1)) if rank_match else _rank_from_prefix(line[:start])
        scheduled_match = _search_key(_SCHEDULED_RE, line, start, end)
        timestamp_match = _search_key(_TIMESTAMP_RE, line, start, end)
        return StepRecord(
            rank=rank if rank is not None else 0,
            iteration=int(iter_match.group(1)),
            host_step_ms=host,
            device_step_ms=_finite(device_match.group(1)) if device_match else None,
            num_scheduled_requests=int(scheduled_match.group(1)) if scheduled_match else None,
            timestamp=(timestamp_match.group(1).strip() or None) if timestamp_match else None,
        )

    def _parse_json(self, line: str) -> StepRecord | None:
        start = line.find("{")
        text = line[start:].strip()
        if not text.endswith("}"):
            return None
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: arrays nested thousands deep
            return None
        if not isinstance(obj, dict):
            return None
        host = _json_number(_first_present(obj, ("host_step_ms", "host_step_time")))
        if host is None:
            return None
        device = _json_number(
            _first_present(obj, ("device_step_ms", "device_step_time", "prev_device_step_time"))
        )
        rank = _json_int(_first_present(obj, ("global_rank", "rank")))
        if rank is None:
            rank = _rank_from_prefix(line[:start])
        if rank is None:
            rank = 0
        iteration = _json_int(_first_present(obj, ("iter", "iteration")))
        if iteration is None:
            iteration = self._next_iteration.get(rank, 0)
        timestamp = obj.get("timestamp")
        return StepRecord(
            rank=rank,
            iteration=iteration,
            host_step_ms=host,
            device_step_ms=device,
            num_scheduled_requests=_json_int(obj.get("num_scheduled_requests")),
            timestamp=None if timestamp is None else str(timestamp),
        )


def parse_lines(lines: Iterable[str]) -> Iterator[StepRecord]:
    """Records from text lines; lines that are not iteration lines are dropped."""
    return StepParser().parse(lines)


def _open_log(path: str) -> IO[bytes]:
    if path == "-":
        return sys.stdin.buffer
    try:
        # O_NONBLOCK so that a FIFO without a writer cannot hang the open; cleared at once so
        # reads from a live pipe (process substitution) still block for data as usual.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a log file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _check_log_path(path: str) -> None:
    # stat, not open: opening a pipe such as <(grep ...) twice could lose its data.
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{path}: is a directory, not a log file")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: permission denied")


class StepStream:
    """Iterable of StepRecords from one or more log files ("-" is stdin), read lazily.

    Every path is checked when the stream is created, so a typo fails before a long read.
    After iteration, `skipped_lines` and `lines_read` cover all files.
    """

    def __init__(self, paths: Iterable[str | Path], parser: StepParser | None = None) -> None:
        self.paths = [str(path) for path in paths]
        for path in self.paths:
            if path != "-":
                _check_log_path(path)
        self.parser = parser if parser is not None else StepParser()

    @property
    def skipped_lines(self) -> int:
        return self.parser.skipped_lines

    @property
    def lines_read(self) -> int:
        return self.parser.lines_read

    def __iter__(self) -> Iterator[StepRecord]:
        for path in self.paths:
            stream = _open_log(path)
            try:
                yield from self.parser.parse_binary(stream)
            except OSError as exc:
                raise InputError(f"{path}: read failed ({exc.strerror or exc})") from None
            finally:
                if stream is not sys.stdin.buffer:
                    stream.close()


def read_step_log(path: str | Path, parser: StepParser | None = None) -> StepStream:
    """Stream one log; raises InputError at once if it is missing, a directory or unreadable."""
    return StepStream([path], parser)


def read_step_logs(paths: Iterable[str | Path], parser: StepParser | None = None) -> StepStream:
    """Stream several logs as one sequence of records (e.g. one file per rank)."""
    return StepStream(paths, parser)
