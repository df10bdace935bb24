"""Gate budgets on GIL waits: a thread's wait share (--max-wait THREAD=PCT) and the waits a
function causes while it holds the GIL (--max-blame FUNC=PCT), from every thread's state
(states mode, the default, or contention mode)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from gilprof.analysis.contention import has_spans
from gilprof.errors import UsageError
from gilprof.model import function_name_matches
from gilprof.profile import Profile

if TYPE_CHECKING:
    from gilprof.analysis.gate import BudgetResult


def wait_results(
    profile: Profile, max_wait: Mapping[str, float], max_blame: Mapping[str, float]
) -> list[BudgetResult]:
    from gilprof.analysis.gate import BudgetResult
    from gilprof.analysis.waits import WaitSeries

    if not has_spans(profile):
        raise UsageError(
            f"--max-wait and --max-blame need a profile that recorded every thread's state "
            f"(--mode states, the default, or contention); this one is "
            f"{profile.sampling.mode} mode"
        )
    series = WaitSeries.of(profile)
    results: list[BudgetResult] = []
    for pattern, limit in max_wait.items():
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise UsageError(f"--max-wait {pattern!r} is not a valid regex: {exc}") from None
        matched = sorted(name for name in series.waits if regex.search(name))
        shares = {name: 100 * series.wait_share(name) for name in matched}
        worst = max(shares, key=lambda n: shares[n]) if shares else None
        measured = shares[worst] if worst is not None else None
        detail = (f"worst of {len(matched)} threads: {worst}" if len(matched) > 1 else "") or (
            "" if matched else "no thread's name matches: check the regex"
        )
        results.append(
            BudgetResult(
                f"max-wait:{pattern}",
                f"GIL wait share of thread {pattern}",
                measured,
                limit,
                "%",
                measured is not None and measured <= limit,
                detail,
            )
        )
    for function, limit in max_blame.items():
        measured = 100 * series.blame_share(function)
        found = any(function_name_matches(function, key[2]) for key in series.blame)
        results.append(
            BudgetResult(
                f"max-blame:{function}",
                f"waits for the GIL while {function} held it",
                measured,
                limit,
                "%",
                measured <= limit,
                "" if found else "never seen holding the GIL while a thread waited",
            )
        )
    return results
