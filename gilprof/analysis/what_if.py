"""What removing a function's cost from the step loop would save, predicted from one profile.

The model (docs/per-step.md has it with its assumptions):

- period P: the mean host step (the loop's top-to-top time);
- the loop's host work H = P x (1 - its device-wait share); the device's time D;
- under an overlap scheduler the step is max(H, D); a loop paced by the device (its
  device-wait share's interval at or above 10%) has D = P;
- removing FUNC takes its cost per step S (gilprof.analysis.per_step: the loop's own busy
  time in it, plus the loop's GIL wait while another thread held the GIL in it) off H:
  H' = H - S, and the predicted step is max(H', D). A host-paced loop's log cannot show D
  (the device step is dragged up to the host step), so there the predicted step is H' and
  the report says that it holds while D < H'.

`FUNC:LINE` removes only the part of FUNC's cost spent at that line of FUNC (a call site):
the state reader records functions, not lines, so the line's fraction comes from the py-spy
samples of the loop thread (which carry lines), applied to FUNC's whole cost.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from gilprof.analysis.loop import batch_share
from gilprof.analysis.per_step import LoopCosts, StepUnit, scale, walk_loop
from gilprof.analysis.verdict import DEVICE_NEGLIGIBLE, Verdict
from gilprof.errors import UsageError, no_lines
from gilprof.model import Frame, ThreadState
from gilprof.profile import Profile
from gilprof.stats import Estimate
from gilprof.steps import RankSteps


@dataclass(frozen=True)
class RemovalSpec:
    function: str
    line: int | None = None

    @classmethod
    def parse(cls, text: str) -> RemovalSpec:
        name, sep, line = text.strip().rpartition(":")
        if sep and line.isdigit() and name:
            return cls(name, int(line))
        if not text.strip():
            raise UsageError("--what-if: an empty function name")
        return cls(text.strip())

    def __str__(self) -> str:
        return self.function if self.line is None else f"{self.function}:{self.line}"


def parse_specs(texts: Iterable[str]) -> tuple[RemovalSpec, ...]:
    return tuple(RemovalSpec.parse(t) for text in texts for t in text.split(",") if t.strip())


@dataclass(frozen=True)
class Prediction:
    removed: tuple[str, ...]
    saving_ms: Estimate  # host work per step taken off the loop
    period_ms: float  # mean host step before
    host_work_ms: float  # H
    host_after_ms: Estimate  # H - S
    device_ms: float | None  # D: the period when device-paced; the log's mean otherwise
    device_paced: bool
    step_after_ms: Estimate  # max(H - S, D) (H - S when D is unknown)
    step_saving_ms: Estimate  # P - step after
    line_fractions: tuple[tuple[str, float], ...]  # FUNC:LINE specs: their line's fraction
    note: str
    feeder_saving_ms: Estimate | None = None  # the device-feeding threads' time cut per step
    device_given: bool = False  # device_ms came from --device-step-ms, not from the log


def _callee(frames: Sequence[Frame], function: str) -> tuple[bool, str | None, int]:
    """Whether `function` is on the stack; the Python function its innermost frame calls
    (None: it runs itself, or in C code it called); the line it is at."""
    for i in range(len(frames) - 1, -1, -1):
        if frames[i].matches(function):
            child = next((f.name for f in frames[i + 1 :] if f.is_python), None)
            return True, child, frames[i].line
    return False, None, 0


class _LineSplit:
    """Which part of FUNC's time is spent at LINE, learned from the loop's py-spy samples
    (they carry lines): per callee of FUNC, the fraction of its samples called from LINE;
    for FUNC's own time, the fraction of its own samples at LINE."""

    def __init__(self, profile: Profile, loop_tid: int, spec: RemovalSpec):
        at_line: dict[str | None, float] = {}
        total: dict[str | None, float] = {}
        for window in profile.windows:
            for index, count in window.counts.items():
                if profile.stacks[index].tid != loop_tid:
                    continue
                found, child, line = _callee(profile.stack_frames(index), spec.function)
                if found:
                    total[child] = total.get(child, 0.0) + count
                    if line == spec.line:
                        at_line[child] = at_line.get(child, 0.0) + count
        self._fractions = {c: at_line.get(c, 0.0) / n for c, n in total.items() if n}
        everything = math.fsum(total.values())
        self.fraction = math.fsum(at_line.values()) / everything if everything else 0.0

    def part(self, child: str | None) -> float:
        return self._fractions.get(child, 0.0)


