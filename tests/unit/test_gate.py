"""gilprof.analysis.gate.evaluate: budgets -> pass/fail with the measured value and the limit."""

from __future__ import annotations

import random

import pytest

from gilprof.analysis.gate import GateBudgets as Budgets
from gilprof.analysis.gate import evaluate
from gilprof.errors import UsageError
from gilprof.model import Mode
from gilprof.profile import Profile
from gilprof.steps import RankSteps, parse_lines, summarize

from .builders import hot_and_serve, make_profile, noisy_windows, sample


def _profile(hot: int = 30, other: int = 20, mode: Mode = Mode.GIL) -> Profile:
    return hot_and_serve(("exec", "loop", "Router.safe_broadcast"), hot, other, mode=mode)


def _noisy(rng: random.Random, hot_share: float) -> Profile:
    return make_profile(noisy_windows(rng, hot_share, ("exec", "loop", "hot")))


def _steps(host_ms: float, n: int = 20) -> RankSteps:
    lines = [
        f"iter = {i}, global_rank = 0, rank = 0, host_step_time = {host_ms + i % 3}ms, "
        f"prev_device_step_time = {host_ms - 1}ms, num_scheduled_requests: 4"
        for i in range(n)
    ]
    steps = summarize(parse_lines(lines)).rank(0)
    assert steps is not None
    return steps


def _by_name(result):
    return {r.name: r for r in result.results}


def test_max_share_measures_the_total_share_in_percent():
    result = evaluate(_profile(hot=30), Budgets(max_share={"safe_broadcast": 25, "serve": 20}))
    rows = _by_name(result)
    assert rows["max-share:safe_broadcast"].measured == pytest.approx(30.0)
    assert (
        rows["max-share:safe_broadcast"].limit == 25
        and rows["max-share:safe_broadcast"].unit == "%"
    )
    assert not rows["max-share:safe_broadcast"].passed
    # Exactly at the limit passes: the budget is a maximum.
    assert (
        rows["max-share:serve"].measured == pytest.approx(20.0) and rows["max-share:serve"].passed
    )
    assert not result.passed
    assert [r.name for r in result.failed] == ["max-share:safe_broadcast"]


def test_a_budgeted_function_never_seen_fails_unless_allowed():
    """A misspelt name would otherwise pass forever."""
    row = evaluate(_profile(), Budgets(max_share={"nowhere": 1})).results[0]
    assert row.measured == 0.0 and not row.passed
    assert "never seen" in row.detail and "--allow-missing" in row.detail
    allowed = evaluate(_profile(), Budgets(max_share={"nowhere": 1}), allow_missing=True)
    assert allowed.passed and "never seen" in allowed.results[0].detail


def test_an_empty_profile_is_refused_not_judged():
    empty = make_profile([(100, [])] * 4)
    with pytest.raises(UsageError, match=r"no samples.*idle.*PID.*too short"):
        evaluate(empty, Budgets(max_utilization=50))
    with pytest.raises(UsageError, match="the before profile has no samples"):
        evaluate(_profile(), Budgets(max_regression=10), baseline=empty)


def test_max_utilization():
    rows = _by_name(evaluate(_profile(hot=30, other=20), Budgets(max_utilization=45)))
    assert rows["max-utilization"].measured == pytest.approx(50.0)
    assert not rows["max-utilization"].passed
    assert evaluate(_profile(hot=30, other=20), Budgets(max_utilization=50)).passed


def test_max_utilization_needs_a_gil_mode_profile():
    with pytest.raises(UsageError, match="gil-mode"):
        evaluate(_profile(mode=Mode.WALL), Budgets(max_utilization=50))


def test_host_step_p50():
    steps = _steps(100.0)  # host 100, 101, 102, ... -> p50 101
    result = evaluate(_profile(), Budgets(max_host_step_p50_ms=100.5), steps=steps)
    row = result.results[0]
    assert row.name == "max-host-step-p50" and row.unit == "ms"
    assert row.measured == pytest.approx(101.0) and not row.passed
    assert "20 iterations" in row.detail
    assert evaluate(_profile(), Budgets(max_host_step_p50_ms=101), steps=steps).passed
    with pytest.raises(UsageError, match="--steps"):
        evaluate(_profile(), Budgets(max_host_step_p50_ms=100))


def test_no_budgets_is_a_usage_error():
    assert Budgets().is_empty()
    assert not Budgets(max_regression=0).is_empty()
    with pytest.raises(UsageError, match="no budgets"):
        evaluate(_profile(), Budgets())


def test_max_regression_needs_a_baseline():
    with pytest.raises(UsageError, match="--baseline"):
        evaluate(_profile(), Budgets(max_regression=10))


