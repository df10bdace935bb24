"""report --steps: the verdict, each function's cost per step, and the what-if predictions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gilprof.analysis.per_step import LoopCosts, loop_costs
from gilprof.analysis.verdict import Verdict
from gilprof.analysis.what_if import Prediction, parse_specs, predict, savings_table
from gilprof.cli._verdict import VerdictChoice
from gilprof.profile import Profile
from gilprof.recipes import Recipe


@dataclass(frozen=True)
class PerStep:
    verdict: Verdict | None = None
    costs: LoopCosts | None = None
    savings: tuple[Prediction, ...] = ()
    what_if: Prediction | None = None

    @classmethod
    def of(
        cls,
        profile: Profile,
        steps_log: str | None,
        choice: VerdictChoice,
        recipe: Recipe | None,
        watch: Sequence[str],
        what_if: Sequence[str],
        all_frames: bool,
    ) -> PerStep:
        """Nothing without a step log; else the verdict, the costs, the savings table and
        the --what-if prediction (when asked)."""
        if not steps_log:
            return cls()
        steps = choice.steps(steps_log, profile)
        judged = choice.judge(profile, steps, recipe, watch)
        costs = loop_costs(profile, judged.loop.thread.tid, steps, all_frames=all_frames)
        predicted = predict(profile, judged, steps, parse_specs(what_if)) if what_if else None
        return cls(judged, costs, savings_table(profile, judged, steps, costs), predicted)
