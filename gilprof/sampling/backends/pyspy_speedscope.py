"""py-spy speedscope output (`--native --idle`) -> per-thread runs of one stack each.

Contention mode reads py-spy's speedscope output: with --idle every live thread is recorded
at every tick, in order, so the k-th sample of every thread that lived through the window
belongs to the same tick (one lock round: py-spy stops the threads one after another, so a
round spans up to a few ms across threads; see pyspy.CONTENTION_NOTE), and counts are exact.
(The chrometrace format was used first:
its timestamps are when py-spy processed a sample, not when it took it, and after a stall
py-spy samples back to back, so weighting stacks by time until the next change charged each
stall to the state sampled just before it: a thread that computes in bursts between sleeps
read 10-14 points low. Counting ticks has no such bias.)
"""

from __future__ import annotations

import re
from typing import Any

from gilprof.model import Frame, Sample
from gilprof.sampling.backends.native import classify

_SPEEDSCOPE_THREAD = re.compile(r'^Thread (?P<tid>\d{1,20})(?: "(?P<name>.*)")?')


def parse_speedscope(
    doc: Any, window_seconds: float
) -> tuple[int, list[tuple[Sample, float, float]]]:
    """(ticks, runs) from py-spy's speedscope output of one window.

    Each run is (sample with count = its ticks, start, end); times place tick k at
    k x window_seconds / ticks, so the contention analysis counts ticks. A thread with fewer
    samples than the window's ticks started or ended inside it and cannot be placed on the
    common clock; its ticks still count towards its own states, laid from the window start.
    """
    if not isinstance(doc, dict):
        return 0, []
    shared = doc.get("shared")
    frames_raw = shared.get("frames") if isinstance(shared, dict) else None
    profiles = doc.get("profiles")
    if not isinstance(frames_raw, list) or not isinstance(profiles, list):
        return 0, []
    frames: list[Frame] = []
    for entry in frames_raw:
        entry = entry if isinstance(entry, dict) else {}
        line = entry.get("line")
        frames.append(
            Frame(
                str(entry.get("name", "?")),
                str(entry.get("file") or ""),
                line if isinstance(line, int) and 0 <= line < 2**31 else 0,
            )
        )
    threads: list[tuple[int, str, list[Any]]] = []
    for profile in profiles:
        if not isinstance(profile, dict) or not isinstance(profile.get("samples"), list):
            continue
        match = _SPEEDSCOPE_THREAD.match(str(profile.get("name", "")))
        if match:
            threads.append((int(match.group("tid")), match.group("name") or "", profile["samples"]))
    ticks = max((len(samples) for _, _, samples in threads), default=0)
    if ticks == 0:
        return 0, []
    step = window_seconds / ticks if window_seconds > 0 else 0.0
    runs: list[tuple[Sample, float, float]] = []
    for tid, name, samples in threads:
        start, previous = 0, None
        for k, stack in enumerate([*samples, None]):
            key = tuple(stack) if isinstance(stack, list) else None
            if k and key != previous and previous is not None:
                stack_frames = tuple(
                    frames[i] for i in previous if isinstance(i, int) and 0 <= i < len(frames)
                )
                if stack_frames:
                    runs.append(
                        (
                            Sample(tid, name, stack_frames, k - start, classify(stack_frames)),
                            start * step,
                            k * step,
                        )
                    )
            if key != previous:
                start, previous = k, key
    return ticks, runs
