"""Across ranks: which rank paces a collective, and what it spends its step on.

In a synchronous collective every rank's step lasts as long as the slowest rank's: the others
arrive early and wait for it. So among ranks whose loops wait for peers (WaitClass.PEERS),
the one that waits least while the others wait is the one that paces them, and what it does
with the time the others spend waiting is what would shorten every rank's step.

Each rank's loop thread is chosen as `gilprof report` chooses it (gilprof.analysis.loop),
but where that thread never waits for peers and another thread does, the busiest thread that
waits in a collective is taken (a helper thread busier than the loop must not hide it). Its
wall time is split into host work (holding the GIL, waiting for it, native code), unplaced
native time and each blocked class (gilprof.wait_classes); in ms per step where the step
time is known (a steps log's mean host step: the loop's period), as shares otherwise.

The decision rests on the peer-wait intervals (batch means, gilprof.analysis.loop): a rank
is named only when its interval lies wholly below every other rank's, and every other rank
materially waits. Otherwise the answer is undetermined, with why and what would decide.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gilprof.analysis.loop import (
    DEVICE_WAIT_FUNCTIONS,
    LoopThread,
    LoopTime,
    choose_loop_thread,
    loop_time,
)
from gilprof.errors import UsageError
from gilprof.profile import Profile
from gilprof.stats import Estimate
from gilprof.wait_classes import WaitClass

MIN_PEER_WAIT = 0.05  # a rank whose peer-wait interval stays below this does not wait
PEERS = WaitClass.PEERS.value

HOST_WORDS = {
    "held": "host Python (holding the GIL)",
    "gil": "waiting for the GIL (host work: another thread holds it)",
    "native": "native code (host)",
    "running": "running (state not read)",
    "unplaced": "native code that could not be placed",
}
HOST_KEYS = frozenset({"held", "gil", "native", "running"})


def words(key: str) -> str:
    if key in HOST_WORDS:
        return HOST_WORDS[key]
    try:
        return WaitClass(key).words
    except ValueError:
        return key


@dataclass(frozen=True)
class Component:
    key: str  # held, gil, native, running, unplaced, or a wait class (gilprof.wait_classes)
    share: float  # of the loop thread's wall time
    ms: float | None  # per step, where the step time is known
    evidence: str = ""  # a blocked class: the evidence seen most often
    estimate: Estimate | None = None  # a blocked class: the share with its interval

    @property
    def words(self) -> str:
        return words(self.key)


@dataclass(frozen=True)
class RankLoop:
    rank: int | None
    label: str
    thread: str | None  # None: no loop could be judged (see note)
    chosen_by: str
    step_ms: float | None
    peers: Estimate | None  # None: the mode records no peer waits
    components: tuple[Component, ...]  # largest first; peers included
    note: str = ""

    def share(self, key: str) -> float:
        return next((c.share for c in self.components if c.key == key), 0.0)

    def ms(self, share: float) -> float | None:
        return None if self.step_ms is None else share * self.step_ms


@dataclass(frozen=True)
class Straggler:
    pacing: int | None  # the pacing rank; None: undetermined
    sentence: str  # the lead sentence: who paces, or undetermined and why
    shorten: str  # what would shorten everyone's step, or what would decide
    component: str | None  # the pacing rank's component that paces (its largest excess)
    loops: tuple[RankLoop, ...]
    determined: bool = False


def _name(rank: int | None, label: str) -> str:
    return f"rank {rank}" if rank is not None else label


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _interval(e: Estimate) -> str:
    if e.dof <= 0:
        return f"{_pct(e.value)} [no interval]"
    return f"{_pct(e.value)} [{_pct(max(0.0, e.low))}-{_pct(min(1.0, e.high))}]"


def _amount(loop: RankLoop, share: float) -> str:
    ms = loop.ms(share)
    return f"{_pct(share)} of the step" if ms is None else f"{ms:.1f} ms per step ({_pct(share)})"


def _components(lt: LoopTime, step_ms: float | None) -> tuple[Component, ...]:
    parts: dict[str, tuple[float, str, Estimate | None]] = {}
    held, gil, native = lt.held, lt.gil_wait or 0.0, lt.native or 0.0
    for key, value in (
        ("held", held),
        ("gil", gil),
        ("native", native),
        ("running", max(0.0, lt.busy.value - held - gil - native)),
        ("unplaced", lt.unplaced.value if lt.unplaced else 0.0),
    ):
        if value > 1e-9:
            parts[key] = (value, "", None)
    for b in lt.blocked_by_class:
        parts[b.cls] = (b.share.value, b.evidence, b.share)
    if lt.peer_wait is not None and PEERS not in parts:
        parts[PEERS] = (lt.peer_wait.value, "", lt.peer_wait)
    return tuple(
        Component(k, v, None if step_ms is None else v * step_ms, e, est)
        for k, (v, e, est) in sorted(parts.items(), key=lambda kv: -kv[1][0])
    )


def _peers_of(lt: LoopTime) -> Estimate | None:
    found = lt.blocked(PEERS)
    return found.share if found is not None else lt.peer_wait


def _pick_thread(
    profile: Profile, watch: Sequence[str], loop_thread: str | None
) -> tuple[LoopThread, LoopTime]:
    chosen = choose_loop_thread(profile, loop_thread, None, watch, DEVICE_WAIT_FUNCTIONS)
    lt = loop_time(profile, chosen)
    if loop_thread or not profile.sampling.mode.reads_states:
        return chosen, lt
    waiting: list[LoopTime] = []
    for tid, name in sorted(profile.threads.items()):
        try:
            other = lt if tid == chosen.tid else loop_time(profile, LoopThread(tid, name, ""))
        except UsageError:
            continue
        found = _peers_of(other)
        if found is not None and found.value > 0:
            waiting.append(other)
    # the thread in the collective, seen throughout the profile (a short-lived busy thread
    # has the largest busy share and no interval)
    most = max((w.windows for w in waiting), default=0)
    if not waiting or (lt in waiting and lt.windows >= most):
        return chosen, lt
    best = max(waiting, key=lambda w: (w.windows, w.busy.value))
    thread = LoopThread(
        best.thread.tid,
        best.thread.name or f"tid {best.thread.tid}",
        f"the busiest thread waiting for peers throughout the profile (the report's choice, "
        f"{chosen.name!r}, is not; --loop-thread REGEX to choose)",
    )
    return thread, loop_time(profile, thread)


def rank_loop(
    profile: Profile,
    watch: Sequence[str],
    step_ms: float | None = None,
    loop_thread: str | None = None,
) -> RankLoop:
    rank, label = profile.target.rank, profile.label
    try:
        thread, lt = _pick_thread(profile, watch, loop_thread)
    except UsageError as exc:
        return RankLoop(rank, label, None, "", step_ms, None, (), str(exc))
    note = ""
    if not profile.sampling.mode.reads_states:
        note = (
            f"{profile.sampling.mode} mode records no thread states: its peer waits are not seen "
            "(sample with --mode states, the default)"
        )
    return RankLoop(
        rank,
        label,
        thread.name,
        thread.chosen_by,
        step_ms,
        _peers_of(lt) if profile.sampling.mode.reads_states else None,
        _components(lt, step_ms),
        note,
    )


def _step_of(profile: Profile, step_ms: float | Mapping[int, float] | None) -> float | None:
    if step_ms is None or isinstance(step_ms, (int, float)):
        return step_ms
    rank = profile.target.rank
    return step_ms.get(rank) if rank is not None else None


def pacing_rank(
    profiles: Sequence[Profile],
    *,
    watch: Sequence[str] = (),
    step_ms: float | Mapping[int, float] | None = None,
    loop_thread: str | None = None,
) -> Straggler:
    """The rank that paces the job's collective, or undetermined with why."""
    loops = tuple(rank_loop(p, watch, _step_of(p, step_ms), loop_thread) for p in profiles)
    return decide(loops)


