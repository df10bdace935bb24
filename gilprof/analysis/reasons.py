"""Every blocked reading's reason (gilprof.wait_classes), for a whole profile at once.

Who ended a wait is known only once it has ended, so the reader gives each reading the
waker of the thread's last wait that ended at the same call site, and the first wait at a
site names none. A reading of the same thread at the same site (the same stack and the same
evidence but the waker) is that site's wait: it takes the waker its site's other readings
name most (by time). The waker's thread is named by the profile's thread names.
"""

from __future__ import annotations

from gilprof.model import Frame, ThreadState
from gilprof.profile import Profile
from gilprof.wait_classes import WAKER, Reason, WaitRules, classify_blocked, evidence_of


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
    return out
