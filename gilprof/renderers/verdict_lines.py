"""The verdict's lines, first in every report: bound, the step split in ms, why, and what
would decide it."""

from __future__ import annotations

from gilprof.analysis.blocking import step_parts
from gilprof.analysis.verdict import BOUND_WORDS, Verdict


def verdict_lines(v: Verdict | None) -> list[str]:
    """The answer first: bound, step medians, why, and what would decide it."""
    if v is None:
        return []
    device = "n/a" if v.device_step_p50_ms is None else f"{v.device_step_p50_ms:.1f} ms"
    lines = [
        f"VERDICT  {BOUND_WORDS.get(v.bound, v.bound)}: loop thread {v.thread}, host step "
        f"p50 {v.host_step_p50_ms:.1f} ms, device step p50 {device}",
        f"why      {v.reason}",
        f"thread   {v.thread}: {v.loop.thread.chosen_by}",
    ]
    split = step_split(v)
    if split:
        lines.insert(1, f"step     {split}")
    if v.gpu_note:
        lines.append(f"gpu      {v.gpu_note}")
    if v.command:
        lines.append(f"decide   {v.command}")
    return lines


def step_split(v: Verdict) -> str:
    """The loop's step in ms by where its time goes (gilprof.analysis.blocking.step_parts):
    host work, then each wait class, largest first."""
    return ", ".join(f"{p.words} {p.ms:.1f} ms ({p.share:.0%})" for p in step_parts(v))