def test_a_significant_fifty_percent_increase_fails_the_regression_budget():
    rng = random.Random(1)
    baseline, current = _noisy(rng, 0.20), _noisy(rng, 0.30)
    row = evaluate(current, Budgets(max_regression=20), baseline=baseline).results[0]
    assert row.name == "max-regression" and not row.passed
    assert row.measured == pytest.approx(50, abs=15)
    assert "hot" in row.detail and "->" in row.detail
    # The same change is within a 100% budget.
    assert evaluate(current, Budgets(max_regression=100), baseline=baseline).passed


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_noise_level_differences_pass_the_regression_budget(seed):
    rng = random.Random(seed)
    baseline, current = _noisy(rng, 0.25), _noisy(rng, 0.25)
    row = evaluate(current, Budgets(max_regression=10), baseline=baseline).results[0]
    assert row.passed, row


def _replaced(new_count: int) -> tuple[Profile, Profile]:
    """`old` (in the baseline) is replaced by `fresh` (only in the current profile)."""
    baseline = make_profile(
        [
            (
                100,
                [
                    sample("exec", "loop", count=20 + i % 3, tid=1),
                    sample("exec", "loop", "old", count=new_count + i % 2, tid=1),
                ],
            )
            for i in range(6)
        ]
    )
    current = make_profile(
        [
            (
                100,
                [
                    sample("exec", "loop", count=20 + i % 3, tid=1),
                    sample("exec", "loop", "fresh", count=new_count + i % 2, tid=1),
                ],
            )
            for i in range(6)
        ]
    )
    return baseline, current


def test_a_replacement_function_is_new_not_an_infinite_regression():
    baseline, current = _replaced(10)
    row = evaluate(current, Budgets(max_regression=50), baseline=baseline).results[0]
    assert row.passed and row.measured is not None
    assert "new since the baseline" in row.detail and "fresh 10." in row.detail


def test_a_new_function_large_on_its_own_fails():
    baseline, current = _replaced(30)
    row = evaluate(current, Budgets(max_regression=50), baseline=baseline).results[0]
    assert not row.passed and "fresh new at 30.5% (>= 25%)" in row.detail
    looser = evaluate(current, Budgets(max_regression=50), baseline=baseline, max_new_share=40)
    assert looser.passed


def test_functions_below_min_share_are_not_gated_for_regression():
    # `tiny` triples (0.5% -> 1.5%) with certainty, but stays under the 2% floor.
    baseline = make_profile(
        [
            (
                200,
                [
                    sample("exec", "loop", "tiny", count=1, tid=1),
                    sample("exec", "loop", count=60, tid=1),
                ],
            )
        ]
        * 6
    )
    current = make_profile(
        [
            (
                200,
                [
                    sample("exec", "loop", "tiny", count=3, tid=1),
                    sample("exec", "loop", count=58, tid=1),
                ],
            )
        ]
        * 6
    )
    assert evaluate(current, Budgets(max_regression=10), baseline=baseline).passed
    strict = evaluate(current, Budgets(max_regression=10), baseline=baseline, min_share=0.1)
    assert not strict.passed and "tiny" in strict.results[0].detail


def test_regression_against_a_baseline_of_another_mode_is_a_usage_error():
    with pytest.raises(UsageError, match="cannot compare"):
        evaluate(_profile(), Budgets(max_regression=10), baseline=_profile(mode=Mode.WALL))


def test_results_come_in_a_stable_order_and_all_are_reported():
    result = evaluate(
        _profile(hot=30, other=20),
        Budgets(
            max_share={"safe_broadcast": 10, "serve": 10},
            max_utilization=40,
            max_host_step_p50_ms=50,
            max_regression=10,
        ),
        baseline=_profile(hot=30, other=20),
        steps=_steps(100.0),
    )
    assert [r.name for r in result.results] == [
        "max-share:safe_broadcast",
        "max-share:serve",
        "max-utilization",
        "max-host-step-p50",
        "max-regression",
    ]
    assert [r.passed for r in result.results] == [False, False, False, False, True]
    assert result.profile_label == "rank 0 pid 1234@host"


def test_a_budget_file_carries_per_step_budgets(tmp_path):
    from gilprof.analysis.gate import merge_budgets
    from gilprof.recipes import parse_gate_budgets

    text = "[gate]\nmax_utilization = 90\n[gate.max_ms_per_step]\nsafe_broadcast = 150.5\n"
    budgets = parse_gate_budgets(text, "b.toml")
    assert dict(budgets.max_ms_per_step) == {"safe_broadcast": 150.5}  # ms: no 100 cap
    assert not Budgets(max_ms_per_step={"f": 1.0}).is_empty()
    flags = Budgets(max_ms_per_step={"safe_broadcast": 9.0, "tokenize": 2.0})
    merged = merge_budgets([budgets, flags])  # flags override the file budget by budget
    assert dict(merged.max_ms_per_step) == {"safe_broadcast": 9.0, "tokenize": 2.0}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("safe_broadcast = -1", "gate.max_ms_per_step.safe_broadcast"),
        ('"not a name!" = 3', "a function name"),
        ("safe_broadcast = true", "a number >= 0"),
    ],
)
def test_bad_per_step_budgets_are_refused(table, message):
    from gilprof.errors import InputError
    from gilprof.recipes import parse_gate_budgets

    with pytest.raises(InputError, match=message):
        parse_gate_budgets(f"[gate.max_ms_per_step]\n{table}\n", "b.toml")
