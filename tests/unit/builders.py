"""Builders for hand-made profiles: exact counts, known windows, no sampler involved."""

from __future__ import annotations

from collections.abc import Sequence

from gilprof.model import Frame, Mode, Sample, SamplingInfo, Target, ThreadState
from gilprof.profile import Profile


def frames(*names: str, file: str = "app.py") -> tuple[Frame, ...]:
    """`frames("main", "loop", "hot")` -> root-first frames, each in `file` unless `name@file`."""
    out = []
    for i, name in enumerate(names):
        fname, _, ffile = name.partition("@")
        out.append(Frame(fname, ffile or file, 10 + i))
    return tuple(out)


def sample(
    thread: str,
    *names: str,
    count: int = 1,
    tid: int | None = None,
    state: ThreadState = ThreadState.HELD,
) -> Sample:
    return Sample(
        tid if tid is not None else abs(hash(thread)) % 100000, thread, frames(*names), count, state
    )


def make_profile(
    windows: Sequence[tuple[float, Sequence[Sample]]],
    *,
    mode: Mode = Mode.GIL,
    rate: float = 100.0,
    window_s: float = 1.0,
    rank: int | None = 0,
) -> Profile:
    """Each window is (ticks, samples); windows are laid end to end, `window_s` long each."""
    profile = Profile(
        Target(pid=1234, rank=rank, rank_source="PMI_RANK", hostname="host", python="3.11.7"),
        SamplingInfo(
            sampler="test", sampler_version="0", mode=mode, rate_hz=rate, window_s=window_s
        ),
    )
    t = 0.0
    for ticks, samples in windows:
        profile.add_window(t, t + window_s, ticks, samples)
        t += window_s
    profile.finish()
    return profile
