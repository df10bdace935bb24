"""The demo's check of its prediction: the steps logged while sampled, the measured saving's
batch-means interval, and the one bar the prediction is judged by."""

from __future__ import annotations

import math
import random

from gilprof.cli._demo_check import agreement, measured_saving, prediction_gap
from gilprof.cli.demo_run import DemoSide, sampled_steps
from gilprof.profile import Profile
from gilprof.stats import Estimate, independent_sum, series_mean_ci
from gilprof.steps import RankSteps, summarize


def _log(path, host_ms):
    path.write_text(
        "".join(
            f"iter = {i}, global_rank = 0, rank = 0, host_step_time = {ms:.2f}ms, "
            f"prev_device_step_time = 5.00ms\n"
            for i, ms in enumerate(host_ms)
        )
    )


def _side(path, first, last):
    return DemoSide(
        "before", path.with_suffix(".json"), path, Profile.__new__(Profile), (first, last)
    )


def test_only_the_steps_logged_while_sampled_are_used(tmp_path):
    log = tmp_path / "before.log"
    _log(log, [100.0] * 20 + [30.0] * 40 + [100.0] * 10)
    steps = sampled_steps(_side(log, 20, 60), skip_warmup=3)
    assert steps.iterations == 40 and steps.host_step_ms.mean == 30.0
    assert (steps.first_iteration, steps.last_iteration) == (20, 59)


def test_too_few_sampled_steps_fall_back_to_the_whole_log_less_warmup(tmp_path):
    log = tmp_path / "before.log"
    _log(log, [100.0] * 3 + [30.0] * 40)
    steps = sampled_steps(_side(log, 10, 12), skip_warmup=3)
    assert steps.iterations == 40 and steps.host_step_ms.mean == 30.0


def test_a_drifting_series_gets_a_wider_interval_than_a_steady_one():
    rng = random.Random(1)
    steady = [30 + rng.gauss(0, 3) for _ in range(400)]
    drifting = [26 + 6 * i / 400 + rng.gauss(0, 3) for i in range(400)]
    s, d = series_mean_ci(steady), series_mean_ci(drifting)
    assert s.low < 30 < s.high
    assert (d.high - d.low) > 1.5 * (s.high - s.low)


def test_independent_sum_adds_errors_in_quadrature():
    a, b = Estimate(10, 8, 12, 1.0, 1e9), Estimate(4, 2, 6, 1.0, 1e9)
    total = independent_sum(6.0, (a, b))
    assert math.isclose(total.stderr, math.sqrt(2))
    assert math.isclose(total.high - total.value, 1.959964 * math.sqrt(2), rel_tol=1e-4)
    assert independent_sum(1.0, (a, Estimate(1, 1, 1, 0.0, 0.0))).dof == 0


def _estimate(value, stderr):
    return Estimate(value, value - 2 * stderr, value + 2 * stderr, stderr, 1e9)


def test_agreement_names_its_bar():
    narrow = _estimate(0.0, 0.1)  # the gap: predicted - measured, +-2 stderr here
    assert "agrees (within +-20%)" in agreement(_estimate(11.0, 0.1), _estimate(10.0, 0.1), narrow)
    said = agreement(_estimate(14.0, 0.5), _estimate(10.0, 2.5), _estimate(-4.0, 2.5))
    assert "+40%" in said and "agrees within the two figures' 95% uncertainty, +-5.0 ms" in said
    assert "DISAGREES" in agreement(_estimate(14.0, 0.1), _estimate(10.0, 0.1), _estimate(-4, 0.1))
    vague = agreement(_estimate(14.0, 0.5), _estimate(10.0, 5.0), _estimate(-4.0, 5.0))
    assert "undetermined, the two figures' 95% uncertainty, +-10.0 ms" in vague
    assert "undetermined, one of the figures has no known uncertainty" in agreement(
        _estimate(14.0, 0.1), _estimate(10.0, 0.1), Estimate(-4, -math.inf, math.inf, math.inf, 0)
    )