def predict(
    profile: Profile,
    verdict: Verdict,
    steps: RankSteps,
    specs: Sequence[RemovalSpec],
    feeders: Sequence[int] = (),
    device_step_ms: float | None = None,
) -> Prediction:
    """The predicted host step after removing `specs`' cost from the loop (see the module);
    `feeders`: the threads that launch the device work the loop waits for (its critical
    path when the device paces the loop); `device_step_ms`: the device's own step when it
    is known from elsewhere (a trace, a simulator), the floor a host-paced step meets."""
    if device_step_ms is not None and not (math.isfinite(device_step_ms) and device_step_ms > 0):
        raise UsageError(f"--device-step-ms must be a positive number of ms, not {device_step_ms}")
    if not specs:
        raise UsageError("--what-if needs at least one function")
    loop_tid = verdict.loop.thread.tid
    feeders = [tid for tid in feeders if tid != loop_tid]
    lined = [spec for spec in specs if spec.line is not None]
    if lined and not profile.sampling.has_lines:
        raise UsageError(no_lines(f"--what-if {lined[0]}"))
    splits = {spec: _LineSplit(profile, loop_tid, spec) for spec in lined}
    match_cache: dict[int, float] = {}

    def removed_part(stack: int) -> float:
        """The fraction of this stack's time the removal takes away (0..1)."""
        part = match_cache.get(stack)
        if part is None:
            frames = profile.stack_frames(stack)
            part = 0.0
            for spec in specs:
                found, child, _line = _callee(frames, spec.function)
                if found:
                    split = splits.get(spec)
                    part += 1.0 if split is None else split.part(child)
            part = match_cache[stack] = min(1.0, part)
        return part

    saved, wall = _thread_saving(profile, loop_tid, removed_part)
    usable = [i for i, seconds in enumerate(wall) if seconds > 0]
    if not usable:
        raise UsageError("the loop thread has no samples in the profile")
    # The other threads' time the removal takes away: their own time in the removed
    # functions and their GIL waits while a removed function held it, per thread.
    others = {
        tid: _thread_saving(profile, tid, removed_part)
        for tid in profile.threads
        if tid != loop_tid and (tid in feeders or verdict.loop.device_wait is not None)
    }
    seen = {
        spec
        for spec in specs
        for i in match_cache
        if _callee(profile.stack_frames(i), spec.function)[0]
    }
    missing = [str(spec) for spec in specs if spec not in seen]
    if missing:
        raise UsageError(
            f"--what-if {', '.join(missing)}: never on the loop thread's stack nor holding the "
            "GIL while it waited; check the name (gilprof report --steps lists the costs)"
        )
    unit = StepUnit.of(steps)
    period = unit.step_ms
    saving = scale(batch_share([saved[i] for i in usable], [wall[i] for i in usable]), period)
    device_wait = verdict.loop.device_wait
    # waiting for peers paces the step as the device does: host savings wait for them too
    peer_wait = verdict.loop.peer_wait
    wait_share = (device_wait.value if device_wait is not None else 0.0) + (
        peer_wait.value if peer_wait is not None else 0.0
    )
    host_work = period * (1.0 - wait_share)
    device_paced = (device_wait is not None and device_wait.low >= DEVICE_NEGLIGIBLE) or (
        peer_wait is not None and peer_wait.low >= DEVICE_NEGLIGIBLE
    )
    host_after = Estimate(
        host_work - saving.value,
        host_work - saving.high,
        host_work - saving.low,
        saving.stderr,
        saving.dof,
    )
    feeder_saving = _feeder_saving(others, feeders, period)
    if device_paced and feeder_saving is not None:
        device: float | None = period
        names = ", ".join(profile.threads.get(t, str(t)) for t in feeders)
        note = (
            f"device-bound, the device fed by {names}: the loop waits for the device "
            f"{wait_share:.0%} of its time, and the device step follows the feeding thread, "
            f"whose time the removal cuts by {feeder_saving.value:.1f} ms per step (its own "
            "time in the removed functions and its GIL waits while they held the GIL): "
            "predicted step max(host after, device step - that)"
        )
    elif device_paced:
        device = period
        note = (
            f"{'waiting for peers' if verdict.bound == 'peers' else 'device-bound'}: the loop "
            f"waits for the device or its peers {wait_share:.0%} of its time; host savings will "
            "not shorten the step until the host work is longer than the device or the slowest "
            f"peer's step ({period:.1f} ms)" + _unnamed_feeders(profile, others, period)
        )
    elif device_step_ms is not None:
        device = device_step_ms
        note = (
            f"host-bound, with the device's step known to be {device_step_ms:.1f} ms: each "
            "logged step after is max(its host time - the saving, the device step), averaged "
            "over the before log's steps (a step near the device step is often paced by it)"
        )
    else:
        device = steps.device_step_ms.mean if steps.device_step_ms else None
        note = (
            "host-bound: the step follows the host work; under an overlap scheduler it shrinks "
            "to max(host after, device), and the device's own time is hidden while the host "
            "paces the loop (the logged device step is dragged up to the host step): give it "
            "with --device-step-ms when a trace or the GPU's own timeline shows it"
        )
    # The logged host step is the loop's period: P - S while the host paces the loop, and
    # P while the device does (the loop waits longer for it).
    step_after = Estimate(
        period - saving.value, period - saving.high, period - saving.low, saving.stderr, saving.dof
    )
    if device_paced and feeder_saving is not None:
        # the device chain shrinks by the feeder's saving; the host work must still fit
        chain = Estimate(
            period - feeder_saving.value,
            period - feeder_saving.high,
            period - feeder_saving.low,
            feeder_saving.stderr,
            feeder_saving.dof,
        )
        step_after = _floor(chain, min(period, host_after.value))
    elif device_paced:
        step_after = _floor(step_after, period)
    elif device_step_ms is not None:
        step_after = _per_step_floor(steps, saving, device_step_ms)
    step_saving = Estimate(
        period - step_after.value,
        period - step_after.high,
        period - step_after.low,
        step_after.stderr,
        step_after.dof,
    )
    return Prediction(
        tuple(str(s) for s in specs),
        saving,
        period,
        host_work,
        host_after,
        device,
        device_paced,
        step_after,
        step_saving,
        tuple((str(s), split.fraction) for s, split in splits.items()),
        note,
        feeder_saving,
        device_given=not device_paced and device_step_ms is not None,
    )


