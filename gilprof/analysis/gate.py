"""Budgets -> pass/fail results. Pure: the CLI loads files and renders.

Budgets (each optional): a function's absolute total share (`max_share`), GIL utilization,
host step p50 from an iteration log, and a relative regression against a baseline profile
that is only counted when it is statistically significant (gilprof.analysis.compare).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from gilprof.analysis.attribution import attribute
from gilprof.analysis.compare import compare_profiles
from gilprof.analysis.empty import refuse_empty
from gilprof.errors import UsageError
from gilprof.profile import Profile
from gilprof.steps import RankSteps


@dataclass(frozen=True)
class GateBudgets:
    """Budgets for `gilprof gate`; an unset budget is not checked."""

    max_share: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    max_utilization: float | None = None
    max_host_step_p50_ms: float | None = None
    max_regression: float | None = None
    # thread-state budgets (states and contention mode): THREAD -> percent of wall waiting
    # for the GIL; FUNC -> percent of wall any thread waited while a holder ran FUNC
    max_wait: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    max_blame: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    # FUNC -> milliseconds per step of the loop (gate_per_step; needs an iteration log)
    max_ms_per_step: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    def is_empty(self) -> bool:
        sets = (self.max_share, self.max_wait, self.max_blame, self.max_ms_per_step)
        return not any(sets) and all(
            value is None
            for value in (self.max_utilization, self.max_host_step_p50_ms, self.max_regression)
        )


def parse_share(
    values: tuple[str, ...], option: str = "--max-share", what: str = "FUNC"
) -> dict[str, float]:
    """`NAME=PERCENT` strings (--max-share, --max-wait, --max-blame) -> {name: percent}."""
    return parse_limits(
        values,
        lambda text: float(text.rstrip("%")),
        lambda v: 0 <= v <= 100,
        option,
        f"{what}=PERCENT (0-100)",
    )


def parse_limits(
    values: Iterable[str],
    number: Callable[[str], float],
    valid: Callable[[float], bool],
    option: str,
    expects: str,
) -> dict[str, float]:
    """`NAME=LIMIT` strings -> {name: limit}: `number` reads LIMIT, `valid` accepts it; a
    bad one is a usage error saying what `option` expects."""
    out = {}
    for value in values:
        name, sep, text = value.rpartition("=")
        try:
            limit = number(text)
        except ValueError:
            limit = math.nan
        if not sep or not name or not valid(limit):
            raise UsageError(f"{option} expects {expects}, got {value!r}")
        out[name] = limit
    return out


def merge_budgets(layers: list[GateBudgets]) -> GateBudgets:
    """Later layers override earlier ones budget by budget (recipe < budget file < flags)."""
    shares: dict[str, float] = {}
    waits: dict[str, float] = {}
    blame: dict[str, float] = {}
    per_step: dict[str, float] = {}
    utilization = host_p50 = regression = None
    for layer in layers:
        shares.update(layer.max_share)
        waits.update(layer.max_wait)
        blame.update(layer.max_blame)
        per_step.update(layer.max_ms_per_step)
        utilization = _pick(layer.max_utilization, utilization)
        host_p50 = _pick(layer.max_host_step_p50_ms, host_p50)
        regression = _pick(layer.max_regression, regression)
    return GateBudgets(
        max_share=dict(shares),
        max_utilization=utilization,
        max_host_step_p50_ms=host_p50,
        max_regression=regression,
        max_wait=dict(waits),
        max_blame=dict(blame),
        max_ms_per_step=dict(per_step),
    )


def resolve_budgets(
    recipe: GateBudgets, budget_file: GateBudgets, flags: GateBudgets, *, has_baseline: bool
) -> tuple[GateBudgets, str | None]:
    """The budgets to check (recipe < budget file < flags) and a note for the user, if any.

    A recipe's max_regression is a default for runs with a baseline: without one it is dropped,
    and said so. A budget file's or a flag's without a baseline is the user's error.
    """
    if budget_file.max_regression is not None and not has_baseline:
        raise UsageError(
            "the budget file sets max_regression, which needs a baseline profile "
            "(--baseline PROFILE)"
        )
    budgets = merge_budgets([recipe, budget_file, flags])
    if has_baseline or flags.max_regression is not None or budgets.max_regression is None:
        return budgets, None
    note = (
        f"the recipe's max_regression ({budgets.max_regression:g}%) is not checked "
        "without --baseline"
    )
    return replace(budgets, max_regression=None), note


def _pick(new: float | None, old: float | None) -> float | None:
    return old if new is None else new


@dataclass(frozen=True)
class BudgetResult:
    name: str  # stable identifier, e.g. "max-share:safe_broadcast"
    description: str
    measured: float | None
    limit: float
    unit: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class GateResult:
    profile_label: str
    results: tuple[BudgetResult, ...]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failed(self) -> tuple[BudgetResult, ...]:
        return tuple(r for r in self.results if not r.passed)


NEVER_SEEN = "never seen in the profile"


def evaluate(
    profile: Profile,
    budgets: GateBudgets,
    *,
    baseline: Profile | None = None,
    steps: RankSteps | None = None,
    min_share: float = 2.0,
    allow_missing: bool = False,
    max_new_share: float = 25.0,
) -> GateResult:
    """Check every set budget; `min_share` (percent) keeps tiny, noisy functions out of the
    regression budget.

    A max-share budget naming a function the profile never saw fails (a misspelt name would
    otherwise pass forever) unless `allow_missing`. For the regression budget a function
    absent from the baseline is new, not an infinite regression: see `_regression`.
    """
    if budgets.is_empty():
        raise UsageError(
            "no budgets given: use --max-share, --max-wait, --max-blame, --max-utilization, "
            "--max-regression, --max-host-step-p50 or --budget FILE"
        )
    refuse_empty(profile, "the profile")
    results: list[BudgetResult] = []
    attribution = attribute(profile, watch=tuple(budgets.max_share))
    by_watch = {w.function: w for w in attribution.watch}
    for function, limit in budgets.max_share.items():
        w = by_watch[function]
        measured = 100 * w.total_share
        detail = (
            ""
            if w.found
            else (
                NEVER_SEEN
                + (
                    ": allowed by --allow-missing"
                    if allow_missing
                    else ": check its spelling (--allow-missing to pass)"
                )
            )
        )
        results.append(
            BudgetResult(
                f"max-share:{function}",
                f"total GIL share of {function}",
                measured,
                limit,
                "%",
                measured <= limit and (w.found or allow_missing),
                detail,
            )
        )
    if budgets.max_utilization is not None:
        if not profile.sampling.mode.knows_gil:
            raise UsageError(
                f"--max-utilization needs a gil-mode profile; this one is "
                f"{profile.sampling.mode} mode"
            )
        measured = 100 * (attribution.utilization or 0.0)
        results.append(
            BudgetResult(
                "max-utilization",
                "GIL utilization",
                measured,
                budgets.max_utilization,
                "%",
                measured <= budgets.max_utilization,
            )
        )
    if budgets.max_host_step_p50_ms is not None:
        if steps is None:
            raise UsageError("--max-host-step-p50 needs an iteration log (--steps LOG)")
        measured = steps.host_step_ms.p50
        results.append(
            BudgetResult(
                "max-host-step-p50",
                f"host step p50, rank {steps.rank}",
                measured,
                budgets.max_host_step_p50_ms,
                "ms",
                measured <= budgets.max_host_step_p50_ms,
                f"{steps.iterations} iterations",
            )
        )
    if budgets.max_wait or budgets.max_blame:
        from gilprof.analysis.gate_waits import wait_results

        results.extend(wait_results(profile, budgets.max_wait, budgets.max_blame))
    if budgets.max_regression is not None:
        if baseline is None:
            raise UsageError("--max-regression needs a baseline profile (--baseline PROFILE)")
        results.append(_regression(baseline, profile, budgets, min_share, max_new_share))
    return GateResult(profile.label, tuple(results))


def _regression(
    baseline: Profile,
    profile: Profile,
    budgets: GateBudgets,
    min_share: float,
    max_new_share: float,
) -> BudgetResult:
    """Significant relative increases beyond the limit fail; so do new functions that are
    large on their own.

    A function absent from the baseline has no relative change. It is usually a replacement
    (a fix renames or rewrites a function) that moves GIL time rather than adding it, and
    time added in total shows in the GIL utilization row. So a new function is reported as
    new and fails only when its share's lower confidence bound reaches `max_new_share`
    percent of ticks: too large on its own to be waved through.
    """
    limit = budgets.max_regression or 0.0
    comparison = compare_profiles(baseline, profile, watch=tuple(budgets.max_share), top=None)
    rows = (
        ([comparison.utilization] if comparison.utilization else [])
        + list(comparison.watch)
        + list(comparison.functions)
    )
    offenders = []
    new = []
    worst = 0.0
    floor = min_share / 100
    for row in rows:
        d = row.total
        if max(d.before, d.after) < floor or not d.significant or d.delta <= 0:
            continue
        if not d.before:
            if d.low >= max_new_share / 100:
                offenders.append(f"{row.name} new at {100 * d.after:.1f}% (>= {max_new_share:g}%)")
            else:
                new.append(f"{row.name} {100 * d.after:.1f}%")
            continue
        relative = 100 * d.delta / d.before
        worst = max(worst, relative)
        if relative > limit:
            offenders.append(
                f"{row.name} {100 * d.before:.1f}% -> {100 * d.after:.1f}% (+{relative:.0f}%)"
            )
    offenders = list(dict.fromkeys(offenders))  # a watched name can be a function row too
    detail = "; ".join(offenders[:5]) + (
        f"; and {len(offenders) - 5} more" if len(offenders) > 5 else ""
    )
    if not detail:
        detail = f"no significant increase beyond {limit:g}%"
    if new:
        detail += (
            f"; new since the baseline (not counted below {max_new_share:g}%): "
            + ", ".join(new[:5])
            + (f" and {len(new) - 5} more" if len(new) > 5 else "")
        )
    return BudgetResult(
        "max-regression",
        "significant relative increase of a share vs baseline",
        worst,
        limit,
        "%",
        not offenders,
        detail,
    )
