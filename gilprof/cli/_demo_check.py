"""How `gilprof demo` judges its own prediction: the measured saving, the two figures'
uncertainty, a control for the two runs' host speed, and the one-line judgement.

The demo predicts the fixes' saving from the unfixed run's profile and measures it against a
second run of the fixed server. Two runs of the same code differ (on a 2-core machine the
unfixed server's mean step moved between 25 and 35 ms from run to run), and neither run's own
steps show it. The control shows it: code that both variants run alike
(reference.fixes.RUN_ALIKE) should cost the same per step on both sides; where it does not,
the runs ran at different host speeds and the judgement is undetermined.
"""

from __future__ import annotations

import math
import textwrap

from gilprof.analysis.per_step import CostChange, CostComparison
from gilprof.analysis.verdict import BOUND_WORDS, Verdict
from gilprof.analysis.what_if import Prediction, steps_after
from gilprof.reference import fixes
from gilprof.stats import Estimate, independent_sum, series_mean_ci
from gilprof.steps import RankSteps


def speed_control(costs: CostComparison | None) -> CostChange | None:
    """The cost change of the first function both variants run alike that the loop spent time
    in on either side (None without costs, or when it never ran)."""
    if costs is None:
        return None
    for name in fixes.RUN_ALIKE:
        found = [c for (fn, _), c in sorted(costs.changes.items()) if fn == name]
        if found and (found[0].per_step.before or found[0].per_step.after):
            return found[0]
    return None


def control_line(control: CostChange | None) -> str:
    """What the control read, for the check's lines."""
    if control is None:
        return "control  none: no function that both variants run alike was sampled"
    d = control.per_step
    reading = (
        "the runs' host speed differed" if differed(control) else "the same within its uncertainty"
    )
    return (
        f"control  {control.name}, which both variants run alike: {d.before:.1f} -> "
        f"{d.after:.1f} ms per step (change {d.delta:+.1f}, 95% CI {d.low:+.1f} to "
        f"{d.high:+.1f}): {reading}"
    )


def differed(control: CostChange | None) -> bool:
    """Whether the control's cost per step changed beyond its 95% interval."""
    return control is not None and control.per_step.significant


def _verdict_evidence(side: str, v: Verdict) -> str:
    loop = v.loop
    parts = [f"busy on the host {loop.busy.value:.0%}"]
    if loop.gil_wait is not None:
        parts.append(
            f"(held {loop.held:.0%}, waiting for the GIL {loop.gil_wait:.0%}, "
            f"native {loop.native or 0:.0%})"
        )
    if loop.device_wait is not None:
        parts.append(f"waiting for the device {loop.device_wait.value:.0%}")
    if loop.peer_wait is not None and loop.peer_wait.value >= 0.005:
        parts.append(f"waiting for peers {loop.peer_wait.value:.0%}")
    return (
        f"{side:7s} {BOUND_WORDS.get(v.bound, v.bound)}: loop thread {loop.thread.name} "
        + " ".join(parts)
    )


# The demo's own bar for a prediction: within this fraction of the measured saving, or
# inside the two figures' combined 95% uncertainty where that is wider.
AGREEMENT = 0.20


def measured_saving(before: RankSteps, after: RankSteps) -> Estimate:
    """Mean host step before minus after, each with a batch-means interval over its steps
    (a run's steps drift, so consecutive steps are not independent)."""
    b, a = series_mean_ci(before.host_ms), series_mean_ci(after.host_ms)
    return independent_sum(b.value - a.value, (b, a))