def test_the_gap_is_the_same_from_both_ends(tmp_path):
    """predicted after - measured after == measured saving - predicted saving, and its
    interval widens with the before run's drift."""
    from gilprof.analysis.what_if import Prediction

    rng = random.Random(3)
    steady = [30 + rng.gauss(0, 2) for _ in range(300)]
    drifting = [26 + 8 * i / 300 + rng.gauss(0, 2) for i in range(300)]
    after = _steps([22 + rng.gauss(0, 1) for _ in range(300)])
    gaps = []
    for series in (steady, drifting):
        before = _steps(series)
        period = before.host_step_ms.mean
        after_pred = math.fsum(max(h - 9.0, 20.0) for h in before.host_ms) / len(before.host_ms)
        prediction = Prediction(
            ("f",), _estimate(9.0, 0.2), period, period, _estimate(period - 9, 0.2), 20.0,
            False, _estimate(after_pred, 0.2), _estimate(period - after_pred, 0.2), (), "",
            device_given=True,
        )  # fmt: skip
        gap = prediction_gap(prediction, before, after)
        measured = measured_saving(before, after)
        assert math.isclose(gap.value, measured.value - prediction.step_saving_ms.value)
        gaps.append(gap.high - gap.low)
    assert gaps[1] > 1.3 * gaps[0]


def test_the_measured_saving_is_before_minus_after(tmp_path):
    rng = random.Random(2)
    before = _steps([30 + rng.gauss(0, 1) for _ in range(200)])
    after = _steps([22 + rng.gauss(0, 1) for _ in range(200)])
    saving = measured_saving(before, after)
    assert saving.low < 8 < saving.high and 7 < saving.value < 9


def _steps(host_ms: list[float]) -> RankSteps:
    steps = summarize(_records(host_ms), rank=0).rank(0)
    assert steps is not None
    return steps


def _records(host_ms):
    from gilprof.steps import parse_lines

    lines = [
        f"iter = {i}, global_rank = 0, rank = 0, host_step_time = {ms:.2f}ms"
        for i, ms in enumerate(host_ms)
    ]
    return parse_lines(lines)


def _change(name, before, after, half):
    from gilprof.analysis.per_step import CostChange
    from gilprof.stats import Difference

    delta = after - before
    low, high = delta - half, delta + half
    return CostChange(
        name,
        "broadcast.py",
        Difference(before, after, delta, low, high, None, low > 0 or high < 0),
        None,
    )


def test_a_control_that_moved_makes_any_judgement_undetermined():
    """Code both variants run alike costing 11.0 ms per step before and 6.8 after (a demo run
    at 04:22 on 2026-12-05) means the two runs ran at different host speeds: neither the
    'DISAGREES' nor an 'agrees' that came with it says anything about the prediction."""
    from gilprof.cli._demo_check import control_line

    moved = _change("_pickle_at_root", 11.0, 6.8, 1.8)
    steady = _change("_pickle_at_root", 6.6, 5.9, 1.2)
    disagrees = (_estimate(12.0, 0.2), _estimate(17.5, 1.8), _estimate(5.5, 0.5))
    assert "DISAGREES" in agreement(*disagrees, steady)
    said = agreement(*disagrees, moved)
    assert "undetermined, the runs' host speed differed" in said and "11.0" in said
    agrees = (_estimate(11.0, 0.1), _estimate(10.0, 0.1), _estimate(0.0, 0.1))
    assert "agrees (within +-20%)" in agreement(*agrees, steady)
    assert "undetermined" in agreement(*agrees, moved)
    assert "host speed differed" in control_line(moved)
    assert "the same within its uncertainty" in control_line(steady)


def test_the_control_is_found_by_what_both_variants_call():
    """RUN_ALIKE names code that both safe_broadcast variants call (read from their source,
    so an edit of the reference code that drops the call fails here), and speed_control
    picks its row out of a cost comparison."""
    import ast
    import inspect

    from gilprof.analysis.per_step import CostComparison
    from gilprof.cli._demo_check import speed_control
    from gilprof.reference import broadcast, fixes

    for variant in (broadcast.safe_broadcast_before, broadcast.safe_broadcast):
        calls = {
            node.func.id
            for node in ast.walk(ast.parse(inspect.getsource(variant)))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        }
        assert set(fixes.RUN_ALIKE) <= calls, (variant.__name__, calls)
    control = _change("_pickle_at_root", 6.0, 6.5, 1.0)
    other = _change("safe_broadcast", 20.0, 13.0, 1.0)
    costs = CostComparison(
        "step",
        ("loop", "loop"),
        {("safe_broadcast", "hotspots.py"): other, ("_pickle_at_root", "broadcast.py"): control},
    )
    assert speed_control(costs) is control
    assert speed_control(None) is None
