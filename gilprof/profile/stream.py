"""gilprof.profile/2: a profile as a stream of gzip members, appended while sampling.

The file is a sequence of gzip members (`zcat FILE` prints one JSON object per line):

    header   {"schema": "gilprof.profile/2", "target": {...}, "sampling": {...}}
    window   {"window": i, "t0", "t1", "ticks",
              "new": {"threads": [[tid, name]], "frames": [[name, file, line]],
                      "stacks": [[tid, state, base, keep, [frame, ...]]]},
              "counts": {"stack": [first, +delta, ...], "n": [count, ...]},
              "runs": [[tid, [stack], [gap_us], [len_us]], ...]}       (contention mode)
    footer   {"end": {"windows": N, "stacks": K, "sampling": {...}}}

Each window record carries only what is new since the record before it. Frames and stacks
are numbered in the order they first appear. A stack is a thread, a state and its frames
(root first): the first `keep` frames of the earlier stack `base` (-1 for none), then the
frame indexes listed, so a call path shared by many stacks is stored once. Counts are
parallel arrays, stack indexes ascending and delta-encoded. `runs` are the contention-mode
per-tick states, run-length encoded per thread: stack index, microseconds since the end of
the thread's run before (the window's start for the first), and the run's length in
microseconds. Integers are JSON integers; a state is held, waiting, native, idle, active,
unknown or unclassified.

Every record is its own gzip member, written with one write() and flushed: a SIGKILL loses
at most the record in flight, and a file without a footer reads as a partial profile. Several
profiles one after another (header .. footer, header .. footer) are a bundle.
"""

from __future__ import annotations

import gzip
import json
import os
from array import array
from itertools import pairwise
from typing import Any

from gilprof.errors import UsageError
from gilprof.profile.files import atomic_file, write_reason
from gilprof.profile.profile import SCHEMA, Profile, Stack, Window

GZIP_MAGIC = b"\x1f\x8b"
COMPRESS_LEVEL = 6
_FRAME_SPAN = 1 << 32  # frame indexes stay below this; trie keys pack (node, frame) in one int


class StreamWriteError(UsageError):
    """The profile's file could not be written (disk full, folder gone): `PATH: cannot write:
    REASON`, as every output gilprof cannot write (gilprof.profile.files)."""

    @classmethod
    def of(cls, path: str, exc: OSError) -> StreamWriteError:
        return cls(f"{path}: cannot write: {write_reason(path, exc)}")


