"""py-spy chrometrace (`--native --idle`) -> per-thread spans of one stack each.

With --idle every thread is recorded at every tick, so a thread's B/E events bracket runs of
identical stacks that are contiguous in time: span [B, E) covers the ticks of that run. The
`tid` there is the pthread id; `py-spy dump --json` maps it to the OS thread id and name.
"""

from __future__ import annotations

import json
import math
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