Saved = tuple[list[float], list[float]]  # per window: seconds saved, seconds of the thread


def _thread_saving(profile: Profile, tid: int, removed_part: Callable[[int], float]) -> Saved:
    """What removing the functions takes off thread `tid` per window: its busy time in them
    and its GIL waits while a thread held the GIL in them (each stretch once, at most whole)."""
    saved: dict[int, float] = {}

    def visit(w: int, dt: float, stack: int, holders: list[int]) -> None:
        part = removed_part(stack)
        if holders and profile.stacks[stack].state is ThreadState.WAITING:
            part += math.fsum(removed_part(h) for h in holders) / len(holders)
        if part > 0:
            saved[w] = saved.get(w, 0.0) + dt * min(1.0, part)

    wall = walk_loop(profile, tid, visit)
    return [saved.get(i, 0.0) for i in range(len(wall))], wall


def _per_step(saved: Saved, period: float) -> Estimate | None:
    usable = [i for i, seconds in enumerate(saved[1]) if seconds > 0]
    if not usable:
        return None
    return scale(batch_share([saved[0][i] for i in usable], [saved[1][i] for i in usable]), period)


def _feeder_saving(
    others: dict[int, Saved], feeders: Sequence[int], period: float
) -> Estimate | None:
    """The feeding threads' saving per step: one chain of work, their savings add up."""
    found = [e for tid in feeders if (e := _per_step(others[tid], period)) is not None]
    if not found:
        return None
    return Estimate(
        math.fsum(e.value for e in found),
        math.fsum(e.low for e in found),
        math.fsum(e.high for e in found),
        math.sqrt(math.fsum(e.stderr**2 for e in found)),
        min(e.dof for e in found),
    )