class StreamWriter:
    """Appends one or more profiles to a gilprof.profile/2 file, a record per window.

    Memory is what the writer must remember to write only what is new: a count of frames
    and stacks written, the call-tree nodes, and the thread names.
    """

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path
        self.broken: str | None = None
        self.windows_written = 0

    @classmethod
    def create(cls, path: str | os.PathLike[str]) -> StreamWriter:
        """Create (or truncate) the file now, so that a capture killed later leaves it behind."""
        name = os.fspath(path)
        try:
            fd = os.open(
                name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o666
            )
        except OSError as exc:
            raise StreamWriteError.of(name, exc) from None
        return cls(fd, name)

    # -- one profile ------------------------------------------------------------------------
    def start(self, profile: Profile) -> None:
        self._frames = 0
        self._stacks = 0
        self._windows = 0
        self._names: dict[int, str] = {}
        self._trie: dict[int, int] = {}  # node * _FRAME_SPAN + frame -> child node
        self._owner = array("q")  # node -> a stack whose frames pass through it
        self._emit(
            {
                "schema": SCHEMA,
                "target": profile.target.to_dict(),
                "sampling": profile.sampling.to_dict(),
            }
        )

    def window(self, profile: Profile, window: Window) -> None:
        new: dict[str, Any] = {}
        threads = [
            [tid, name] for tid, name in profile.threads.items() if self._names.get(tid) != name
        ]
        if threads:
            new["threads"] = threads
            self._names.update(profile.threads)
        if len(profile.frames) > self._frames:
            new["frames"] = [[f.name, f.file, f.line] for f in profile.frames[self._frames :]]
            self._frames = len(profile.frames)
        if len(profile.stacks) > self._stacks:
            new["stacks"] = [
                self._stack_entry(index, stack)
                for index, stack in enumerate(profile.stacks[self._stacks :], start=self._stacks)
            ]
            self._stacks = len(profile.stacks)
        pairs = sorted(window.counts.items())
        indexes = [i for i, _ in pairs]
        record: dict[str, Any] = {
            "window": self._windows,
            "t0": round(window.t0, 6),
            "t1": round(window.t1, 6),
            "ticks": window.ticks,
            "new": new,
            "counts": {
                "stack": indexes[:1] + [b - a for a, b in pairwise(indexes)],
                "n": [c for _, c in pairs],
            },
        }
        if window.spans:
            record["runs"] = _encode_runs(window.t0, window.spans)
        self._emit(record)
        self._windows += 1
        self.windows_written += 1

    def _stack_entry(self, index: int, stack: Stack) -> list[Any]:
        """[tid, state, base, keep, [frames]]: the first `keep` frames of stack `base` (-1:
        none), then `frames`. The base is a stack written earlier that shares the longest
        prefix, found in a call tree of every prefix written so far (an int-keyed dict)."""
        frames = stack.frames
        node, depth = -1, 0
        trie = self._trie
        while depth < len(frames):
            found = trie.get(node * _FRAME_SPAN + frames[depth])
            if found is None:
                break
            node, depth = found, depth + 1
        base = -1 if node < 0 else self._owner[node]
        for frame in frames[depth:]:
            child = len(self._owner)
            trie[node * _FRAME_SPAN + frame] = child
            self._owner.append(index)
            node = child
        return [stack.tid, str(stack.state), base, depth, list(frames[depth:])]

    def finish(self, profile: Profile) -> None:
        self._emit(
            {
                "end": {
                    "windows": self._windows,
                    "stacks": self._stacks,
                    "sampling": profile.sampling.to_dict(),
                }
            }
        )

    def write_profile(self, profile: Profile) -> None:
        self.start(profile)
        for window in profile.windows:
            self.window(profile, window)
        self.finish(profile)

    # -- the file ---------------------------------------------------------------------------
    def _emit(self, record: dict[str, Any]) -> None:
        if self.broken is not None:
            raise StreamWriteError(self.broken)
        text = json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
        data = memoryview(gzip.compress(text.encode("utf-8"), COMPRESS_LEVEL, mtime=0))
        try:
            while data:  # one member, whole: write() may stop short only on a full disk
                data = data[os.write(self.fd, data) :]
        except OSError as exc:
            error = StreamWriteError.of(self.path, exc)
            self.broken = str(error)
            raise error from None

    def sync(self) -> None:
        try:
            os.fsync(self.fd)
        except OSError as exc:
            raise StreamWriteError.of(self.path, exc) from None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _encode_runs(t0: float, spans: Any) -> list[Any]:
    by_thread: dict[int, list[tuple[int, int, int]]] = {}
    for tid, stack, a, b in spans:
        by_thread.setdefault(tid, []).append((round(a * 1e6), round(b * 1e6), stack))
    out = []
    origin = round(t0 * 1e6)
    for tid, runs in by_thread.items():
        runs.sort()
        gaps, lengths = [], []
        end = origin
        for a, b, _ in runs:
            gaps.append(a - end)
            lengths.append(b - a)
            end = b
        out.append([tid, [s for _, _, s in runs], gaps, lengths])
    return out


def save_streams(path: str | os.PathLike[str], profiles: list[Profile]) -> None:
    """Complete profiles (one, or a bundle of several) written at once, atomically."""
    with atomic_file(path) as fd:  # owns the descriptor: the writer is not closed here
        writer = StreamWriter(fd, os.fspath(path))
        for profile in profiles:
            writer.write_profile(profile)


def is_stream(path: str | os.PathLike[str]) -> bool:
    """Whether the file starts like gzip (anything else is left to the JSON reader's errors)."""
    if not os.path.isfile(path):  # a FIFO would block; the JSON reader explains what it is
        return False
    try:
        with open(path, "rb") as handle:
            return handle.read(2) == GZIP_MAGIC
    except OSError:
        return False


def read_streams(path: str | os.PathLike[str]) -> list[Profile]:
    """Every profile in a gilprof.profile/2 file (one, or several: a bundle)."""
    from gilprof.profile.stream_reader import StreamReader

    return StreamReader(os.fspath(path)).read()


__all__ = ["StreamWriteError", "StreamWriter", "is_stream", "read_streams", "save_streams"]
