"""The profile object: raw stack counts per sampling window, with target and sampling metadata.

A profile keeps what the sampler saw (interned frames and stacks, and per-window counts) and
nothing derived, so `report`, `compare` and `gate` recompute attribution from the same file.
Memory is bounded by distinct stacks x windows, never by the number of samples.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from gilprof.model import Frame, Sample, SamplingInfo, Target, ThreadState
from gilprof.profile.files import read_json_file, write_json_atomic

SCHEMA = "gilprof.profile/1"
SCHEMA_NAME, _, _version = SCHEMA.rpartition("/")
SCHEMA_VERSION = int(_version)


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
    counts: dict[int, int] = field(default_factory=dict)  # stack index -> samples
    # contention mode: (tid, stack index, t0, t1) runs of one stack, all threads on one clock
    spans: list[tuple[int, int, float, float]] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return max(0.0, self.t1 - self.t0)


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
        index = self._frame_index.get(frame)
        if index is None:
            index = len(self.frames)
            self.frames.append(frame)
            self._frame_index[frame] = index
        return index

    def intern_stack(self, tid: int, state: ThreadState, frames: Iterable[Frame]) -> int:
        stack = Stack(tid, state, tuple(self.intern_frame(f) for f in frames))
        index = self._stack_index.get(stack)
        if index is None:
            index = len(self.stacks)
            self.stacks.append(stack)
            self._stack_index[stack] = index
        return index

    def add_window(self, t0: float, t1: float, ticks: float, samples: Iterable[Sample],
                   spans: Iterable[tuple[Sample, float, float]] = ()) -> Window:
        """Counts per stack; `spans` (sample, start, end) in seconds on the window's clock."""
        window = Window(t0, t1, ticks)
        for sample in samples:
            index = self._intern_sample(sample)
            window.counts[index] = window.counts.get(index, 0) + sample.count
        for sample, start, end in spans:
            window.spans.append((sample.tid, self._intern_sample(sample), t0 + start, t0 + end))
        self.windows.append(window)
        return window

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

    def samples(self) -> Iterator[Sample]:
        """Aggregated samples over the whole profile, one per distinct stack."""
        for index, count in self.total_counts().items():
            stack = self.stacks[index]
            yield Sample(stack.tid, self.threads.get(stack.tid, ""), self.stack_frames(index),
                         count, stack.state)

    @property
    def label(self) -> str:
        rank = "?" if self.target.rank is None else str(self.target.rank)
        return f"rank {rank} pid {self.target.pid}@{self.target.hostname or '?'}"

    # -- persistence ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        sampling = asdict(self.sampling)
        sampling["mode"] = str(self.sampling.mode)
        sampling["messages"] = list(self.sampling.messages)
        target = asdict(self.target)
        target["cmdline"] = list(self.target.cmdline)
        return {
            "schema": SCHEMA,
            "target": target,
            "sampling": sampling,
            "threads": [{"tid": tid, "name": name} for tid, name in sorted(self.threads.items())],
            "frames": [[f.name, f.file, f.line] for f in self.frames],
            "stacks": [[s.tid, str(s.state), list(s.frames)] for s in self.stacks],
            "windows": [self._window_dict(w) for w in self.windows],
        }

    @staticmethod
    def _window_dict(w: Window) -> dict[str, Any]:
        out: dict[str, Any] = {"t0": round(w.t0, 6), "t1": round(w.t1, 6), "ticks": w.ticks,
                               "counts": [[i, c] for i, c in sorted(w.counts.items())]}
        if w.spans:
            out["spans"] = [[tid, stack, round(a, 6), round(b, 6)] for tid, stack, a, b in w.spans]
        return out

    def save(self, path: str | os.PathLike[str]) -> None:
        write_json_atomic(path, self.to_dict())

    @classmethod
    def from_dict(cls, data: Any, source: str = "profile") -> Profile:
        from gilprof.profile.reader import ProfileReader

        return ProfileReader(source).read(data)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Profile:
        return cls.from_dict(read_json_file(path, what="profile"), source=str(path))