NOTABLE_MS = 0.5


def _unnamed_feeders(profile: Profile, others: dict[int, Saved], period: float) -> str:
    """A device-paced prediction of ~0 is wrong when a thread that launches the device work
    waits for the removed functions: name the threads that do, in ms per step."""
    found = []
    for tid, saved in others.items():
        e = _per_step(saved, period)
        if e is not None and e.value >= NOTABLE_MS:
            found.append((e.value, profile.threads.get(tid) or f"tid {tid}"))
    if not found:
        return ""
    listed = ", ".join(f"{name} {ms:.1f} ms" for ms, name in sorted(found, reverse=True))
    return (
        f". Undetermined for a device fed by another Python thread: the removal also cuts "
        f"these threads' time per step ({listed}); if one of them launches the device work, "
        "the device step shrinks by up to its figure: name it with --feeder-thread REGEX"
    )


def steps_after(host_ms: Iterable[float], cut: float, device_ms: float) -> list[float]:
    """Each logged step's predicted time once `cut` ms of host work is gone: the slower of
    its host time less the cut and the device's step (0: no device floor)."""
    return [max(h - cut, device_ms) for h in host_ms]


def _per_step_floor(steps: RankSteps, saving: Estimate, device_ms: float) -> Estimate:
    """The mean over the logged steps of max(step - saving, device): a step's host time
    varies around the mean, and each step waits for the slower of host and device, so a
    mean host time after just under the device step still gives steps above it."""
    hosts = list(steps.host_ms)

    def mean_step(cut: float) -> float:
        return math.fsum(steps_after(hosts, cut, device_ms)) / len(hosts)

    # d(mean step)/d(saving): the share of steps the host still paces
    paced = sum(h - saving.value > device_ms for h in hosts) / len(hosts)
    return Estimate(
        mean_step(saving.value),
        mean_step(saving.high),
        mean_step(saving.low),
        saving.stderr * paced,
        saving.dof,
    )


def _floor(estimate: Estimate, floor: float) -> Estimate:
    """max(estimate, floor), bound by bound."""
    return Estimate(
        max(estimate.value, floor),
        max(estimate.low, floor),
        max(estimate.high, floor),
        estimate.stderr if estimate.value > floor else 0.0,
        estimate.dof,
    )


def savings_table(
    profile: Profile,
    verdict: Verdict,
    steps: RankSteps,
    costs: LoopCosts,
    count: int = 8,
    feeders: Sequence[int] = (),
    device_step_ms: float | None = None,
) -> tuple[Prediction, ...]:
    """The costliest functions one by one, leaving out the loop's own frames (functions in
    which the loop spends nearly all its time: removing them is removing the loop)."""
    names = [c.name for c in costs.functions if not costs.is_loop_frame(c)][:count]
    return tuple(
        predict(profile, verdict, steps, (RemovalSpec(name),), feeders, device_step_ms)
        for name in names
    )