def prediction_gap(prediction: Prediction, before: RankSteps, after: RankSteps) -> Estimate:
    """Predicted minus measured step after, with the two figures' own uncertainty.

    The two are independent runs. The prediction's uncertainty has two parts: the profile's
    sampling error (its interval), and the before run's own drift, carried by the series of
    each logged step's predicted time (max(step - saving, device) with a known device step)
    through batch means. The measured after has its batch-means interval. The same gap is
    the measured saving minus the predicted one."""
    floor = prediction.device_ms if prediction.device_given and prediction.device_ms else 0.0
    drift = series_mean_ci(steps_after(before.host_ms, prediction.saving_ms.value, floor))
    measured = series_mean_ci(after.host_ms)
    gap = prediction.step_after_ms.value - measured.value
    return independent_sum(gap, (prediction.step_after_ms, drift, measured))


def agreement(
    predicted: Estimate, measured: Estimate, gap: Estimate, control: CostChange | None = None
) -> str:
    """Whether the predicted saving agrees with the measured one, and by which bar: within
    AGREEMENT of it, or inside `gap`'s interval (the two figures' 95% uncertainty); an
    interval as wide as the measured saving decides nothing, so that reads undetermined, and
    so does a pair of runs whose `control` shows different host speeds (agreement or not, the
    measured saving then holds the machine's change too)."""
    if not measured.value:
        return "nothing was measured to agree with"
    error = (predicted.value - measured.value) / measured.value
    said = f"error {100 * error:+.0f}% of the saving"
    if control is not None and differed(control):
        d = control.per_step
        return (
            f"{said}: undetermined, the runs' host speed differed ({control.name}, which both "
            f"variants run alike, took {d.before:.1f} ms per step before and {d.after:.1f} "
            "after); before and after interleaved in one job decide: "
            "benchmarks/demo_interleaved.py"
        )
    if abs(error) <= AGREEMENT:
        return f"{said}: agrees (within +-{AGREEMENT:.0%})"
    half = (gap.high - gap.low) / 2
    if not math.isfinite(half):
        return f"{said}: undetermined, one of the figures has no known uncertainty"
    bar = f"the two figures' 95% uncertainty, +-{half:.1f} ms"
    if half >= abs(measured.value):
        return (
            f"{said}: undetermined, {bar}, is as wide as the measured saving (the runs' steps "
            "drifted; before and after interleaved would decide: benchmarks/demo_interleaved.py)"
        )
    if gap.low <= 0 <= gap.high:
        return f"{said}: agrees within {bar}"
    return f"{said}: DISAGREES (beyond +-{AGREEMENT:.0%} and {bar})"


def prediction_check(
    prediction: Prediction,
    before: RankSteps,
    after: RankSteps,
    verdicts: tuple[Verdict, Verdict],
    control: CostChange | None = None,
) -> str:
    """Predicted (from the before profile) vs measured host step, the control, and both
    verdicts."""
    measured = measured_saving(before, after)
    saving = prediction.step_saving_ms
    lines = [
        f"host step, mean    before {before.host_step_ms.mean:.1f} ms "
        f"({before.iterations} steps logged while sampled)",
        f"  predicted after  {prediction.step_after_ms.value:.1f} ms "
        f"(saving {saving.value:.1f} ms, 95% CI {saving.low:.1f}-{saving.high:.1f}; from "
        f"the before profile alone, removing {', '.join(prediction.removed)}"
        + (
            f"; each step at least the simulated device's {prediction.device_ms:g} ms)"
            if prediction.device_given
            else ")"
        ),
        f"  measured after   {after.host_step_ms.mean:.1f} ms (saving {measured.value:.1f} "
        f"ms, 95% CI {measured.low:.1f}-{measured.high:.1f}, batch means over the steps)",
        f"  prediction       "
        f"{agreement(saving, measured, prediction_gap(prediction, before, after), control)}",
        control_line(control),
        _verdict_evidence("before", verdicts[0]),
        _verdict_evidence("after", verdicts[1]),
    ]
    # 100 columns, each line's continuation under its figures: read in a terminal as printed.
    return "\n".join(
        textwrap.fill(line, CHECK_WIDTH, subsequent_indent=" " * 19, break_on_hyphens=False)
        for line in lines
    )


CHECK_WIDTH = 100
