"""Where the step loop's thread spends its time: which thread it is, and its split into host
work and waiting for the device (gilprof.analysis.verdict decides from this).

- host work: holding the GIL, waiting for it, or running native code without it;
- waiting for the device: a frame named like a device wait (`synchronize`, `Event.wait`,
  `Condition.wait`, CUDA synchronize calls, and the recipe's `[steps] device_wait`), or, in
  contention mode, a thread asleep or in a lock/condition wait (not in I/O);
- other waits: I/O (select, poll, recv, read) and unclassified samples.

Shares are of the loop thread's own samples (contention and wall mode record every thread at
every tick; gil mode only the holder, so its shares are of ticks), each with a batch-means
interval: the windows are regrouped into at most BATCHES contiguous batches, long enough to be
nearly independent, and the share's standard error is the spread of the batch shares (the
classic batch-means method, with a t quantile on batches - 1 degrees of freedom).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gilprof.analysis.reasons import blocked_reasons
from gilprof.errors import UsageError
from gilprof.model import Frame, Mode, ThreadState
from gilprof.native_classes import NativeClass, NativeRules, native_class_of
from gilprof.profile import Profile
from gilprof.stats import Estimate, batch_windows, t_quantile
from gilprof.wait_classes import (
    DEVICE_SYNC_FUNCTIONS,
    Reason,
    WaitClass,
    WaitRules,
    classify_blocked,
)

CONFIDENCE = 0.95
# Few, long batches: compare's windows-as-batches estimator (ratio_mean_ci) inflates its
# interval by the windows' lag-1 autocorrelation, which 10 short windows of a drifting loop
# estimate so high that the interval spans 0-100%; batching windows removes that correlation.
BATCHES = 5


def batch_share(numerators: list[float], denominators: list[float]) -> Estimate:
    """sum(num)/sum(den) with a batch-means interval over at most BATCHES batches."""
    num, den = batch_windows(numerators, denominators, BATCHES)
    total = math.fsum(den)
    value = math.fsum(num) / total
    count = len(num)
    if count < 2:
        return Estimate(value, -math.inf, math.inf, math.inf, 0.0)
    # Linearized ratio variance, batches weighted by their denominators.
    residual_sq = math.fsum(((n - value * d) / total) ** 2 for n, d in zip(num, den, strict=True))
    stderr = math.sqrt(count / (count - 1) * residual_sq)
    half = t_quantile(0.5 + CONFIDENCE / 2, count - 1) * stderr
    return Estimate(value, value - half, value + half, stderr, float(count - 1))


# Frames that block until the device is done (gilprof.wait_classes, defined once there):
# CUDA synchronize calls, not `Condition.wait`/`Event.wait`, which wait for whoever sets them.
DEVICE_WAIT_FUNCTIONS = DEVICE_SYNC_FUNCTIONS


NO_TID = -1  # a named thread that gil mode never saw (it records only the GIL holder)


@dataclass(frozen=True)
class LoopThread:
    tid: int
    name: str
    chosen_by: str  # how the thread was chosen, in words


@dataclass(frozen=True)
class BlockedShare:
    """The loop's time in one wait class (gilprof.wait_classes; device and peers include
    their native spin), and the evidence seen most often for it."""

    cls: str
    share: Estimate
    evidence: str


@dataclass(frozen=True)
class LoopTime:
    """The loop thread's wall time split; shares of its samples (gil mode: of all ticks)."""

    thread: LoopThread
    mode: Mode
    busy: Estimate  # host work (gil mode: the held share, a lower bound)
    device_wait: Estimate | None  # None in gil mode: not recorded
    held: float
    gil_wait: float | None
    native: float | None
    other_wait: float | None  # I/O waits and unclassified samples
    utilization: float | None  # gil mode: share of ticks with any GIL holder
    samples: int
    windows: int
    # states and contention mode: waiting for other ranks (a collective's progress loop)
    peer_wait: Estimate | None = None
    # native time that could not be placed (no locator, or no sample near the reading):
    # neither host work nor a wait, and no verdict may call it host work
    unplaced: Estimate | None = None
    # the loop's native time by class (gilprof.native_classes), shares of its samples
    native_by_class: tuple[tuple[str, float], ...] = ()
    # every wait class the loop spent time in, largest first
    blocked_by_class: tuple[BlockedShare, ...] = ()

    def blocked(self, cls: str) -> BlockedShare | None:
        return next((b for b in self.blocked_by_class if b.cls == cls), None)