def decide(loops: tuple[RankLoop, ...]) -> Straggler:
    judged = [lp for lp in loops if lp.peers is not None]
    if len(judged) < 2:
        missing = "; ".join(
            f"{_name(lp.rank, lp.label)}: {lp.note or 'no loop'}"
            for lp in loops
            if lp.peers is None
        )
        return Straggler(
            None,
            f"pacing rank undetermined: {len(judged)} of {len(loops)} ranks have a loop whose "
            "peer waits were recorded" + (f" ({missing})" if missing else ""),
            "what would decide: every rank sampled in states mode (the default), "
            "`gilprof attach --ranks all`, then `gilprof report` of them all",
            None,
            loops,
        )
    ordered = sorted(judged, key=lambda lp: lp.peers.value if lp.peers else 0.0)
    waits = ", ".join(
        f"{_name(lp.rank, lp.label)} {_interval(lp.peers)}" for lp in ordered if lp.peers
    )
    if not any(lp.peers is not None and lp.peers.low >= MIN_PEER_WAIT for lp in judged):
        return Straggler(
            None,
            f"pacing rank undetermined: no rank's loop is seen waiting for peers ({waits})",
            "what would decide: a collective in the loops (peer waits are seen in "
            "torch.distributed frames, MPI/NCCL/gloo native code, sockets to other ranks); "
            "without one no rank paces the others, and each rank's `gilprof report --steps` "
            "says what its own step is bound by",
            None,
            loops,
        )
    first, others = ordered[0], ordered[1:]
    assert first.peers is not None
    floor = min(o.peers.low for o in others if o.peers is not None)
    if first.peers.high >= floor or floor < MIN_PEER_WAIT:
        level = [first, *(o for o in others if o.peers and o.peers.low <= first.peers.high)]
        names = ", ".join(_name(lp.rank, lp.label) for lp in level)
        why = (
            f"{names} wait for peers about the same, within their sampling error"
            if len(level) > 1
            else f"not every other rank waits for peers (at least {_pct(MIN_PEER_WAIT)})"
        )
        bare = [lp for lp in judged if lp.peers is not None and lp.peers.dof <= 0]
        if bare:
            why = (
                ", ".join(_name(lp.rank, lp.label) for lp in bare)
                + ": no interval on the peer wait (the loop thread seen in fewer than 2 "
                "sampling windows)"
            )
        return Straggler(
            None,
            f"pacing rank undetermined: {why} (waiting for peers: {waits})",
            "what would decide: a longer sample (more windows narrow the intervals, e.g. -d 60); "
            "if the waits stay level, no one rank paces the collective (the ranks take turns, "
            "or they share what slows them: the cores, the network)",
            None,
            loops,
        )
    return _named(first, others, loops, waits)


