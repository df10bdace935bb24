"""Start triggers: wait until the moment worth sampling, then let the capture begin.

A serving engine spends minutes importing, loading weights and warming up before its step loop
runs; a profile taken from launch is mostly `import torch`. A trigger holds sampling back until

- `after`: some seconds have passed (`--start-after`);
- `on_output`: the launched job printed a line that matches (`--start-on`), read from its
  stdout and stderr, which are passed through to gilprof's own byte for byte;
- `on_log`: a log file got such a line (`--start-on-log FILE:REGEX`), followed from its end as
  it was when the wait began (or from its start if it did not exist yet).

With `after` and a line trigger both, sampling starts that many seconds after the line.
`wait_for_start` is the logic, written against `LineSource` so it can be tested with fakes;
`OutputPump` and `LogFollower` are the real sources.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import IO, Protocol

from gilprof.errors import (
    TargetError,
    UsageError,
    WaitInterrupted,
)
from gilprof.model import StartTrigger
from gilprof.redact import redact_line

# A line longer than this is matched on its first MAX_LINE_CHARS characters: a job printing
# binary data without newlines must not grow gilprof's memory.
MAX_LINE_CHARS = 64 * 1024
RECORDED_LINE_CHARS = 500  # what the profile keeps of the matched line
POLL_S = 0.1
_POLLS_AFTER_END = 5


class TriggerNotFired(TargetError):
    """The job or target ended, or --start-timeout passed, before the trigger fired."""


@dataclass(frozen=True)
class LogPattern:
    path: str
    regex: re.Pattern[str]


@dataclass(frozen=True)
class StartSpec:
    """When sampling should start; at least one of the three is set."""

    after_s: float | None = None
    on_output: re.Pattern[str] | None = None
    on_log: LogPattern | None = None
    timeout_s: float | None = None  # --start-timeout: give up after this long

    @property
    def regex(self) -> re.Pattern[str] | None:
        if self.on_output is not None:
            return self.on_output
        return self.on_log.regex if self.on_log is not None else None

    @property
    def kind(self) -> str:
        return "output" if self.on_output else "log" if self.on_log else "after"

    def describe(self) -> str:
        """What is awaited, as the status line and the profile say it."""
        if self.on_output is not None:
            what = f"a line of the job's output matching '{self.on_output.pattern}'"
        elif self.on_log is not None:
            what = f"a line of {self.on_log.path} matching '{self.on_log.regex.pattern}'"
        else:
            return f"a delay of {self.after_s:g} s"
        return what + (f", then {self.after_s:g} s" if self.after_s else "")


def compile_regex(text: str, option: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise UsageError(f"{option}: bad regular expression {text!r}: {exc}") from None


def parse_log_pattern(text: str, option: str = "--start-on-log") -> LogPattern:
    """FILE:REGEX, split at the first colon (a regex has colons more often than a path)."""
    path, colon, regex = text.partition(":")
    if not colon or not path or not regex:
        raise UsageError(f"{option}: expected FILE:REGEX, e.g. gen.log:'iter =', got {text!r}")
    return LogPattern(path, compile_regex(regex, option))


def start_spec(
    after: float | None = None,
    on: str | None = None,
    on_log: str | None = None,
    timeout: float | None = None,
) -> StartSpec | None:
    """The options (or a recipe's [start] table) as a StartSpec; None when none is given."""
    if on is not None and on_log is not None:
        raise UsageError("--start-on and --start-on-log are alternatives; give one")
    if after is not None and after < 0:
        raise UsageError(f"--start-after: expected seconds >= 0, got {after:g}")
    if after is None and on is None and on_log is None:
        if timeout is not None:
            raise UsageError("--start-timeout needs --start-after, --start-on or --start-on-log")
        return None
    return StartSpec(
        after_s=after,
        on_output=compile_regex(on, "--start-on") if on is not None else None,
        on_log=parse_log_pattern(on_log) if on_log is not None else None,
        timeout_s=timeout,
    )


@dataclass(frozen=True)
class Line:
    text: str
    source: str  # "stdout", "stderr", a log file's path


class LineSource(Protocol):
    """Lines as they come. `read(timeout)` returns what arrived within `timeout` seconds
    (possibly nothing); `ended` is true once no line can come any more."""

    def read(self, timeout: float) -> list[Line]: ...

    @property
    def ended(self) -> bool: ...


@dataclass(frozen=True)
class Fired:
    """A trigger that fired: when (both clocks), after how long, and on which line."""

    spec: StartSpec
    monotonic: float
    wall: float
    waited_s: float
    line: Line | None = None

    def record(self, first_window_t0: float | None = None) -> StartTrigger:
        """What the profile keeps; `first_window_t0` is the monotonic start of window 0."""
        text = None
        if self.line is not None:
            text = redact_line(self.line.text.rstrip("\r\n"))[:RECORDED_LINE_CHARS]
        return StartTrigger(
            kind=self.spec.kind,
            description=self.spec.describe(),
            fired_at=datetime.fromtimestamp(self.wall, timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            waited_s=round(self.waited_s, 3),
            line=text,
            source=self.line.source if self.line is not None else None,
            first_window_after_s=None
            if first_window_t0 is None
            else round(first_window_t0 - self.monotonic, 3),
        )


@dataclass
class Clock:
    """Time for the wait; tests give a fake one whose `pause` moves it on."""

    monotonic: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time


WaitCallback = Callable[[str, float], None]  # (what is awaited, seconds waited so far)
# None while the job (or target) runs, else how it ended: "the job exited (status 1)"
EndedCheck = Callable[[], str | None]


def wait_for_start(
    spec: StartSpec,
    source: LineSource | None,
    ended: EndedCheck,
    stop: threading.Event,
    *,
    on_wait: WaitCallback | None = None,
    clock: Clock | None = None,
    pause: Callable[[float], bool] | None = None,
) -> Fired:
    """Block until `spec` fires; raise WaitInterrupted when `stop` is set, TriggerNotFired
    when the job ends or the timeout passes first. `source` carries the lines of a line
    trigger (None for `after` alone); `pause(seconds)` sleeps, returning True when stopped."""
    clock = clock or Clock()
    pause = pause or stop.wait
    began = clock.monotonic()
    deadline = None if spec.timeout_s is None else began + spec.timeout_s
    what = spec.describe()
    regex = spec.regex

    def check(awaiting: str) -> None:
        waited = clock.monotonic() - began
        if stop.is_set():
            raise WaitInterrupted(
                f"interrupted after {waited:.1f} s waiting for {awaiting}; nothing sampled, "
                "no profile written"
            )
        if deadline is not None and clock.monotonic() >= deadline:
            raise TriggerNotFired(
                f"no start after {spec.timeout_s:g} s (--start-timeout) waiting for {awaiting}"
            )
        if on_wait is not None:
            on_wait(awaiting, waited)

    line: Line | None = None
    if regex is not None:
        assert source is not None, "a line trigger needs a line source"
        line = _first_match(regex, source, ended, check, what)
    if spec.after_s:
        fire_at = clock.monotonic() + spec.after_s
        awaiting = f"{spec.after_s:g} s after the line" if line else what
        while clock.monotonic() < fire_at:
            check(awaiting)
            end = ended()
            if end is not None:
                raise TriggerNotFired(f"{end} before the start ({awaiting}) was reached")
            if pause(min(POLL_S, max(0.0, fire_at - clock.monotonic()))):
                check(awaiting)
    now = clock.monotonic()
    return Fired(spec, now, clock.wall(), now - began, line)


def _first_match(
    regex: re.Pattern[str],
    source: LineSource,
    ended: EndedCheck,
    check: Callable[[str], None],
    what: str,
) -> Line:
    quiet_after_end = closed_polls = 0
    while True:
        check(what)
        end = ended()
        lines = source.read(POLL_S)
        for line in lines:
            if regex.search(line.text[:MAX_LINE_CHARS]):
                return line
        # A job that just ended may still have lines in its pipes: read until they close,
        # or until a few polls bring nothing (a grandchild may hold them open).
        quiet_after_end = quiet_after_end + 1 if end is not None and not lines else 0
        if end is not None and (source.ended or quiet_after_end >= _POLLS_AFTER_END):
            raise TriggerNotFired(f"{end} before {_matched(what)}")
        # Output closed and the job still runs: it may be exiting (pipes close just before
        # its status is known), or it redirected its output, and then no line can come.
        closed_polls = closed_polls + 1 if source.ended and end is None else 0
        if closed_polls >= _POLLS_AFTER_END * 2:
            raise TriggerNotFired(f"the job closed its output before {_matched(what)}")


def _matched(what: str) -> str:
    """'a line of X matching R' -> 'its output matched R' or 'a line of X matched R'."""
    found = re.match(r"a line of (.*) matching (.*?)(, then .*)?$", what)
    if not found:
        return what
    if found.group(1) == "the job's output":
        return f"its output matched {found.group(2)}"
    return f"a line of {found.group(1)} matched {found.group(2)}"


# ---------------------------------------------------------------------------------------------
# Real line sources


class _LineQueue:
    """Lines from reader threads, while someone still wants them."""

    def __init__(self) -> None:
        self.lines: queue.Queue[Line] = queue.Queue()
        self.wanted = True
        self.open_streams = 0
        self.lock = threading.Lock()

    def read(self, timeout: float) -> list[Line]:
        out: list[Line] = []
        try:
            out.append(self.lines.get(timeout=timeout) if timeout > 0 else self.lines.get_nowait())
            while True:
                out.append(self.lines.get_nowait())
        except queue.Empty:
            pass
        return out


class OutputPump:
    """Passes a launched job's stdout and stderr through to gilprof's, byte for byte, and
    hands its lines to a waiting trigger until `stop_matching()`.

    One thread per stream. `before_write`, if given, runs before each chunk is written (the
    CLI clears its status line there, so the job's bytes are never mixed into it).
    """

    def __init__(
        self,
        streams: Sequence[tuple[IO[bytes], int, str]],
        before_write: Callable[[], None] | None = None,
    ) -> None:
        self._queue = _LineQueue()
        self._before_write = before_write
        self._threads = [
            threading.Thread(
                target=self._pump, args=(stream, fd, name), name=f"gilprof-{name}", daemon=True
            )
            for stream, fd, name in streams
        ]
        self._queue.open_streams = len(self._threads)
        for thread in self._threads:
            thread.start()

    def read(self, timeout: float) -> list[Line]:
        return self._queue.read(timeout)

    @property
    def ended(self) -> bool:
        with self._queue.lock:
            return self._queue.open_streams == 0 and self._queue.lines.empty()

    def stop_matching(self) -> None:
        """The trigger fired: pass the output through, split no more lines."""
        self._queue.wanted = False
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.lines.get_nowait()

    def join(self, timeout: float) -> None:
        """Wait for the job's output to end (the job and whatever inherited its pipes)."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _pump(self, stream: IO[bytes], fd: int, name: str) -> None:
        pending = b""
        writable = True
        try:
            while True:
                try:
                    chunk = os.read(stream.fileno(), 65536)
                except OSError:
                    break
                if not chunk:
                    break
                if writable:
                    writable = self._write(fd, chunk)
                if self._queue.wanted:
                    pending = self._split(pending + chunk, name)
            if pending and self._queue.wanted:
                self._queue.lines.put(Line(pending.decode(errors="replace"), name))
        finally:
            with contextlib.suppress(OSError):
                stream.close()
            with self._queue.lock:
                self._queue.open_streams -= 1

    def _write(self, fd: int, chunk: bytes) -> bool:
        if self._before_write is not None:
            self._before_write()
        view = memoryview(chunk)
        try:
            while view:
                written = os.write(fd, view)
                view = view[written:]
        except OSError:  # gilprof's own output closed: keep draining the job's
            return False
        return True

    def _split(self, data: bytes, name: str) -> bytes:
        *complete, rest = data.split(b"\n")
        for raw in complete:
            self._queue.lines.put(Line(raw[:MAX_LINE_CHARS].decode(errors="replace"), name))
        return rest[-MAX_LINE_CHARS:] if len(rest) > MAX_LINE_CHARS else rest


class LogFollower:
    """New lines of a log file, as `tail -F` shows them: from the end the file had when
    following began; a file that did not exist yet, or was replaced or truncated since, is
    read from its start."""

    def __init__(self, path: str, sleep: Callable[[float], object] = time.sleep) -> None:
        self.path = path
        self._sleep = sleep
        self._handle: IO[bytes] | None = None
        self._inode: tuple[int, int] | None = None
        self._pending = b""
        try:
            info = os.stat(path)
        except OSError:
            self._start_at = 0
        else:
            self._start_at = info.st_size
            self._open(self._start_at)

    @property
    def ended(self) -> bool:
        return False  # a log can always grow

    def read(self, timeout: float) -> list[Line]:
        lines = self._read_new()
        if not lines and timeout > 0:
            self._sleep(timeout)
            lines = self._read_new()
        return lines

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def _open(self, offset: int) -> None:
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - kept open while following
        except OSError:
            return
        info = os.fstat(handle.fileno())
        self.close()
        self._handle, self._inode, self._pending = handle, (info.st_dev, info.st_ino), b""
        handle.seek(min(offset, info.st_size))

    def _replaced(self) -> bool:
        try:
            info = os.stat(self.path)
        except OSError:
            return False
        if (info.st_dev, info.st_ino) != self._inode:
            return True
        assert self._handle is not None
        return info.st_size < self._handle.tell()  # truncated in place

    def _read_new(self) -> list[Line]:
        if self._handle is None or self._replaced():
            self._open(0)
        if self._handle is None:
            return []
        data = self._handle.read(1 << 20)
        if not data:
            return []
        *complete, rest = (self._pending + data).split(b"\n")
        self._pending = rest[-MAX_LINE_CHARS:]
        return [Line(raw[:MAX_LINE_CHARS].decode(errors="replace"), self.path) for raw in complete]