def _label(profile: Profile, tid: int) -> str:
    return profile.threads.get(tid) or f"tid {tid}"


def _is_device_wait(frames: Sequence[Frame], state: ThreadState, names: Sequence[str]) -> bool:
    """A running reading inside a named device-sync function (wall mode has no states).
    A blocked reading is classed from its evidence instead (gilprof.wait_classes): being
    idle is no evidence of the device."""
    if state in (ThreadState.HELD, ThreadState.WAITING, ThreadState.IDLE):
        return False  # holding or wanting the GIL, even inside a wait function: host work
    return any(f.matches(name) for f in frames for name in names)


def native_class(frames: Sequence[Frame], mode: Mode, rules: NativeRules) -> NativeClass:
    """What a native reading's time is: the class its locator frame carries (states mode);
    in contention mode, py-spy's native frames below the innermost Python frame, classed by
    their library (host work unless a device or peer library is among them). A states-mode
    reading with no locator frame (a profile from before the locator) is unplaced."""
    if frames:
        cls = native_class_of(frames[-1])
        if cls is not None:
            return cls
    if mode is not Mode.CONTENTION:
        return NativeClass.UNPLACED
    innermost = max((i for i, f in enumerate(frames) if f.is_python), default=-1)
    for frame in frames[innermost + 1 :]:
        if frame.file and not frame.is_python:
            cls = rules.library_class(frame.basename)
            if cls is not NativeClass.HOST:
                return cls
    return NativeClass.HOST


def _busy_state(state: ThreadState) -> bool:
    return state in (
        ThreadState.HELD,
        ThreadState.WAITING,
        ThreadState.NATIVE,
        ThreadState.ACTIVE,
        ThreadState.UNKNOWN,
    )


def _thread_samples(profile: Profile) -> dict[int, float]:
    out: dict[int, float] = {}
    for index, count in profile.state_totals().items():
        tid = profile.stacks[index].tid
        out[tid] = out.get(tid, 0) + count
    return out


def _watched_tids(profile: Profile, watch: Sequence[str]) -> set[int]:
    tids = set()
    for index in profile.state_totals():
        stack = profile.stacks[index]
        if stack.tid not in tids and any(
            f.matches(w) for f in profile.stack_frames(index) for w in watch
        ):
            tids.add(stack.tid)
    return tids


