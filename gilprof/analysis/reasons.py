"""Every blocked reading's reason (gilprof.wait_classes), for a whole profile at once.

Who ended a wait is known only once it has ended, so the reader gives each reading the
waker of the thread's last wait that ended at the same call site, and the first wait at a
site names none. A reading of the same thread at the same site (the same stack and the same
evidence but the waker) is that site's wait: it takes the waker its site's other readings
name most (by time). The waker's thread is named by the profile's thread names.

A wait ended by another thread of the process (a lock, a condition, a queue) waits for what
that thread waits for where the waker itself mostly waits for the device or for peers
(a loop that waits on an Event its device thread sets once the device is done): the
reading takes the waker's class, with both in its evidence. One hop only.
"""

from __future__ import annotations

from gilprof.model import Frame, ThreadState
from gilprof.profile import Profile
from gilprof.wait_classes import (
    WAKER,
    Reason,
    WaitClass,
    WaitRules,
    classify_blocked,
    evidence_of,
)

CHAIN_SHARE = 0.5  # a waker that waits this share of its blocked time for the device or peers
_CHAINED = (WaitClass.THREAD, WaitClass.INPUT)


def _is_waker(frame: Frame) -> bool:
    found = evidence_of(frame)
    return found is not None and found.kind == WAKER


def blocked_reasons(profile: Profile, rules: WaitRules) -> dict[int, Reason]:
    """Stack index -> the reason of each blocked (IDLE) stack of the profile."""
    names = dict(profile.threads)
    totals = profile.state_totals()
    sites: dict[tuple[int, tuple[Frame, ...]], dict[Frame, float]] = {}
    idle: dict[int, tuple[int, tuple[Frame, ...], Frame | None]] = {}
    for index, stack in enumerate(profile.stacks):
        if stack.state is not ThreadState.IDLE:
            continue
        frames = profile.stack_frames(index)
        waker = next((f for f in frames if _is_waker(f)), None)
        site = tuple(f for f in frames if f is not waker)
        idle[index] = (stack.tid, site, waker)
        if waker is not None:
            per = sites.setdefault((stack.tid, site), {})
            per[waker] = per.get(waker, 0.0) + totals.get(index, 0.0) + 1e-9
    out: dict[int, Reason] = {}
    for index, (tid, site, waker) in idle.items():
        if waker is None:
            seen = sites.get((tid, site))
            if seen:
                waker = max(seen, key=lambda f: seen[f])
        frames = site + ((waker,) if waker is not None else ())
        out[index] = classify_blocked(frames, ThreadState.IDLE, rules, names)
    return _follow_wakers(out, idle, totals)


def _follow_wakers(
    reasons: dict[int, Reason],
    idle: dict[int, tuple[int, tuple[Frame, ...], Frame | None]],
    totals: dict[int, float],
) -> dict[int, Reason]:
    blocked: dict[int, dict[WaitClass, float]] = {}
    for index, reason in reasons.items():
        per = blocked.setdefault(idle[index][0], {})
        per[reason.cls] = per.get(reason.cls, 0.0) + totals.get(index, 0.0)
    waits: dict[int, WaitClass] = {}
    for tid, per in blocked.items():
        total = sum(per.values())
        for cls in (WaitClass.DEVICE, WaitClass.PEERS):
            if total and per.get(cls, 0.0) >= CHAIN_SHARE * total:
                waits[tid] = cls
    if not waits:
        return reasons
    out = dict(reasons)
    for index, reason in reasons.items():
        chained = waits.get(reason.waker_tid)
        if chained and reason.cls in _CHAINED and reason.waker_tid != idle[index][0]:
            words = chained.words.removeprefix("waiting ")
            out[index] = Reason(
                chained, f"{reason.evidence}, which mostly waits {words}", reason.waker_tid,
                reason.where,
            )  # fmt: skip
    return out
