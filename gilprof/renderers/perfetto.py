"""`--format perfetto`: Chrome trace event JSON (ui.perfetto.dev, chrome://tracing).

One track per thread, named as in the profile. With per-tick spans (contention mode) a slice
is a run of one state in one Python function ("held: f", "waiting: g"); otherwise a slice is
one sampling window, named by the state the thread was in most, with every state's share in
its args, and a "GIL utilization" counter track per window.

Track ids are small integers (1, 2, ...), not the sampler's thread ids: py-spy reports pthread
ids near 2^47, which trace viewers do not all keep exact; the real id is in the track name.
"""

from __future__ import annotations

import json
from typing import Any

from gilprof.analysis.contention import python_function
from gilprof.analysis.table import build_table, thread_label
from gilprof.model import ThreadState
from gilprof.profile import Profile
from gilprof.renderers import register
from gilprof.renderers.report import ReportData

US = 1e6


def _meta(p: Profile, pid: int, tracks: dict[int, int]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {
            "ph": "M",
            "pid": pid,
            "tid": 0,
            "name": "process_name",
            "args": {"name": f"gilprof {p.label} ({p.sampling.mode} mode)"},
        }
    ]
    for tid, track in tracks.items():
        events.append(
            {
                "ph": "M",
                "pid": pid,
                "tid": track,
                "name": "thread_name",
                "args": {"name": f"{thread_label(p, tid)} (tid {tid})"},
            }
        )
        events.append(
            {
                "ph": "M",
                "pid": pid,
                "tid": track,
                "name": "thread_sort_index",
                "args": {"sort_index": track},
            }
        )
    return events


def _span_slices(p: Profile, pid: int, tracks: dict[int, int]) -> list[dict[str, Any]]:
    names: dict[int, tuple[str, str, str]] = {}

    def describe(stack: int) -> tuple[str, str, str]:
        if stack not in names:
            state = p.stacks[stack].state
            where = python_function(p.stack_frames(stack))
            fn = where.name if where else ""
            names[stack] = (f"{state}: {fn}" if fn else str(state), fn, where.file if where else "")
        return names[stack]

    events: list[dict[str, Any]] = []
    files_seen: set[tuple[str, str]] = set()
    open_run: dict[int, dict[str, Any]] = {}
    for window in p.windows:
        for tid, stack, t0, t1 in sorted(window.spans, key=lambda s: (s[2], s[0])):
            name, fn, file = describe(stack)
            run = open_run.get(tid)
            ts, end = round(t0 * US, 1), round(t1 * US, 1)
            if run is not None and run["name"] == name and ts - (run["ts"] + run["dur"]) <= 1:
                run["dur"] = round(end - run["ts"], 1)
                continue
            # the function's file only on the first slice in it: a 10-minute capture has
            # ~1e5 slices, and the viewer shows the args of the slice one clicks
            run = {
                "ph": "X",
                "pid": pid,
                "tid": tracks[tid],
                "name": name,
                "ts": ts,
                "dur": round(end - ts, 1),
                "cat": str(p.stacks[stack].state),
            }
            if file and (fn, file) not in files_seen:
                files_seen.add((fn, file))
                run["args"] = {"file": file}
            open_run[tid] = run
            events.append(run)
    return events


def _window_slices(p: Profile, pid: int, tracks: dict[int, int]) -> list[dict[str, Any]]:
    table = build_table(p)
    events: list[dict[str, Any]] = []
    for tid, states in table.states.items():
        for index, (t0, t1, ticks) in enumerate(table.windows):
            shares = {
                str(s): row.get(index, 0) / ticks
                for s, row in states.items()
                if ticks and row.get(index)
            }
            if not shares:
                continue
            top = max(shares, key=lambda s: shares[s])
            events.append(
                {
                    "ph": "X",
                    "pid": pid,
                    "tid": tracks[tid],
                    "cat": top,
                    "name": f"{top} {100 * shares[top]:.0f}%",
                    "ts": round(t0 * US, 1),
                    "dur": round((t1 - t0) * US, 1),
                    "args": {k: round(v, 4) for k, v in shares.items()},
                }
            )
    if p.sampling.mode.knows_gil:
        for index, (t0, _t1, ticks) in enumerate(table.windows):
            held = sum(
                states.get(ThreadState.HELD, {}).get(index, 0) for states in table.states.values()
            )
            events.append(
                {
                    "ph": "C",
                    "pid": pid,
                    "tid": 0,
                    "name": "GIL utilization",
                    "ts": round(t0 * US, 1),
                    "args": {"held": round(min(1.0, held / ticks), 4) if ticks else 0},
                }
            )
    return events


def trace_events(data: ReportData) -> dict[str, Any]:
    p = data.profile
    pid = p.target.pid or 1
    tids = sorted({s.tid for s in p.stacks} | set(p.threads))
    tracks = {tid: i + 1 for i, tid in enumerate(tids)}
    events = _meta(p, pid, tracks)
    if any(w.spans for w in p.windows):
        events += _span_slices(p, pid, tracks)
    else:
        events += _window_slices(p, pid, tracks)
    steps = getattr(data, "step_spans", None) or ()
    for t0, t1, label in steps:
        events.append(
            {
                "ph": "X",
                "pid": pid,
                "tid": len(tracks) + 1,
                "name": f"step {label}",
                "ts": round(t0 * US, 1),
                "dur": round((t1 - t0) * US, 1),
                "cat": "step",
            }
        )
    if steps:
        events.append(
            {
                "ph": "M",
                "pid": pid,
                "tid": len(tracks) + 1,
                "name": "thread_name",
                "args": {"name": "steps"},
            }
        )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "producer": "gilprof",
            "profile": p.label,
            "mode": str(p.sampling.mode),
            "started_at": p.sampling.started_at,
            "partial": p.sampling.partial,
        },
    }


@register("report", "perfetto", extension=".json", description="Chrome trace for ui.perfetto.dev")
def render_perfetto(data: ReportData, **_: Any) -> str:
    return json.dumps(trace_events(data), separators=(",", ":")) + "\n"