def choose_loop_thread(
    profile: Profile,
    pattern: str | None,
    recipe_pattern: str | None,
    watch: Sequence[str],
    device_wait: Sequence[str],
) -> LoopThread:
    """The regex's thread; else the recipe's; else the busiest thread running the loop.

    The heuristic is measured, not named: the thread with the largest busy share (gil mode:
    held share) among threads whose stacks contain a watched function (the functions the
    loop runs each step: recipe, --watch and the default watch list); among all threads
    when none does. Device waits do not qualify a thread: helper threads wait too.
    """
    counts = _thread_samples(profile)
    labels = {tid: _label(profile, tid) for tid in counts}
    for given, source in ((pattern, "--loop-thread"), (recipe_pattern, "the recipe's loop_thread")):
        if not given:
            continue
        try:
            regex = re.compile(given)
        except re.error as exc:
            raise UsageError(f"{source} {given!r} is not a valid regex: {exc}") from None
        matched = [tid for tid, name in labels.items() if regex.search(name)]
        if not matched and profile.sampling.mode is Mode.GIL:
            # gil mode records only the holder: a thread that never held the GIL was not
            # seen, which is no proof that it does not exist (a loop waiting for the device
            # holds it ~1% of the time). Its held share is 0 of the ticks: the verdict says
            # what that leaves undetermined.
            return LoopThread(
                NO_TID, given, f"{source} {given!r}: never seen holding the GIL (gil mode)"
            )
        if not matched:
            known = ", ".join(sorted(set(labels.values()))) or "none"
            raise UsageError(f"{source} {given!r} matches no sampled thread; threads: {known}")
        tid = max(matched, key=lambda t: (counts[t], -t))
        extra = f" ({len(matched)} matched; the most sampled)" if len(matched) > 1 else ""
        return LoopThread(tid, labels[tid], f"{source} {given!r}{extra}")
    if not counts:
        raise UsageError("the profile has no samples: no loop thread to judge")
    busy = _busy_counts(profile, device_wait)
    with_loop = _watched_tids(profile, tuple(watch))
    pool = [tid for tid in counts if tid in with_loop] or list(counts)

    def score(tid: int) -> float:
        return (
            busy.get(tid, 0) / counts[tid] if profile.sampling.mode is not Mode.GIL else counts[tid]
        )

    tid = max(pool, key=lambda t: (score(t), -t))
    why = "running a watched function" if tid in with_loop else "no thread ran a watched function"
    measure = "held share" if profile.sampling.mode is Mode.GIL else "busy share"
    return LoopThread(
        tid, labels[tid], f"largest {measure} among threads {why} (--loop-thread REGEX to choose)"
    )


def _busy_counts(profile: Profile, device_wait: Sequence[str]) -> dict[int, float]:
    out: dict[int, float] = {}
    mode, rules = profile.sampling.mode, NativeRules()
    reasons = blocked_reasons(profile, WaitRules(rules, tuple(device_wait)))
    for index, count in profile.state_totals().items():
        stack = profile.stacks[index]
        reason = reasons.get(index)
        kind, _cls, _e = _kind(
            profile.stack_frames(index), stack.state, mode, device_wait, rules, reason
        )
        if kind == "busy":
            out[stack.tid] = out.get(stack.tid, 0) + count
    return out


def _kind(
    frames: Sequence[Frame],
    state: ThreadState,
    mode: Mode,
    names: Sequence[str],
    rules: NativeRules,
    reason: Reason | None,
) -> tuple[str, NativeClass | None, str]:
    """busy / device / peers / unplaced / a blocked class (gilprof.wait_classes), a native
    reading's class, and a blocked reading's evidence in a few words."""
    cls = native_class(frames, mode, rules) if state is ThreadState.NATIVE else None
    if _is_device_wait(frames, state, names):
        return "device", cls, ""
    if cls is NativeClass.DEVICE:
        return "device", cls, ""
    if cls is NativeClass.PEERS:
        return "peers", cls, ""
    if cls is NativeClass.UNPLACED:
        return "unplaced", cls, ""
    if _busy_state(state):
        return "busy", cls, ""
    if state is ThreadState.IDLE:
        if reason is None:
            reason = classify_blocked(frames, state, WaitRules(rules, tuple(names)))
        kind = {WaitClass.DEVICE: "device", WaitClass.PEERS: "peers"}.get(
            reason.cls, reason.cls.value
        )
        where = (
            f" in {reason.where}" if reason.where and reason.where not in reason.evidence else ""
        )
        return kind, cls, reason.evidence + where
    return WaitClass.UNEXPLAINED.value, cls, str(state)


