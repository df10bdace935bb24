"""Where threads block: every thread's blocked time by wait class and evidence, and the loop's
step split by class, for the report's "Where threads block" table, its JSON `wait_reasons`,
the blocked-time flame graph and compare's per-class change.

A reading's class and evidence come from gilprof.analysis.reasons (one pass per profile, the
same the verdict classes the loop by), so a row here and the verdict never disagree. A row's
share is of the thread's own samples (as the verdict's loop split); with a step time it is
also given in ms per step of the loop: the thread's blocked time in that class while the
loop ran one step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gilprof.analysis.reasons import blocked_reasons
from gilprof.analysis.verdict import Verdict
from gilprof.model import ThreadState
from gilprof.profile import Profile
from gilprof.wait_classes import Reason, WaitClass, WaitRules

MIN_SHARE = 0.01  # rows below this share of their thread's samples are folded into "other"


@dataclass(frozen=True, slots=True)
class BlockedSite:
    """One thread's blocked time in one class at one place, with the evidence for it."""

    tid: int
    thread: str
    cls: WaitClass
    where: str  # the innermost Python function the thread blocks in (may be empty)
    evidence: str  # what the machine showed, in a few words
    share: float  # of the thread's samples
    seconds: float  # share x the capture's sampled duration
    ms_per_step: float | None = None  # share x the loop's host step (report --steps)

    def to_json(self) -> dict[str, object]:
        return {
            "tid": self.tid,
            "thread": self.thread,
            "class": self.cls.value,
            "class_words": self.cls.words,
            "where": self.where or None,
            "evidence": self.evidence,
            "share": round(self.share, 4),
            "seconds": round(self.seconds, 4),
            "ms_per_step": None if self.ms_per_step is None else round(self.ms_per_step, 3),
        }


@dataclass(frozen=True)
class Blocking:
    """Where threads block (rows), and each blocked stack's reason (for the flame graph)."""

    sites: tuple[BlockedSite, ...]
    reasons: Mapping[int, Reason]


def blocking_of(
    profile: Profile, rules: WaitRules, step_ms: float | None = None, first_tid: int | None = None
) -> Blocking:
    """Both at once: the reasons are read in one pass and the rows summed from them."""
    if not profile.sampling.mode.reads_states:
        return Blocking((), {})
    reasons = blocked_reasons(profile, rules)
    rows = where_threads_block(profile, rules, step_ms, reasons, first_tid=first_tid)
    return Blocking(rows, reasons)


def where_threads_block(
    profile: Profile,
    rules: WaitRules,
    step_ms: float | None = None,
    reasons: Mapping[int, Reason] | None = None,
    min_share: float = MIN_SHARE,
    first_tid: int | None = None,
) -> tuple[BlockedSite, ...]:
    """Every thread's blocked (off-CPU) time grouped by class, place and evidence, largest
    first within each thread; `first_tid` (the loop thread) first, then threads by their
    blocked time. Empty for a profile that read
    no thread states (gil, cpu and wall modes cannot tell blocked from running)."""
    if not profile.sampling.mode.reads_states:
        return ()
    found = blocked_reasons(profile, rules) if reasons is None else reasons
    totals = profile.state_totals()
    per_thread: dict[int, float] = {}
    groups: dict[tuple[int, WaitClass, str, str], float] = {}
    for index, count in totals.items():
        stack = profile.stacks[index]
        per_thread[stack.tid] = per_thread.get(stack.tid, 0.0) + count
        reason = found.get(index) if stack.state is ThreadState.IDLE else None
        if reason is None:
            continue
        key = (stack.tid, reason.cls, reason.where, reason.evidence)
        groups[key] = groups.get(key, 0.0) + count
    duration = profile.sampling.duration_s
    rows: list[BlockedSite] = []
    folded: dict[tuple[int, WaitClass], float] = {}
    for (tid, cls, where, evidence), count in groups.items():
        share = count / per_thread[tid] if per_thread.get(tid) else 0.0
        if share < min_share:
            folded[(tid, cls)] = folded.get((tid, cls), 0.0) + share
            continue
        rows.append(_site(profile, tid, cls, where, evidence, share, duration, step_ms))
    for (tid, cls), share in folded.items():
        if share >= min_share:  # many small places of one class: one row, not none
            rows.append(_site(profile, tid, cls, "", "several places", share, duration, step_ms))
    blocked = {tid: sum(r.share for r in rows if r.tid == tid) for tid in per_thread}
    rows.sort(
        key=lambda r: (r.tid != first_tid, -blocked[r.tid], r.tid, -r.share, r.cls.value, r.where)
    )
    return tuple(rows)


def _site(
    profile: Profile,
    tid: int,
    cls: WaitClass,
    where: str,
    evidence: str,
    share: float,
    duration: float,
    step_ms: float | None,
) -> BlockedSite:
    name = profile.threads.get(tid) or f"tid {tid}"
    ms = None if step_ms is None else share * step_ms
    return BlockedSite(tid, name, cls, where, evidence, share, share * duration, ms)


@dataclass(frozen=True, slots=True)
class StepPart:
    """One part of the loop's step: host work or a wait class, its share and ms per step."""

    key: str  # "host", "gil", "native", "unplaced" or a WaitClass value
    words: str
    share: float
    ms: float

    def to_json(self) -> dict[str, object]:
        return {
            "part": self.key,
            "words": self.words,
            "share": round(self.share, 4),
            "ms_per_step": round(self.ms, 3),
        }


STEP_PART_MIN = 0.005  # parts below this share of the loop's samples are left out


def step_parts(v: Verdict, min_share: float = STEP_PART_MIN) -> tuple[StepPart, ...]:
    """The loop's host step p50 split by the loop thread's shares: host work, the GIL wait,
    native host work and every wait class, largest first. Empty in gil mode (it records the
    GIL holder only, so the loop's waits are not seen)."""
    loop = v.loop
    if loop.gil_wait is None or loop.device_wait is None:
        return ()
    parts = [
        ("host", "host Python", loop.held),
        ("gil", WaitClass.GIL.words, loop.gil_wait),
        ("native", "native (host)", loop.native or 0.0),
        (WaitClass.DEVICE.value, WaitClass.DEVICE.words, loop.device_wait.value),
    ]
    if loop.peer_wait is not None:
        parts.append((WaitClass.PEERS.value, WaitClass.PEERS.words, loop.peer_wait.value))
    if loop.unplaced is not None:
        parts.append(("unplaced", "native, not placed", loop.unplaced.value))
    parts += [
        (b.cls, WaitClass(b.cls).words, b.share.value)
        for b in loop.blocked_by_class
        if b.cls not in (WaitClass.DEVICE.value, WaitClass.PEERS.value)
    ]
    step = v.host_step_p50_ms
    return tuple(
        StepPart(key, words, share, share * step)
        for key, words, share in sorted(parts, key=lambda p: -p[2])
        if share >= min_share
    )
