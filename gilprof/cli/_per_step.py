"""report --steps: the verdict, each function's cost per step, and the what-if predictions."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import click

from gilprof.analysis.per_step import LoopCosts, loop_costs
from gilprof.analysis.verdict import Verdict
from gilprof.analysis.what_if import Prediction, parse_specs, predict, savings_table
from gilprof.cli._verdict import VerdictChoice
from gilprof.errors import UsageError
from gilprof.profile import Profile
from gilprof.recipes import Recipe


@dataclass(frozen=True)
class WhatIf:
    """report's --what-if, --feeder-thread and --device-step-ms, as one request."""

    functions: tuple[str, ...] = ()
    feeder_thread: str | None = None
    device_step_ms: float | None = None


def what_if_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The three options, handed to `command` as one WhatIf named `what_if`."""

    @click.option(
        "--what-if",
        "functions",
        multiple=True,
        metavar="FUNC[,FUNC]",
        help="With --steps: the predicted host step if these functions' cost left the loop "
        "(FUNC:LINE for one call site in FUNC; repeatable; docs/per-step.md).",
    )
    @click.option(
        "--feeder-thread",
        "feeder_thread",
        metavar="REGEX",
        help="With --steps: the thread(s) that launch the device work the loop waits for: "
        "their GIL waits per function join the costs, and a device-paced --what-if step "
        "shrinks by their time the removal cuts (docs/per-step.md).",
    )
    @click.option(
        "--device-step-ms",
        "device_step_ms",
        type=float,
        metavar="MS",
        help="With --what-if: the device's own step time, when a trace (nsys, the PyTorch "
        "profiler) or a simulator shows it. A host-bound log cannot (its device step is "
        "dragged up to the host step), so without it a host-bound prediction holds only while "
        "the host step after stays above the device's.",
    )
    @functools.wraps(command)
    def with_what_if(
        *args: Any,
        functions: tuple[str, ...],
        feeder_thread: str | None,
        device_step_ms: float | None,
        **kwargs: Any,
    ) -> Any:
        return command(*args, what_if=WhatIf(functions, feeder_thread, device_step_ms), **kwargs)

    return with_what_if


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
        what_if: WhatIf,
        all_frames: bool,
    ) -> PerStep:
        """Nothing without a step log; else the verdict, the costs, the savings table and
        the --what-if prediction (when asked)."""
        if what_if.functions and not steps_log:
            raise UsageError("--what-if needs --steps LOG: savings are in ms per step")
        if what_if.feeder_thread and not steps_log:
            raise UsageError("--feeder-thread goes with --steps LOG: its waits are per step")
        if what_if.device_step_ms is not None and not steps_log:
            raise UsageError("--device-step-ms goes with --steps LOG: it bounds the step after")
        feeder_thread, device_step_ms = what_if.feeder_thread, what_if.device_step_ms
        if not steps_log:
            return cls()
        steps = choice.steps(steps_log, profile)
        judged = choice.judge(profile, steps, recipe, watch)
        feeders = find_threads(profile, feeder_thread, "--feeder-thread") if feeder_thread else ()
        costs = loop_costs(
            profile, judged.loop.thread.tid, steps, all_frames=all_frames, feeders=feeders
        )
        predicted = (
            predict(profile, judged, steps, parse_specs(what_if.functions), feeders, device_step_ms)
            if what_if.functions
            else None
        )
        savings = savings_table(
            profile, judged, steps, costs, feeders=feeders, device_step_ms=device_step_ms
        )
        return cls(judged, costs, savings, predicted)


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