def loop_time(
    profile: Profile,
    thread: LoopThread,
    device_wait: Iterable[str] = DEVICE_WAIT_FUNCTIONS,
    rules: NativeRules | None = None,
    input_wait: Iterable[str] = (),
) -> LoopTime:
    """Split the loop thread's sampled time into host work and waits (device, peers), per
    window; native time that could not be placed is kept apart."""
    names = tuple(dict.fromkeys(device_wait))
    rules = rules or NativeRules()
    mode = profile.sampling.mode
    reasons = blocked_reasons(profile, WaitRules(rules, names, tuple(input_wait)))
    # stack index -> (busy / device / peers / unplaced / a blocked class, native class,
    # evidence), this thread
    kinds: dict[int, tuple[str, NativeClass | None, str]] = {}
    # blocked class -> {evidence: samples}; and per window, the samples of each such class
    blocked: dict[str, dict[str, float]] = {}
    blocked_num: dict[str, list[float]] = {}
    held_total = gil_wait = native = other = 0.0
    by_class: dict[str, float] = {}
    busy_num: list[float] = []
    device_num: list[float] = []
    peer_num: list[float] = []
    unplaced_num: list[float] = []
    dens: list[float] = []
    all_held: list[float] = []
    samples = 0.0
    for w, window in enumerate(profile.windows):
        b = d = p = u = n = h_all = 0.0
        for index, count in profile.state_weights(window).items():
            stack = profile.stacks[index]
            if stack.state is ThreadState.HELD:
                h_all += count
            if stack.tid != thread.tid:
                continue
            found = kinds.get(index)
            if found is None:
                found = kinds[index] = _kind(
                    profile.stack_frames(index), stack.state, mode, names, rules, reasons.get(index)
                )
            kind, cls, evidence = found
            n += count
            if kind not in ("busy", "unplaced"):  # device and peers: spins and blocks
                per = blocked.setdefault(kind, {})
                per[evidence] = per.get(evidence, 0.0) + count
                column = blocked_num.setdefault(kind, [0.0] * len(profile.windows))
                column[w] += count
            if cls is not None:
                by_class[cls.value] = by_class.get(cls.value, 0.0) + count
            if kind == "busy":
                b += count
                held_total += count if stack.state is ThreadState.HELD else 0
                gil_wait += count if stack.state is ThreadState.WAITING else 0
                native += count if stack.state is ThreadState.NATIVE else 0
            elif kind == "device":
                d += count
            elif kind == "peers":
                p += count
            elif kind == "unplaced":
                u += count
            else:
                other += count
        samples += n
        busy_num.append(b)
        device_num.append(d)
        peer_num.append(p)
        unplaced_num.append(u)
        all_held.append(h_all)
        # gil mode records only the holder: shares are of ticks, not of this thread's samples.
        dens.append(window.ticks if mode is Mode.GIL else n)
    usable = [i for i, den in enumerate(dens) if den > 0]
    if not usable:
        raise UsageError(f"the loop thread {thread.name!r} has no samples in the profile")

    def pick(values: list[float]) -> list[float]:
        return [values[i] for i in usable]

    den = pick(dens)
    busy = batch_share(pick(busy_num), den)
    total = sum(den)
    if mode is Mode.GIL:
        utilization = min(1.0, sum(pick(all_held)) / total)
        return LoopTime(
            thread,
            mode,
            busy,
            None,
            busy.value,
            None,
            None,
            None,
            utilization,
            round(samples),
            len(usable),
        )
    device = batch_share(pick(device_num), den)
    contention = mode.reads_states
    return LoopTime(
        thread,
        mode,
        busy,
        device,
        held_total / total if contention else 0.0,
        gil_wait / total if contention else None,
        native / total if contention else None,
        other / total,
        None,
        round(samples),
        len(usable),
        peer_wait=batch_share(pick(peer_num), den) if contention else None,
        unplaced=batch_share(pick(unplaced_num), den) if contention else None,
        native_by_class=tuple(
            (name, count / total) for name, count in sorted(by_class.items(), key=lambda kv: -kv[1])
        ),
        blocked_by_class=tuple(
            BlockedShare(
                kind,
                batch_share(pick(blocked_num[kind]), den),
                max(per, key=lambda e: per[e]) if per else "",
            )
            for kind, per in sorted(blocked.items(), key=lambda kv: -sum(kv[1].values()))
        ),
    )
