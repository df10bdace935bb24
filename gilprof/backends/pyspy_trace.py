"""py-spy contention output (`--native --idle`) -> per-thread runs of one stack each.

Contention mode reads py-spy's speedscope output: with --idle every live thread is recorded
at every tick, in order, so the k-th sample of every thread that lived through the window
belongs to the same tick, and counts are exact. (The chrometrace format was used first:
its timestamps are when py-spy processed a sample, not when it took it, and after a stall
py-spy samples back to back, so weighting stacks by time until the next change charged each
stall to the state sampled just before it: a thread that computes in bursts between sleeps
read 10-14 points low. Counting ticks has no such bias.) The chrometrace parser is kept for
reading traces made with `py-spy record -f chrometrace`.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from collections.abc import Iterator
from typing import Any

from gilprof.contention import classify
from gilprof.model import Frame, Sample

ThreadNames = dict[int, tuple[int, str]]  # pthread id -> (os thread id, name)


def thread_names(binary: str, pid: int) -> ThreadNames:
    """pthread id -> (OS thread id, name), from one `py-spy dump --json`; {} if it fails."""
    try:
        out = subprocess.run([binary, "dump", "--pid", str(pid), "--json", "--nonblocking"],
                             capture_output=True, text=True, timeout=30).stdout
        threads = json.loads(out)
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError):
        return {}
    names: ThreadNames = {}
    if isinstance(threads, list):
        for t in threads:
            if isinstance(t, dict) and isinstance(t.get("thread_id"), int):
                os_tid = t.get("os_thread_id")
                names[t["thread_id"]] = (os_tid if isinstance(os_tid, int) else t["thread_id"],
                                         str(t.get("thread_name") or ""))
    return names


def parse_chrometrace(events: Any, names: ThreadNames
                      ) -> Iterator[tuple[Sample, float, float]]:
    """(sample, start s, end s) for every run of one stack on one thread."""
    if not isinstance(events, list):
        return
    stacks: dict[int, list[Frame]] = {}
    opened: dict[int, float] = {}
    last_ts: dict[int, float] = {}
    snapshot: dict[int, tuple[Frame, ...]] = {}

    def close(tid: int, ts: float) -> Iterator[tuple[Sample, float, float]]:
        frames = snapshot.get(tid, ())
        start = opened.get(tid)
        if frames and start is not None and ts > start:
            os_tid, name = names.get(tid, (tid, ""))
            yield Sample(os_tid, name, frames, 1, classify(frames)), start, ts

    for event in events:
        if not isinstance(event, dict) or event.get("ph") not in ("B", "E"):
            continue
        tid, ts = event.get("tid"), event.get("ts")
        if not isinstance(tid, int) or not isinstance(ts, (int, float)):
            continue
        try:
            seconds = ts / 1e6
        except OverflowError:  # an integer beyond the float range: not a timestamp
            continue
        if not math.isfinite(seconds):
            continue
        if tid in last_ts and seconds != last_ts[tid]:
            # All events at one timestamp form one stack change.
            current = tuple(stacks.get(tid, ()))
            if current != snapshot.get(tid, ()):
                yield from close(tid, last_ts[tid])
                snapshot[tid] = current
                opened[tid] = last_ts[tid]
        last_ts[tid] = seconds
        stack = stacks.setdefault(tid, [])
        if event["ph"] == "B":
            raw_args = event.get("args")
            args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
            line = args.get("line")
            stack.append(Frame(str(event.get("name", "?")), str(args.get("filename", "")),
                               line if isinstance(line, int) else 0))
        elif stack:
            stack.pop()
    for tid, seconds in last_ts.items():
        current = tuple(stacks.get(tid, ()))
        if current != snapshot.get(tid, ()):
            yield from close(tid, seconds)
            snapshot[tid] = current
            opened[tid] = seconds
        # the trace ends with E events for every open frame at write time: nothing left open


_SPEEDSCOPE_THREAD = re.compile(r'^Thread (?P<tid>\d{1,20})(?: "(?P<name>.*)")?')


def parse_speedscope(doc: Any, window_seconds: float
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
        frames.append(Frame(str(entry.get("name", "?")), str(entry.get("file") or ""),
                            line if isinstance(line, int) and 0 <= line < 2**31 else 0))
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
                stack_frames = tuple(frames[i] for i in previous
                                     if isinstance(i, int) and 0 <= i < len(frames))
                if stack_frames:
                    runs.append((Sample(tid, name, stack_frames, k - start, classify(stack_frames)),
                                 start * step, k * step))
            if key != previous:
                start, previous = k, key
    return ticks, runs
