"""Gate budgets in milliseconds per step (--max-ms-per-step FUNC=MS, with --steps): a
function's cost to the step loop per iteration (gilprof.analysis.per_step)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from gilprof.analysis.gate import parse_limits
from gilprof.analysis.per_step import LoopCosts
from gilprof.model import function_name_matches

if TYPE_CHECKING:
    from gilprof.analysis.gate import BudgetResult


def parse_ms(values: Iterable[str], option: str = "--max-ms-per-step") -> dict[str, float]:
    """`FUNC=MS` strings -> {function: milliseconds}."""
    return parse_limits(
        values,
        lambda text: float(text.removesuffix("ms")),
        lambda v: math.isfinite(v) and v >= 0,
        option,
        "FUNC=MS (milliseconds >= 0)",
    )


def per_step_results(costs: LoopCosts, max_ms: Mapping[str, float]) -> list[BudgetResult]:
    """One result per budget: the costliest function matching the name (its outermost frame
    when several match), judged on the point estimate; the interval is in the detail."""
    from gilprof.analysis.gate import BudgetResult

    results = []
    for function, limit in max_ms.items():
        matches = [c for c in costs.functions if function_name_matches(function, c.name)]
        worst = max(matches, key=lambda c: c.per_step_ms.value, default=None)
        measured = worst.per_step_ms.value if worst else 0.0
        detail = "never seen on the loop's stack or blamed for its waits"
        if worst is not None:
            e = worst.per_step_ms
            ci = f", 95% CI {e.low:.2f}-{e.high:.2f}" if math.isfinite(e.low) else ""
            detail = f"{worst.name} ({worst.file}) on loop thread {costs.thread}{ci}"
        results.append(
            BudgetResult(
                f"max-ms-per-step:{function}",
                f"cost of {function} to the step loop per iteration",
                measured,
                limit,
                "ms",
                measured <= limit,
                detail,
            )
        )
    return results
