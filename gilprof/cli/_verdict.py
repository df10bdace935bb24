"""Options and glue shared by the commands that give the host/device verdict
(report, compare, gate, demo): which thread runs the step loop, where it waits for the device."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import click

from gilprof.analysis.blocking import Blocking, blocking_of
from gilprof.analysis.verdict import Verdict, verdict
from gilprof.cli._options import packed, skip_warmup_option, steps_rank_option
from gilprof.profile import Profile
from gilprof.recipes import Recipe
from gilprof.steps import DEFAULT_SKIP_WARMUP, RankSteps, rank_steps
from gilprof.steps.summary import summarize_logs
from gilprof.wait_classes import DEVICE_SYNC_FUNCTIONS, WaitRules


@dataclass(frozen=True)
class VerdictChoice:
    """--steps-rank, --skip-warmup, --loop-thread and --device-wait: which rank of an
    iteration log to read, and how to find the step loop and its waits for the device."""

    steps_rank: int | None = None
    skip_warmup: int = DEFAULT_SKIP_WARMUP
    loop_thread: str | None = None
    device_wait: tuple[str, ...] = ()

    def steps(self, log: str, profile: Profile) -> RankSteps:
        """The step statistics in `log` of --steps-rank, else of the profile's rank, else 0."""
        rank = self.steps_rank if self.steps_rank is not None else (profile.target.rank or 0)
        return rank_steps(log, rank, self.skip_warmup)

    def step_ms_by_rank(self, log: str, profiles: Sequence[Profile]) -> dict[int, float]:
        """Each profiled rank's mean host step in `log` (its loop's period), for ms per step
        side by side; a rank the log does not have is left out."""
        report = summarize_logs([log], skip_warmup=self.skip_warmup)
        out: dict[int, float] = {}
        for profile in profiles:
            rank = profile.target.rank if profile.target.rank is not None else 0
            steps = report.rank(rank)
            if steps is not None:
                out[rank] = steps.host_step_ms.mean
        return out

    def wait_rules(self, recipe: Recipe | None) -> WaitRules:
        """The rules the verdict classes blocked time by: the built-in ones, --device-wait
        and the recipe's [steps] device_wait and input_wait."""
        spec = recipe.steps if recipe else None
        names = DEVICE_SYNC_FUNCTIONS + self.device_wait + (spec.device_wait if spec else ())
        return WaitRules(
            device_wait=tuple(dict.fromkeys(names)), input_wait=spec.input_wait if spec else ()
        )

    def blocking(self, profile: Profile, recipe: Recipe | None, judged: Verdict | None) -> Blocking:
        """Where every thread blocks, by the verdict's classes; in ms per step with --steps."""
        if judged is None:
            return blocking_of(profile, self.wait_rules(recipe))
        step_ms, loop = judged.host_step_p50_ms, judged.loop.thread.tid
        return blocking_of(profile, self.wait_rules(recipe), step_ms, first_tid=loop)

    def judge(
        self, profile: Profile, steps: RankSteps, recipe: Recipe | None, watch: Sequence[str]
    ) -> Verdict:
        """The verdict for one profile and its rank's step statistics."""
        spec = recipe.steps if recipe else None
        return verdict(
            profile,
            steps.host_step_ms.p50,
            steps.device_step_ms.p50 if steps.device_step_ms else None,
            loop_thread=self.loop_thread,
            recipe_loop_thread=spec.loop_thread if spec else None,
            watch=watch,
            device_wait=self.device_wait + (spec.device_wait if spec else ()),
            input_wait=spec.input_wait if spec else (),
        )


verdict_options = packed(
    "verdict",
    VerdictChoice,
    steps_rank_option,
    skip_warmup_option,
    click.option(
        "--loop-thread",
        metavar="REGEX",
        help="Thread that runs the step loop, for the host/device verdict "
        "(default: the recipe's loop_thread, else the busiest thread running "
        "a watched function).",
    ),
    click.option(
        "--device-wait",
        multiple=True,
        metavar="FUNC",
        help="Also count time in FUNC as waiting for the device (repeatable; CUDA "
        "synchronize calls always count; Condition.wait and Event.wait do not, as they wait "
        "for whatever sets them).",
    ),
)
"""--steps-rank, --skip-warmup, --loop-thread, --device-wait, given to the command as
`verdict: VerdictChoice`."""
