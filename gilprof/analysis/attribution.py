"""Profile -> GIL shares per thread and function. Pure functions over a Profile.

Definitions (README "Definitions"): a tick is one sampling instant. In gil mode a function's
total share is the fraction of ticks at which the GIL holder had it on its stack (once per
sample, however deep the recursion); its self share the fraction with it on top; GIL
utilization the fraction of ticks at which any thread held the GIL; a thread's held share
the fraction of ticks at which it held the GIL. In wall and cpu modes there is no GIL state:
shares are per thread (fraction of ticks at which that thread had the function on its stack).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gilprof.model import Frame, Mode, ThreadState
from gilprof.profile import Profile

DEFAULT_WATCH = ("safe_broadcast", "_balance_requests_across_ranks")


@dataclass(frozen=True, slots=True)
class FunctionKey:
    name: str
    file: str
    line: int = 0  # 0 unless attribution is by line
    thread: str | None = None  # None when aggregated over threads

    @property
    def basename(self) -> str:
        return os.path.basename(self.file)

    @property
    def match_key(self) -> tuple[str, str, int, str | None]:
        """Identity across machines: file paths differ, base names do not."""
        return (self.name, self.basename, self.line, self.thread)


@dataclass(frozen=True)
class FunctionShare:
    key: FunctionKey
    self_samples: int
    total_samples: int
    self_share: float
    total_share: float
    self_s: float
    total_s: float


@dataclass(frozen=True)
class ThreadShare:
    tid: int
    name: str
    samples: int
    share: float  # held share in gil mode; sampled share otherwise


@dataclass(frozen=True)
class WatchResult:
    function: str
    found: bool
    self_share: float
    total_share: float
    self_s: float
    total_s: float
    matched: tuple[str, ...]  # the qualified names that matched


@dataclass(frozen=True)
class Attribution:
    mode: Mode
    ticks: float
    duration_s: float
    samples: int
    utilization: float | None  # None outside gil mode: no GIL state was recorded
    threads: tuple[ThreadShare, ...]
    functions: tuple[FunctionShare, ...]
    watch: tuple[WatchResult, ...]
    by_thread: bool

    @property
    def seconds_per_tick(self) -> float:
        return self.duration_s / self.ticks if self.ticks else 0.0


def thread_label(profile: Profile, tid: int) -> str:
    return profile.threads.get(tid) or f"tid {tid}"


def _frame_key(frame: Frame, lines: bool, thread: str | None) -> FunctionKey:
    return FunctionKey(frame.name, frame.file, frame.line if lines else 0, thread)


def stack_keys(frames: Sequence[Frame], lines: bool, thread: str | None
               ) -> tuple[set[FunctionKey], FunctionKey | None]:
    """The distinct functions on a stack (recursion counted once) and the leaf."""
    keys = {_frame_key(f, lines, thread) for f in frames}
    leaf = _frame_key(frames[-1], lines, thread) if frames else None
    return keys, leaf


def _thread_filter(profile: Profile, pattern: str | None) -> set[int] | None:
    if not pattern:
        return None
    regex = re.compile(pattern)
    tids = {s.tid for s in profile.stacks} | set(profile.threads)
    return {tid for tid in tids if regex.search(thread_label(profile, tid))}


def attribute(profile: Profile, *, by_thread: bool = False, lines: bool = False,
              thread_pattern: str | None = None, watch: Iterable[str] = DEFAULT_WATCH,
              top: int | None = None) -> Attribution:
    mode = profile.sampling.mode
    gil_known = mode.knows_gil
    per_thread = by_thread or not gil_known
    ticks = profile.sampling.ticks
    duration = profile.sampling.duration_s
    allowed = _thread_filter(profile, thread_pattern)
    watch_names = tuple(dict.fromkeys(watch))

    thread_samples: dict[int, int] = {}
    self_counts: dict[FunctionKey, int] = {}
    total_counts: dict[FunctionKey, int] = {}
    watch_self = dict.fromkeys(watch_names, 0)
    watch_total = dict.fromkeys(watch_names, 0)
    watch_matched: dict[str, set[str]] = {w: set() for w in watch_names}
    samples = 0
    for index, count in profile.total_counts().items():
        stack = profile.stacks[index]
        if mode is Mode.CONTENTION and stack.state is not ThreadState.HELD:
            continue  # shares are of GIL-held time; the other states are in contention.py
        samples += count
        thread_samples[stack.tid] = thread_samples.get(stack.tid, 0) + count
        if allowed is not None and stack.tid not in allowed:
            continue
        frames = profile.stack_frames(index)
        if not frames:
            continue
        label = thread_label(profile, stack.tid) if per_thread else None
        keys, leaf = stack_keys(frames, lines, label)
        for key in keys:
            total_counts[key] = total_counts.get(key, 0) + count
        if leaf is not None:
            self_counts[leaf] = self_counts.get(leaf, 0) + count
        for name in watch_names:
            hits = [f for f in frames if f.matches(name)]
            if hits:
                watch_total[name] += count
                watch_matched[name].update(f.name for f in hits)
                if frames[-1].matches(name):
                    watch_self[name] += count

    def share(count: int) -> float:
        return min(1.0, count / ticks) if ticks > 0 else 0.0

    def seconds(count: int) -> float:
        return share(count) * duration

    functions = sorted(
        (FunctionShare(key, self_counts.get(key, 0), total, share(self_counts.get(key, 0)),
                       share(total), seconds(self_counts.get(key, 0)), seconds(total))
         for key, total in total_counts.items()),
        key=lambda f: (-f.total_samples, -f.self_samples, f.key.name, f.key.file, f.key.line),
    )
    if top is not None:
        functions = functions[:top]
    threads = sorted(
        (ThreadShare(tid, thread_label(profile, tid), n, share(n))
         for tid, n in thread_samples.items()
         if allowed is None or tid in allowed),
        key=lambda t: (-t.samples, t.tid),
    )
    watched = tuple(
        WatchResult(name, watch_total[name] > 0, share(watch_self[name]), share(watch_total[name]),
                    seconds(watch_self[name]), seconds(watch_total[name]),
                    tuple(sorted(watch_matched[name])))
        for name in watch_names
    )
    held = sum(thread_samples.values())
    utilization = share(held) if gil_known else None
    return Attribution(mode, ticks, duration, samples, utilization, tuple(threads),
                       tuple(functions), watched, per_thread)


def window_function_counts(profile: Profile, *, by_thread: bool = False, lines: bool = False
                           ) -> tuple[list[float], list[dict[tuple[str, str, int, str | None], int]]]:
    """Per window: ticks, and total-share sample counts per function match key.

    Keys are FunctionKey.match_key so profiles from different machines line up. The thread
    label is part of the key only with by_thread. A key "<held:THREAD>" pseudo-function per
    thread carries the thread's held samples, and "<gil>" the GIL-held samples.
    """
    per_thread = by_thread or not profile.sampling.mode.knows_gil
    contention = profile.sampling.mode is Mode.CONTENTION
    keys_cache: dict[int, set[tuple[str, str, int, str | None]]] = {}
    ticks: list[float] = []
    counts: list[dict[tuple[str, str, int, str | None], int]] = []
    for window in profile.windows:
        tally: dict[tuple[str, str, int, str | None], int] = {}
        for index, count in window.counts.items():
            if contention and profile.stacks[index].state is not ThreadState.HELD:
                continue
            keys = keys_cache.get(index)
            if keys is None:
                stack = profile.stacks[index]
                label = thread_label(profile, stack.tid)
                found, _ = stack_keys(profile.stack_frames(index), lines,
                                      label if per_thread else None)
                keys = {k.match_key for k in found}
                keys.add(("<held>", "", 0, label))
                keys.add(("<gil>", "", 0, None))
                keys_cache[index] = keys
            for key in keys:
                tally[key] = tally.get(key, 0) + count
        ticks.append(window.ticks)
        counts.append(tally)
    return ticks, counts
