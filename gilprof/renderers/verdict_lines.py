"""The verdict's lines, first in every report: bound, the step split in ms, why, and what
would decide it."""

from __future__ import annotations

from gilprof.analysis.verdict import BOUND_WORDS, Verdict
from gilprof.wait_classes import WaitClass


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
    """The loop's step in ms by where its time goes (the host step p50 split by the loop
    thread's shares): host work, then each wait class, largest first."""
    loop = v.loop
    if loop.gil_wait is None or loop.device_wait is None:
        return ""  # gil mode records the holder only
    parts = [("host Python", loop.held), ("waiting for the GIL", loop.gil_wait)]
    parts.append(("native (host)", loop.native or 0.0))
    parts.append(("waiting for the device", loop.device_wait.value))
    if loop.peer_wait is not None:
        parts.append(("waiting for peers", loop.peer_wait.value))
    if loop.unplaced is not None:
        parts.append(("native, not placed", loop.unplaced.value))
    parts += [
        (WaitClass(b.cls).words, b.share.value)
        for b in loop.blocked_by_class
        if b.cls not in ("device", "peers")
    ]
    shown = sorted((p for p in parts if p[1] >= 0.005), key=lambda p: -p[1])
    step = v.host_step_p50_ms
    return ", ".join(f"{name} {share * step:.1f} ms ({share:.0%})" for name, share in shown)
