"""The profile object: raw stack counts per sampling window, with target and sampling metadata.

A profile keeps what the sampler saw (interned frames and stacks, and per-window counts) and
nothing derived, so `report`, `compare` and `gate` recompute attribution from the same file.
Memory is bounded by distinct stacks x windows, never by the number of samples: a loaded
window keeps its counts as two arrays (Counts) and its contention runs as arrays per thread
(Runs), a few bytes per entry.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import ItemsView, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gilprof.model import Frame, Mode, Sample, SamplingInfo, Target, ThreadState
from gilprof.profile.files import read_json_file, write_json_atomic

SCHEMA_V1 = "gilprof.profile/1"  # one JSON document, written when sampling ends
SCHEMA = "gilprof.profile/2"  # a gzip stream of JSON records, appended per window
SCHEMA_NAME, _, _version = SCHEMA.rpartition("/")
SCHEMA_VERSION = int(_version)


class Counts(Mapping[int, int]):
    """Stack index -> samples of one loaded window, kept as two parallel arrays.

    A dict costs ~100 bytes per entry; these cost 8 (4-byte ints, as the stream reader makes
    them when the values fit) or 16. Lookups by key build a dict on first use (the analyses
    only iterate).
    """

    __slots__ = ("_index", "_keys", "_values")

    def __init__(self, keys: array[int], values: array[int]) -> None:
        self._keys = keys
        self._values = values
        self._index: dict[int, int] | None = None

    def __getitem__(self, key: int) -> int:
        if self._index is None:
            self._index = dict(zip(self._keys, self._values, strict=True))
        return self._index[key]

    def __iter__(self) -> Iterator[int]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def items(self) -> ItemsView[int, int]:
        return _PairedItems(self)

    def values(self) -> array[int]:  # type: ignore[override]
        return self._values

    def __repr__(self) -> str:
        return f"Counts({dict(self.items())!r})"


class _PairedItems(ItemsView[int, int]):
    _mapping: Counts

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self._mapping._keys, self._mapping._values, strict=True)


class Runs:
    """Contention-mode states of one loaded window: per thread, runs of one stack.

    Iterates as (tid, stack index, t0, t1) spans like Window.spans, with times in seconds;
    kept as arrays of stack indexes and microsecond bounds, the thread id once per thread.
    """

    __slots__ = ("threads",)

    def __init__(self) -> None:
        self.threads: list[tuple[int, array[int], array[int], array[int]]] = []

    def add(self, tid: int, stacks: array[int], starts_us: array[int], ends_us: array[int]) -> None:
        self.threads.append((tid, stacks, starts_us, ends_us))

    def __iter__(self) -> Iterator[tuple[int, int, float, float]]:
        for tid, stacks, starts, ends in self.threads:
            for stack, a, b in zip(stacks, starts, ends, strict=True):
                yield tid, stack, a / 1e6, b / 1e6

    def __len__(self) -> int:
        return sum(len(stacks) for _, stacks, _, _ in self.threads)

    def __bool__(self) -> bool:
        return any(len(stacks) for _, stacks, _, _ in self.threads)


@dataclass(frozen=True, slots=True)
class Stack:
    tid: int
    state: ThreadState
    frames: tuple[int, ...]  # indices into Profile.frames, root first


@dataclass
class Window:
    """One contiguous stretch of sampling: [t0, t1) seconds since the profile started."""

    t0: float
    t1: float
    ticks: float
    # stack index -> samples: a dict while sampling, Counts once loaded
    counts: Mapping[int, int] = field(default_factory=dict)
    # contention mode: (tid, stack index, t0, t1) runs of one stack, all threads on one clock;
    # a list while sampling, Runs once loaded
    spans: list[tuple[int, int, float, float]] | Runs = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return max(0.0, self.t1 - self.t0)


def _intern(items: list[Any], index: dict[Any, int], item: Any) -> int:
    """The position of `item` in `items`, appended (and indexed) if new."""
    position = index.get(item)
    if position is None:
        position = index[item] = len(items)
        items.append(item)
    return position


class Profile:
    def __init__(self, target: Target, sampling: SamplingInfo) -> None:
        self.target = target
        self.sampling = sampling
        self.frames: list[Frame] = []
        self.stacks: list[Stack] = []
        self.threads: dict[int, str] = {}
        self.windows: list[Window] = []
        self._frame_index: dict[Frame, int] = {}
        self._stack_index: dict[Stack, int] = {}

    # -- building -------------------------------------------------------------------------
    def intern_frame(self, frame: Frame) -> int:
        return _intern(self.frames, self._frame_index, frame)

    def intern_stack(self, tid: int, state: ThreadState, frames: Iterable[Frame]) -> int:
        stack = Stack(tid, state, tuple(self.intern_frame(f) for f in frames))
        if len(self._stack_index) < len(self.stacks):  # a loaded profile: indexed on first use
            self._stack_index = {s: i for i, s in reversed(list(enumerate(self.stacks)))}
        return _intern(self.stacks, self._stack_index, stack)

    def add_window(
        self,
        t0: float,
        t1: float,
        ticks: float,
        samples: Iterable[Sample],
        spans: Iterable[tuple[Sample, float, float]] = (),
    ) -> Window:
        """Counts per stack; `spans` (sample, start, end) in seconds on the window's clock."""
        counts: dict[int, int] = {}
        for sample in samples:
            index = self._intern_sample(sample)
            counts[index] = counts.get(index, 0) + sample.count
        runs = [
            (sample.tid, self._intern_sample(sample), t0 + start, t0 + end)
            for sample, start, end in spans
        ]
        window = Window(t0, t1, ticks, counts, runs)
        self.windows.append(window)
        return window

    def fold_windows(self) -> None:
        """Replace the windows by one holding their summed counts: a capture whose windows
        already went to its stream keeps only this, so its memory stays flat. The folded
        window covers as many seconds as the windows did (gaps left out). Spans fold to one
        per (thread, stack) holding their summed seconds: a state's weight is kept (see
        state_weights), the timeline is not (the stream has it)."""
        if not self.windows or (len(self.windows) == 1 and _folded_spans(self.windows[0])):
            return
        first = self.windows[0]
        # the running total is the first window's own dict after the first fold: no copy per window
        counts = (
            first.counts
            if isinstance(first.counts, dict) and _folded_spans(first)
            else dict(first.counts)
        )
        for window in self.windows[1:]:
            for index, count in window.counts.items():
                counts[index] = counts.get(index, 0) + count
        seconds = sum(w.seconds for w in self.windows)
        ticks = sum(w.ticks for w in self.windows)
        spans: list[tuple[int, int, float, float]] = []
        if any(w.spans for w in self.windows):
            # each window's seconds count at its own tick rate (state_weights scales by it)
            held: dict[tuple[int, int], float] = {}
            for window in self.windows:
                scale = window.ticks / window.seconds if window.seconds > 0 else 0.0
                for tid, stack, a, b in window.spans:
                    key = (tid, stack)
                    held[key] = held.get(key, 0.0) + (b - a) * scale
            back = seconds / ticks if ticks else 0.0
            spans = [(t, k, first.t0, first.t0 + w * back) for (t, k), w in held.items()]
        self.windows = [Window(first.t0, first.t0 + seconds, ticks, counts, spans)]

    def _intern_sample(self, sample: Sample) -> int:
        if sample.thread_name or sample.tid not in self.threads:
            self.threads[sample.tid] = sample.thread_name
        return self.intern_stack(sample.tid, sample.state, sample.frames)

    def finish(self, **changes: Any) -> None:
        """Fold window totals into the sampling metadata (plus any explicit changes)."""
        duration = sum(w.seconds for w in self.windows)
        elapsed = (self.windows[-1].t1 - self.windows[0].t0) if self.windows else 0.0
        self.sampling = replace(
            self.sampling,
            duration_s=duration,
            elapsed_s=elapsed,
            ticks=sum(w.ticks for w in self.windows),
            samples=sum(sum(w.counts.values()) for w in self.windows),
            **changes,
        )

    # -- reading --------------------------------------------------------------------------
    def stack_frames(self, index: int) -> tuple[Frame, ...]:
        return tuple(self.frames[i] for i in self.stacks[index].frames)

    def total_counts(self) -> dict[int, int]:
        totals: dict[int, int] = {}
        for window in self.windows:
            for index, count in window.counts.items():
                totals[index] = totals.get(index, 0) + count
        return totals

    def state_weights(self, window: Window) -> Mapping[int, float]:
        """Every thread's time per stack (and so per state) in `window`, in ticks.

        Contention mode counts every thread at every tick, so these are its counts. States
        mode counts only the GIL holders (py-spy); every thread's state is in the reader's
        spans, whose seconds are scaled to the window's ticks. Other modes: the counts.
        """
        if self.sampling.mode is not Mode.STATES:
            return window.counts
        scale = window.ticks / window.seconds if window.seconds > 0 else 0.0
        out: dict[int, float] = {}
        for _tid, stack, a, b in window.spans:
            out[stack] = out.get(stack, 0.0) + (b - a) * scale
        return out

    def state_totals(self) -> dict[int, float]:
        """state_weights summed over the windows."""
        if self.sampling.mode is not Mode.STATES:
            return dict(self.total_counts())
        totals: dict[int, float] = {}
        for window in self.windows:
            for index, weight in self.state_weights(window).items():
                totals[index] = totals.get(index, 0.0) + weight
        return totals

    def samples(self) -> Iterator[Sample]:
        """Aggregated samples over the whole profile, one per distinct stack."""
        for index, count in self.total_counts().items():
            stack = self.stacks[index]
            yield Sample(
                stack.tid,
                self.threads.get(stack.tid, ""),
                self.stack_frames(index),
                count,
                stack.state,
            )

    @property
    def label(self) -> str:
        rank = "?" if self.target.rank is None else str(self.target.rank)
        return f"rank {rank} pid {self.target.pid}@{self.target.hostname or '?'}"

    # -- persistence ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_V1,
            "target": self.target.to_dict(),
            "sampling": self.sampling.to_dict(),
            "threads": [{"tid": tid, "name": name} for tid, name in sorted(self.threads.items())],
            "frames": [[f.name, f.file, f.line] for f in self.frames],
            "stacks": [[s.tid, str(s.state), list(s.frames)] for s in self.stacks],
            "windows": [self._window_dict(w) for w in self.windows],
        }

    @staticmethod
    def _window_dict(w: Window) -> dict[str, Any]:
        out: dict[str, Any] = {
            "t0": round(w.t0, 6),
            "t1": round(w.t1, 6),
            "ticks": w.ticks,
            "counts": [[i, c] for i, c in sorted(w.counts.items())],
        }
        if w.spans:
            out["spans"] = [[tid, stack, round(a, 6), round(b, 6)] for tid, stack, a, b in w.spans]
        return out

    def save(self, path: str | os.PathLike[str], version: int = 1) -> None:
        """Write the whole profile at once, atomically: as one JSON document (version 1) or as
        a complete gilprof.profile/2 stream."""
        if version == 1:
            write_json_atomic(path, self.to_dict())
            return
        from gilprof.profile.stream import save_streams

        save_streams(path, [self])

    @classmethod
    def from_dict(cls, data: Any, source: str = "profile") -> Profile:
        from gilprof.profile.reader import ProfileReader

        return ProfileReader(source).read(data)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Profile:
        """A profile file of either schema (a bundle of several is refused: see load_profiles)."""
        from gilprof.profile.stream import is_stream, read_streams

        if is_stream(path):
            profiles = read_streams(path)
            if len(profiles) != 1:
                from gilprof.errors import InputError

                raise InputError(
                    f"{os.fspath(path)}: holds {len(profiles)} profiles, not one "
                    "(a bundle: `gilprof report` reads it)"
                )
            return profiles[0]
        return cls.from_dict(read_json_file(path, what="profile"), source=str(path))


def _folded_spans(window: Window) -> bool:
    """True when `window` is already a fold: no spans, or at most one per (thread, stack)."""
    return len({(t, k) for t, k, _, _ in window.spans}) == len(window.spans)