def _named(
    first: RankLoop, others: Sequence[RankLoop], loops: tuple[RankLoop, ...], waits: str
) -> Straggler:
    assert first.peers is not None
    keys = {c.key for lp in (first, *others) for c in lp.components if c.key != PEERS}

    def excess(key: str) -> float:
        return first.share(key) - statistics.median(o.share(key) for o in others)

    pacer = max(keys, key=lambda k: (excess(k), first.share(k)), default=None)
    largest = next((c for c in first.components if c.key != PEERS), None)
    name = _name(first.rank, first.label)
    rest = ", ".join(f"{_name(o.rank, o.label)} {_interval(o.peers)}" for o in others if o.peers)
    sentence = (
        f"{name} paces the collective: its loop ({first.thread}) waits for peers "
        f"{_interval(first.peers)} of its time while the others wait ({rest})"
    )
    if largest is not None:
        sentence += (
            f"; it spends its step most on {largest.words} ({_amount(first, largest.share)})"
        )
    if pacer is None or excess(pacer) <= 0:
        return Straggler(
            first.rank,
            sentence + ".",
            f"shortening {name}'s step shortens every rank's step; no one part of it exceeds "
            "the other ranks' (its time may go to work they do too, only slower)",
            None,
            loops,
            True,
        )
    next_rank = others[0]
    gap = (next_rank.peers.value if next_rank.peers else 0.0) - first.peers.value
    other_share = statistics.median(o.share(pacer) for o in others)
    host = " (host work)" if pacer in HOST_KEYS else ""
    shorten = (
        f"{name}'s {words(pacer)}{host}, {_amount(first, first.share(pacer))}, paces the "
        f"collective (the others: {_pct(other_share)}): shortening it shortens every rank's "
        f"step, by up to {_amount(next_rank, gap)} before "
        f"{_name(next_rank.rank, next_rank.label)} paces instead"
    )
    return Straggler(first.rank, sentence + ".", shorten + ".", pacer, loops, True)
