"""report --steps: the verdict, each function's cost per step, and the what-if predictions."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import click

from gilprof.analysis.per_step import LoopCosts, loop_costs
from gilprof.analysis.verdict import Verdict
from gilprof.analysis.what_if import Prediction, parse_specs, predict, savings_table
from gilprof.cli._verdict import VerdictChoice
from gilprof.errors import UsageError
from gilprof.profile import Profile
from gilprof.recipes import Recipe

feeder_option = click.option(
    "--feeder-thread",
    "feeder_thread",
    metavar="REGEX",
    help="With --steps: the thread(s) that launch the device work the loop waits for: their "
    "GIL waits per function join the costs, and a device-paced --what-if step shrinks by "
    "their time the removal cuts (docs/per-step.md).",
)


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
        feeder_thread: str | None = None,
    ) -> PerStep:
        """Nothing without a step log; else the verdict, the costs, the savings table and
        the --what-if prediction (when asked)."""
        if feeder_thread and not steps_log:
            raise UsageError("--feeder-thread goes with --steps LOG: its waits are per step")
        if not steps_log:
            return cls()
        steps = choice.steps(steps_log, profile)
        judged = choice.judge(profile, steps, recipe, watch)
        feeders = find_threads(profile, feeder_thread, "--feeder-thread") if feeder_thread else ()
        costs = loop_costs(
            profile, judged.loop.thread.tid, steps, all_frames=all_frames, feeders=feeders
        )
        predicted = (
            predict(profile, judged, steps, parse_specs(what_if), feeders) if what_if else None
        )
        return cls(
            judged, costs, savings_table(profile, judged, steps, costs, feeders=feeders), predicted
        )


def find_threads(profile: Profile, pattern: str, option: str) -> tuple[int, ...]:
    """The threads whose name matches `pattern` (a regex); none is a usage error."""
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"{option} {pattern!r} is not a valid regex: {exc}") from None
    found = tuple(tid for tid, name in profile.threads.items() if name and regex.search(name))
    if not found:
        names = ", ".join(sorted(n for n in profile.threads.values() if n)) or "none"
        raise UsageError(f"{option} {pattern!r} matches no thread (threads: {names})")
    return found
