"""Host-bound or device-bound, decided from where the step loop's thread spends its time.

An iteration log cannot tell: under an overlap scheduler a loop paced by the device logs
device ~ host just as a loop paced by the host does. The loop thread's wall time can. It
splits into

- host work: holding the GIL, waiting for it, or running native code without it;
- waiting for the device: only on evidence of it (a CUDA synchronize frame, the recipe's
  `[steps] device_wait`, a device library); other blocked time is classed from its evidence
  (gilprof.wait_classes): sleeping, waiting for input, peers, I/O, another thread, or
  unexplained, which counts against a host verdict and leaves it undetermined.

Shares are of the loop thread's own samples (contention and wall mode record every thread
at every tick), each with a batch-means interval over the sampling windows
(gilprof.stats.ratio_mean_ci), so the decision margin comes from the sampling error:

- **device**: the device-wait share's interval lies at or above DEVICE_MATERIAL (25%);
- **host**: its estimate is below DEVICE_NEGLIGIBLE (10%), its interval rules out 25%, and
  the busy share's lower bound is at least HOST_MOST (50%);
- **mixed**: the device-wait interval lies at or above 10% but not wholly above 25%;
- **undetermined**: anything else, with the reason and the command that would decide.

gil mode records only the GIL holder: the loop's held share H is a lower bound of its host
work and 1 - H an upper bound of its device wait, so gil mode says **host** only when H's
lower bound reaches 1 - DEVICE_NEGLIGIBLE (90%) and is otherwise undetermined.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from gilprof.analysis.loop import (
    DEVICE_WAIT_FUNCTIONS,
    LoopTime,
    choose_loop_thread,
    loop_time,
)
from gilprof.errors import UsageError
from gilprof.native_classes import NOT_PLACED
from gilprof.profile import Profile
from gilprof.stats import Estimate
from gilprof.wait_classes import WaitClass

HOST, DEVICE, PEERS, MIXED, UNDETERMINED = "host", "device", "peers", "mixed", "undetermined"
INPUT, SLEEP = WaitClass.INPUT.value, WaitClass.SLEEP.value
DEVICE_MATERIAL = 0.25  # waits for the device at least this share of the step: device-bound
DEVICE_NEGLIGIBLE = 0.10  # waits less: the device does not pace the loop
HOST_MOST = 0.50  # busy on the host for most of the step


BOUND_WORDS = {
    HOST: "host-bound",
    DEVICE: "device-bound",
    PEERS: "waiting for peers",
    INPUT: "waiting for input",
    SLEEP: "sleeping",
    MIXED: "mixed (host and device)",
    UNDETERMINED: "undetermined",
}


@dataclass(frozen=True)
class Verdict:
    bound: str
    thread: str
    busy_share: float
    device_wait_share: float | None
    host_step_p50_ms: float
    device_step_p50_ms: float | None
    reason: str
    command: str | None  # what would decide it (undetermined), or None
    loop: LoopTime
    gpu_busy: float | None = None  # NVML's busy share of the rank's GPU, where read
    gpu_note: str = ""  # the GPU's evidence in one line, or why there is none

    @property
    def headline(self) -> str:
        """One line: the bound, the loop thread and its shares."""
        device = (
            ""
            if self.device_wait_share is None
            else f", waiting for the device {_pct(self.device_wait_share)}"
        )
        what = BOUND_WORDS[self.bound]
        busy = "held the GIL" if self.device_wait_share is None else "busy on the host"
        return (
            f"{what}: loop thread {self.thread} {busy} {_pct(self.busy_share)}{device}; "
            f"host step p50 {self.host_step_p50_ms:.1f} ms"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "bound": self.bound,
            "thread": self.thread,
            "busy_share": round(self.busy_share, 4),
            "device_wait_share": (
                None if self.device_wait_share is None else round(self.device_wait_share, 4)
            ),
            "host_step_p50_ms": round(self.host_step_p50_ms, 3),
            "device_step_p50_ms": (
                None if self.device_step_p50_ms is None else round(self.device_step_p50_ms, 3)
            ),
            "reason": self.reason,
            "command": self.command,
            "thread_chosen_by": self.loop.thread.chosen_by,
            "mode": str(self.loop.mode),
            "busy_interval": _interval_json(self.loop.busy),
            "device_wait_interval": (
                None if self.loop.device_wait is None else _interval_json(self.loop.device_wait)
            ),
            "peer_wait_share": (
                None if self.loop.peer_wait is None else round(self.loop.peer_wait.value, 4)
            ),
            "unplaced_native_share": (
                None if self.loop.unplaced is None else round(self.loop.unplaced.value, 4)
            ),
            "native_by_class": {name: round(share, 4) for name, share in self.loop.native_by_class},
            "gpu_busy_share": None if self.gpu_busy is None else round(self.gpu_busy, 4),
            "gpu": self.gpu_note or None,
        }


def _interval_json(e: Estimate) -> list[float | None]:
    return [
        None if not math.isfinite(e.low) else round(max(0.0, e.low), 4),
        None if not math.isfinite(e.high) else round(min(1.0, e.high), 4),
    ]


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def _ci(e: Estimate) -> str:
    if not math.isfinite(e.low):
        return "no interval: fewer than 2 windows"
    return f"95% CI {_pct(max(0.0, e.low))}-{_pct(min(1.0, e.high))}"


def _native_parts(loop: LoopTime) -> str:
    named = ", ".join(f"{cls} {_pct(share)}" for cls, share in loop.native_by_class if share)
    return f"native {_pct(loop.native or 0.0)} host work" + (
        f" [native by class: {named}]" if named else ""
    )


def _decide_states(loop: LoopTime, name: str, native_note: str) -> tuple[str, str, str | None]:
    """(bound, reason, command) from a loop time that records every state."""
    busy = loop.busy
    device = loop.device_wait
    assert device is not None
    zero = Estimate(0.0, 0.0, 0.0, 0.0, 0.0)
    peers = loop.peer_wait or zero
    unplaced = loop.unplaced or zero
    parts = [f"busy on the host {_pct(busy.value)} ({_ci(busy)})"]
    if loop.gil_wait is not None:
        parts.append(
            f"held {_pct(loop.held)}, waiting for the GIL {_pct(loop.gil_wait)}, "
            + _native_parts(loop)
        )
    parts.append(f"waiting for the device {_pct(device.value)} ({_ci(device)})")
    if peers.value:
        parts.append(f"waiting for peers {_pct(peers.value)} ({_ci(peers)})")
    if unplaced.value:
        parts.append(f"native, not placed {_pct(unplaced.value)}")
    for blocked in loop.blocked_by_class:  # each other blocked class, from its evidence
        if blocked.cls not in (DEVICE, PEERS) and blocked.share.value >= 0.005:
            parts.append(f"{WaitClass(blocked.cls).words} {_pct(blocked.share.value)}")
    head = f"{name}: " + "; ".join(parts)
    # Native time that could not be placed may be a device or peer wait: it counts
    # against every host verdict, never for one.
    unknown = unplaced.value
    if not math.isfinite(device.low):
        return (
            UNDETERMINED,
            f"{head}: undetermined (one sampling window gives no interval)",
            ("sample longer than two windows (-d at least 2x --window)"),
        )
    if device.low >= DEVICE_MATERIAL and device.value >= peers.value:
        return (
            DEVICE,
            (
                f"{head}: it waits for the device at least {_pct(DEVICE_MATERIAL)} of the "
                "time, so the device paces the step: device-bound"
            ),
            None,
        )
    if math.isfinite(peers.low) and peers.low >= DEVICE_MATERIAL:
        return (
            PEERS,
            (
                f"{head}: it waits for other ranks (in a collective's progress loop) at least "
                f"{_pct(DEVICE_MATERIAL)} of the time: a slower peer paces this rank, so look "
                "at that rank (gilprof attach --rank N) before this one's host work"
            ),
            None,
        )
    for bound_class, words in (
        (
            INPUT,
            "work handed in (a queue fed by another thread, a client's socket): arrivals "
            "pace the step, so host savings shorten a request's latency, not throughput",
        ),
        (SLEEP, "a timer its own code chose (a sleep or back-off): the loop paces itself"),
    ):
        share = loop.blocked(bound_class)
        if (
            share is not None
            and math.isfinite(share.share.low)
            and share.share.low >= DEVICE_MATERIAL
        ):
            return (
                bound_class,
                (
                    f"{head}: it waits for {words} at least {_pct(DEVICE_MATERIAL)} of the "
                    f"time ({share.evidence}): {BOUND_WORDS[bound_class]}"
                ),
                None,
            )
    unexplained = [b for b in loop.blocked_by_class if b.cls not in (DEVICE, PEERS, INPUT, SLEEP)]
    blocked_other = sum(b.share.value for b in unexplained)
    waits = device.value + peers.value
    if (
        device.value + unknown + blocked_other < DEVICE_NEGLIGIBLE
        and device.high + unknown + blocked_other < DEVICE_MATERIAL
        and peers.high + unknown < DEVICE_MATERIAL
        and busy.low >= HOST_MOST
    ):
        return (
            HOST,
            (
                f"{head}: it is busy on the host for most of the step and waits for the "
                f"device under {_pct(DEVICE_NEGLIGIBLE)}, the intervals of its device and peer "
                f"waits (with any native time not placed) ruling out {_pct(DEVICE_MATERIAL)}: "
                "host-bound"
            ),
            None,
        )
    if device.low >= DEVICE_NEGLIGIBLE:
        return (
            MIXED,
            (
                f"{head}: it waits for the device for part of the step "
                f"({_pct(DEVICE_NEGLIGIBLE)}-{_pct(DEVICE_MATERIAL)}): both sides pace it: mixed"
            ),
            None,
        )
    if unexplained and blocked_other >= DEVICE_NEGLIGIBLE:
        top = unexplained[0]
        return (
            UNDETERMINED,
            (
                f"{head}: it is blocked {_pct(blocked_other)} of the time where the evidence "
                f"names no device, peer, input or sleep: mostly {top.cls} "
                f"({_pct(top.share.value)}: {top.evidence or 'no evidence'}): undetermined"
            ),
            (
                "name the wait in a recipe ([steps] device_wait or input_wait, or a [native] "
                "library), or sample as root so the kernel's wake-up events name who ends it"
            ),
        )
    if unknown >= DEVICE_NEGLIGIBLE / 2:
        why = native_note or (
            "the thread was off its CPU at those readings, or the profile was recorded "
            "without the native locator"
        )
        return (
            UNDETERMINED,
            (
                f"{head}: {_pct(unknown)} of its time ran native code that could not be placed, "
                f"which may be host work or a wait for the device or peers: undetermined ({why})"
            ),
            (
                "sample again where perf_event_open is allowed (kernel.perf_event_paranoid <= 2; "
                "in a container --cap-add PERFMON and a seccomp profile that allows it): each "
                "native reading is then placed in its library"
            ),
        )
    if waits < DEVICE_NEGLIGIBLE and busy.low < HOST_MOST:
        return (
            UNDETERMINED,
            (
                f"{head}: it is neither busy nor waiting for the device most of the time: "
                "undetermined"
            ),
            "check the loop thread (--loop-thread REGEX) and the recipe's device_wait",
        )
    return (
        UNDETERMINED,
        (
            f"{head}: the device-wait interval straddles {_pct(DEVICE_NEGLIGIBLE)} or "
            f"{_pct(DEVICE_MATERIAL)}: undetermined"
        ),
        "sample longer for a narrower interval (-d 30 or more)",
    )


def decide(
    loop: LoopTime,
    host_step_p50_ms: float,
    device_step_p50_ms: float | None,
    target_hint: str = "--rank 0",
    native_note: str = "",
) -> Verdict:
    """The verdict with its reason and, when undetermined, the command that would decide."""
    name = loop.thread.name
    resample = (
        f"gilprof attach {target_hint} --mode states -d 20 -o loop.json "
        f"(the default: every thread's state, without pausing), then "
        f"gilprof report loop.json --steps LOG"
    )
    bound, command = UNDETERMINED, None
    busy = loop.busy
    if loop.device_wait is None:
        utilization = loop.utilization or 0.0
        others = max(0.0, utilization - busy.value)
        floor = 1 - DEVICE_NEGLIGIBLE
        head = (
            f"{name} held the GIL {_pct(busy.value)} of the time ({_ci(busy)}); gil mode "
            f"records only the holder, so its other {_pct(1 - busy.value)} is waiting for "
            f"the GIL (at most {_pct(others)}: other threads held it), native code or "
            f"waiting for the device (at least {_pct(max(0.0, 1 - utilization))}), which "
            "gil mode cannot tell apart"
        )
        if math.isfinite(busy.low) and busy.low >= floor:
            bound = HOST
            reason = (
                f"{head}; held {_pct(busy.value)} >= {_pct(floor)} leaves under "
                f"{_pct(DEVICE_NEGLIGIBLE)} for any device wait: host-bound"
            )
        else:
            reason = f"{head}: undetermined"
            command = resample
    else:
        bound, reason, command = _decide_states(loop, name, native_note)
    return Verdict(
        bound,
        name,
        busy.value,
        None if loop.device_wait is None else loop.device_wait.value,
        host_step_p50_ms,
        device_step_p50_ms,
        reason,
        command,
        loop,
    )


def verdict(
    profile: Profile,
    host_step_p50_ms: float,
    device_step_p50_ms: float | None,
    *,
    loop_thread: str | None = None,
    recipe_loop_thread: str | None = None,
    watch: Sequence[str] = (),
    device_wait: Sequence[str] = (),
    input_wait: Sequence[str] = (),
) -> Verdict:
    """Choose the loop thread, split its time, decide."""
    if profile.sampling.samples == 0 and not any(w.counts for w in profile.windows):
        raise UsageError("the profile has no samples: no loop thread to judge")
    names = tuple(dict.fromkeys(DEVICE_WAIT_FUNCTIONS + tuple(device_wait)))
    thread = choose_loop_thread(profile, loop_thread, recipe_loop_thread, watch, names)
    rank = profile.target.rank
    hint = f"--rank {rank}" if rank is not None else f"--pid {profile.target.pid}"
    note = next((m for m in profile.sampling.messages if NOT_PLACED in m), "")
    judged = decide(
        loop_time(profile, thread, names, input_wait=input_wait),
        host_step_p50_ms,
        device_step_p50_ms,
        hint,
        note,
    )
    return with_gpu_evidence(judged, profile.sampling.gpu_busy, profile.sampling.gpu_note)


def with_gpu_evidence(v: Verdict, busy: Sequence[float], note: str) -> Verdict:
    """The verdict with NVML's busy share of the rank's GPU beside it: agreeing evidence,
    or a disagreement said in words (the loop thread's own time still decides)."""
    if not busy:
        return replace(v, gpu_note=note)
    mean = sum(busy) / len(busy)
    said = note or f"NVML: the GPU was busy {_pct(mean)}"
    if v.bound == DEVICE and mean < DEVICE_NEGLIGIBLE:
        said += (
            "; the GPU was mostly idle while the loop waited: the wait may be for something "
            "else named as a device wait (check the recipe's device libraries)"
        )
    elif v.bound == HOST and mean >= 1 - DEVICE_NEGLIGIBLE:
        said += (
            "; a GPU this busy beside a host-bound loop means other work shares the GPU, or "
            "the device work overlaps the host work completely"
        )
    return replace(v, gpu_busy=mean, gpu_note=said)
