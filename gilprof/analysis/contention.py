"""GIL contention from per-thread states: who waits for the GIL, and who holds it meanwhile.

The states come from the sampler (see gilprof.sampling.backends.native for how a native
stack is read). Every thread is sampled at the same ticks, so the states of all threads line
up in time and the blame matrix (while A waits, B holds in function f) is the overlap of
their spans.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from gilprof.model import Frame, ThreadState
from gilprof.native_classes import NATIVE_FRAME_PREFIX, native_class_of


def python_function(frames: Sequence[Frame]) -> Frame | None:
    """The innermost Python frame: where a waiting thread waits, where a holder runs."""
    for frame in reversed(frames):
        if frame.is_python and frame.file:
            return frame
    return None


@dataclass(frozen=True)
class ThreadContention:
    tid: int
    name: str
    held_share: float
    wait_share: float
    native_share: float
    idle_share: float
    unclassified_share: float


@dataclass(frozen=True)
class WaitSite:
    thread: str
    function: str
    file: str
    share: float


@dataclass(frozen=True)
class Blame:
    waiter: str
    holder: str
    holder_function: str
    holder_file: str
    share: float


@dataclass(frozen=True)
class NativePlace:
    """Where a thread ran without the GIL (the native locator's leaf frame) and what it was."""

    thread: str
    place: str  # file and function, e.g. "libz.so.1 deflate"
    cls: str  # gilprof.native_classes.NativeClass value
    share: float


@dataclass(frozen=True)
class Contention:
    seconds: float
    utilization: float
    threads: tuple[ThreadContention, ...]
    wait_sites: tuple[WaitSite, ...]
    blame: tuple[Blame, ...]
    native_places: tuple[NativePlace, ...] = ()


NO_HOLDER = "(nobody: GIL in hand-off)"


def has_spans(profile: object) -> bool:
    """Whether the profile recorded every thread's state (states or contention mode)."""
    from gilprof.profile import Profile

    assert isinstance(profile, Profile)
    return profile.sampling.mode.reads_states and any(w.spans for w in profile.windows)


@dataclass
class WindowContention:
    """One window's contention in seconds: per thread and state, per wait site, per
    (waiter, holder, holder function, file); compare and gate put intervals on these."""

    seconds: float
    held_any: float = 0.0
    states: dict[int, dict[ThreadState, float]] = field(default_factory=dict)
    wait_sites: dict[tuple[str, str, str], float] = field(default_factory=dict)
    blame: dict[tuple[str, str, str, str], float] = field(default_factory=dict)
    native: dict[tuple[str, str, str], float] = field(default_factory=dict)


def per_window(profile: object) -> list[WindowContention]:
    """Every window's contention, from its spans (time-weighted)."""
    from gilprof.analysis.attribution import thread_label
    from gilprof.profile import Profile

    assert isinstance(profile, Profile)
    func_cache: dict[int, Frame | None] = {}
    places: dict[int, tuple[str, str] | None] = {}
    labels: dict[int, str] = {}

    def place_of(stack: int) -> tuple[str, str] | None:
        if stack not in places:
            frames = profile.stack_frames(stack)
            cls = native_class_of(frames[-1]) if frames else None
            places[stack] = (
                None
                if cls is None
                else (frames[-1].name.removeprefix(NATIVE_FRAME_PREFIX).strip(), cls.value)
            )
        return places[stack]

    def func_of(stack: int) -> Frame | None:
        if stack not in func_cache:
            func_cache[stack] = python_function(profile.stack_frames(stack))
        return func_cache[stack]

    def label(tid: int) -> str:
        if tid not in labels:
            labels[tid] = thread_label(profile, tid)
        return labels[tid]

    out = []
    for window in profile.windows:
        acc = WindowContention(window.seconds)
        out.append(acc)
        # Boundaries of every span: between two boundaries each thread's state is constant.
        points = sorted({t for span in window.spans for t in (span[2], span[3])})
        if len(points) < 2:
            continue
        by_thread: dict[int, list[tuple[float, float, int]]] = {}
        for tid, stack, t0, t1 in window.spans:
            by_thread.setdefault(tid, []).append((t0, t1, stack))
        cursors = dict.fromkeys(by_thread, 0)
        for spans in by_thread.values():
            spans.sort()
        for a, b in itertools.pairwise(points):
            dt = b - a
            if dt <= 0:
                continue
            holders: list[tuple[int, int]] = []
            waiters: list[tuple[int, int]] = []
            for tid, spans in by_thread.items():
                i = cursors[tid]
                while i < len(spans) and spans[i][1] <= a:
                    i += 1
                cursors[tid] = i
                if i == len(spans) or spans[i][0] > a:
                    continue
                stack = spans[i][2]
                state = profile.stacks[stack].state
                states = acc.states.setdefault(tid, {})
                states[state] = states.get(state, 0.0) + dt
                if state is ThreadState.HELD:
                    holders.append((tid, stack))
                elif state is ThreadState.WAITING:
                    waiters.append((tid, stack))
                if state is not ThreadState.HELD:
                    where_native = place_of(stack)
                    if where_native is not None:
                        key3 = (label(tid), *where_native)
                        acc.native[key3] = acc.native.get(key3, 0.0) + dt
            if holders:
                acc.held_any += dt
            for tid, stack in waiters:
                name = label(tid)
                where = func_of(stack)
                site = (name, where.name if where else "?", _base(where))
                acc.wait_sites[site] = acc.wait_sites.get(site, 0.0) + dt
                if not holders:
                    key = (name, NO_HOLDER, "", "")
                    acc.blame[key] = acc.blame.get(key, 0.0) + dt
                for htid, hstack in holders:
                    hf = func_of(hstack)
                    key = (name, label(htid), hf.name if hf else "?", _base(hf))
                    acc.blame[key] = acc.blame.get(key, 0.0) + dt / len(holders)
    return out


def _base(frame: Frame | None) -> str:
    return os.path.basename(frame.file) if frame else ""


def analyze(profile: object) -> Contention:
    """Contention figures from a profile's spans (states or contention mode), as shares of
    the sampled wall time."""
    from gilprof.analysis.attribution import thread_label
    from gilprof.profile import Profile

    assert isinstance(profile, Profile)
    per_state: dict[int, dict[ThreadState, float]] = {}
    wait_sites: dict[tuple[str, str, str], float] = {}
    blame: dict[tuple[str, str, str, str], float] = {}
    native: dict[tuple[str, str, str], float] = {}
    held_any = total = 0.0
    for acc in per_window(profile):
        total += acc.seconds
        held_any += acc.held_any
        for tid, states in acc.states.items():
            mine = per_state.setdefault(tid, {})
            for state, seconds in states.items():
                mine[state] = mine.get(state, 0.0) + seconds
        for site, seconds in acc.wait_sites.items():
            wait_sites[site] = wait_sites.get(site, 0.0) + seconds
        for key, seconds in acc.blame.items():
            blame[key] = blame.get(key, 0.0) + seconds
        for key3, seconds in acc.native.items():
            native[key3] = native.get(key3, 0.0) + seconds

    def share(seconds: float) -> float:
        return min(1.0, seconds / total) if total > 0 else 0.0

    threads = []
    for tid, states in per_state.items():
        threads.append(
            ThreadContention(
                tid,
                thread_label(profile, tid),
                share(states.get(ThreadState.HELD, 0.0)),
                share(states.get(ThreadState.WAITING, 0.0)),
                share(states.get(ThreadState.NATIVE, 0.0)),
                share(states.get(ThreadState.IDLE, 0.0)),
                share(states.get(ThreadState.UNCLASSIFIED, 0.0)),
            )
        )
    threads.sort(key=lambda t: (-(t.held_share + t.wait_share), t.tid))
    sites = sorted(
        (WaitSite(t, f, file, share(v)) for (t, f, file), v in wait_sites.items()),
        key=lambda w: -w.share,
    )
    blamed = sorted(
        (Blame(w, h, f, file, share(v)) for (w, h, f, file), v in blame.items()),
        key=lambda b: -b.share,
    )
    placed = sorted(
        (NativePlace(t, p, c, share(v)) for (t, p, c), v in native.items()),
        key=lambda n: -n.share,
    )
    return Contention(
        total, share(held_any), tuple(threads), tuple(sites), tuple(blamed), tuple(placed)
    )
