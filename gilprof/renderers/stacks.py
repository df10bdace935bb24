"""Report renderers that export stacks for other viewers: folded stacks and speedscope."""

from __future__ import annotations

import json
from typing import Any

from gilprof.analysis.attribution import thread_label
from gilprof.renderers import register
from gilprof.renderers.report import ReportData


@register(
    "report",
    "collapsed",
    extension=".folded",
    description="folded stacks for flamegraph.pl/inferno",
)
def render_collapsed(data: ReportData, **_: Any) -> str:
    """Folded stacks (flamegraph.pl, inferno): `thread;root;...;leaf count`."""
    p = data.profile
    out = []
    for index, count in sorted(p.total_counts().items()):
        stack = p.stacks[index]
        names = [thread_label(p, stack.tid).replace(";", ":")]
        for frame in p.stack_frames(index):
            where = frame.basename + (f":{frame.line}" if data.lines and frame.line else "")
            names.append(f"{frame.name} ({where})".replace(";", ":") if where else frame.name)
        out.append(f"{';'.join(names)} {count}")
    return "\n".join(out) + ("\n" if out else "")


@register(
    "report", "speedscope", extension=".speedscope.json", description="opens in speedscope.app"
)
def render_speedscope(data: ReportData, **_: Any) -> str:
    """One sampled profile per thread; weights in seconds (share x sampled duration)."""
    p = data.profile
    seconds_per_tick = data.attribution.seconds_per_tick or (1.0 / p.sampling.rate_hz)
    frames: list[dict[str, Any]] = []
    frame_ids: dict[tuple[str, str, int], int] = {}
    by_thread: dict[int, tuple[list[list[int]], list[float]]] = {}
    for index, count in sorted(p.total_counts().items()):
        stack = p.stacks[index]
        ids = []
        for frame in p.stack_frames(index):
            key = (frame.name, frame.file, frame.line if data.lines else 0)
            if key not in frame_ids:
                frame_ids[key] = len(frames)
                entry: dict[str, Any] = {"name": frame.name, "file": frame.file}
                if data.lines and frame.line:
                    entry["line"] = frame.line
                frames.append(entry)
            ids.append(frame_ids[key])
        samples, weights = by_thread.setdefault(stack.tid, ([], []))
        samples.append(ids)
        weights.append(count * seconds_per_tick)
    profiles = []
    for tid, (samples, weights) in sorted(by_thread.items()):
        profiles.append(
            {
                "type": "sampled",
                "name": f"{thread_label(p, tid)} ({tid})",
                "unit": "seconds",
                "startValue": 0,
                "endValue": sum(weights),
                "samples": samples,
                "weights": weights,
            }
        )
    doc = {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": frames},
        "profiles": profiles,
        "name": f"gilprof {p.label} ({p.sampling.mode} mode)",
        "activeProfileIndex": 0,
        "exporter": "gilprof",
    }
    return json.dumps(doc) + "\n"
