"""Quantiles, Student t, and the interval estimators, checked by simulation where it matters.

The simulations draw a GIL-held on/off state that persists over many sampler ticks (a
two-state Markov chain), the way a thread holds the GIL through a long pure-Python call.
Ticks are grouped into windows as a profile groups samples; the batch-means interval
must keep its nominal coverage there, where a binomial interval does not.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator

import pytest

from gilprof.stats import (
    Difference,
    batch_windows,
    median_difference_ci,
    quantile,
    quantiles,
    ratio_difference_ci,
    ratio_mean_ci,
    t_cdf,
    t_quantile,
)

# ---------------------------------------------------------------------------------------
# Quantiles


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1, 2, 3, 4], 0.5, 2.5),
        ([1, 2, 3, 4], 0.25, 1.75),
        ([1, 2, 3, 4], 0.0, 1.0),
        ([1, 2, 3, 4], 1.0, 4.0),
        ([4, 1, 3, 2], 0.9, 3.7),
        ([10.0], 0.3, 10.0),
        ([0, 10], 0.99, 9.9),
        ([5, 5, 5, 100], 0.5, 5.0),
    ],
)
def test_quantile_interpolates_linearly_like_numpy(
    values: list[float], q: float, expected: float
) -> None:
    assert quantile(values, q) == pytest.approx(expected)


def test_quantiles_match_single_calls_and_leave_input_unsorted() -> None:
    values = [9.0, 1.0, 5.0, 3.0, 7.0]
    assert quantiles(values, (0.1, 0.5, 0.99)) == [quantile(values, q) for q in (0.1, 0.5, 0.99)]
    assert values == [9.0, 1.0, 5.0, 3.0, 7.0]


@pytest.mark.parametrize(("values", "q"), [([], 0.5), ([1.0], -0.1), ([1.0], 1.5)])
def test_quantile_rejects_empty_input_and_bad_levels(values: list[float], q: float) -> None:
    with pytest.raises(ValueError):
        quantile(values, q)


# ---------------------------------------------------------------------------------------
# Student t

# Two-sided 95% critical values from a standard t table.
T_TABLE_0975 = {1: 12.7062, 2: 4.3027, 5: 2.5706, 10: 2.2281, 30: 2.0423, 1000: 1.9623}


@pytest.mark.parametrize(("dof", "expected"), sorted(T_TABLE_0975.items()))
def test_t_quantile_matches_table(dof: int, expected: float) -> None:
    assert t_quantile(0.975, dof) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize(
    ("p", "dof", "expected"),
    [(0.995, 3, 5.8409), (0.9, 4, 1.5332), (0.95, 20, 1.7247), (0.9995, 1, 636.6192)],
)
def test_t_quantile_matches_table_at_other_levels(p: float, dof: int, expected: float) -> None:
    assert t_quantile(p, dof) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("dof", [0.7, 1.0, 1.5, 2.0, 3.3, 7.9, 44.4, 5000.0])
@pytest.mark.parametrize("p", [0.001, 0.2, 0.5, 0.75, 0.975, 0.9999])
def test_t_quantile_inverts_cdf_for_fractional_dof(p: float, dof: float) -> None:
    t = t_quantile(p, dof)
    assert t_cdf(t, dof) == pytest.approx(p, abs=1e-9)
    assert t_quantile(1.0 - p, dof) == pytest.approx(-t, rel=1e-9, abs=1e-12)


def test_t_quantile_tends_to_normal() -> None:
    assert t_quantile(0.975, math.inf) == pytest.approx(1.959964, abs=1e-6)
    assert t_quantile(0.975, 1e7) == pytest.approx(1.959964, abs=1e-5)


@pytest.mark.parametrize(("p", "dof"), [(0.0, 5), (1.0, 5), (0.5, 0), (0.5, -1)])
def test_t_quantile_rejects_bad_arguments(p: float, dof: float) -> None:
    with pytest.raises(ValueError):
        t_quantile(p, dof)


# ---------------------------------------------------------------------------------------
# Ratio estimators


def test_ratio_mean_ci_matches_hand_computation() -> None:
    numerators = [2.0, 4.0, 3.0]
    denominators = [10.0, 10.0, 20.0]
    estimate = ratio_mean_ci(numerators, denominators)
    value = 9.0 / 40.0
    residuals = [(n - value * d) / 40.0 for n, d in zip(numerators, denominators, strict=True)]
    stderr = math.sqrt(3 / 2 * sum(r * r for r in residuals))
    assert estimate.value == pytest.approx(value)
    assert estimate.stderr == pytest.approx(stderr)
    assert estimate.dof == 2
    assert estimate.high - estimate.value == pytest.approx(4.302653 * stderr, rel=1e-6)
    assert estimate.value - estimate.low == pytest.approx(estimate.high - estimate.value)


def test_ratio_mean_ci_without_two_windows_has_no_interval() -> None:
    estimate = ratio_mean_ci([3.0], [10.0])
    assert estimate.value == pytest.approx(0.3)
    assert (estimate.low, estimate.high, estimate.stderr) == (-math.inf, math.inf, math.inf)
    difference = ratio_difference_ci([3.0], [10.0], [1.0, 2.0], [10.0, 10.0])
    assert not difference.significant
    assert math.isinf(difference.low) and math.isinf(difference.high)


def test_ratio_mean_ci_rejects_mismatched_or_empty_denominators() -> None:
    with pytest.raises(ValueError):
        ratio_mean_ci([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        ratio_mean_ci([0.0, 0.0], [0.0, 0.0])


def test_ratio_difference_relative_is_none_when_before_is_zero() -> None:
    difference = ratio_difference_ci([0, 0, 0], [10, 10, 10], [1, 2, 3], [10, 10, 10])
    assert difference.before == 0.0
    assert difference.relative is None
    assert difference.delta == pytest.approx(0.2)


def test_ratio_difference_uses_welch_satterthwaite_dof() -> None:
    # A tight "before" (tiny variance) leaves the dof of the noisy "after" side.
    before_num, before_den = [5.0, 5.0, 5.0, 5.0, 5.1], [10.0] * 5
    after_num, after_den = [1.0, 4.0, 2.0], [10.0] * 3
    difference = ratio_difference_ci(before_num, before_den, after_num, after_den)
    after = ratio_mean_ci(after_num, after_den)
    before = ratio_mean_ci(before_num, before_den)
    stderr = math.hypot(before.stderr, after.stderr)
    # dof is just above 2, so the half width is close to t(0.975, 2) * stderr.
    half_width = (difference.high - difference.low) / 2
    assert 4.0 * stderr < half_width < 4.3027 * stderr
    assert difference.relative == pytest.approx(difference.delta / difference.before)
    assert difference.significant == (difference.low > 0 or difference.high < 0)


def test_batch_windows_preserves_totals_and_balances_sizes() -> None:
    numerators = [float(i % 7) for i in range(95)]
    denominators = [1.0 + i % 3 for i in range(95)]
    batch_num, batch_den = batch_windows(numerators, denominators, max_batches=30)
    assert len(batch_num) == len(batch_den) == 30
    assert sum(batch_num) == pytest.approx(sum(numerators))
    assert sum(batch_den) == pytest.approx(sum(denominators))
    assert batch_windows([1.0, 2.0], [3.0, 4.0], max_batches=30) == ([1.0, 2.0], [3.0, 4.0])
    ones = batch_windows([1.0] * 95, [1.0] * 95, max_batches=30)[1]
    assert max(ones) - min(ones) <= 1


# ---------------------------------------------------------------------------------------
# Simulation: windowed sampling of a persistent on/off state


def onoff_windows(
    rng: random.Random, share: float, rho: float, windows: int, ticks_per_window: int
) -> tuple[list[float], list[float]]:
    """On-ticks per window of a two-state Markov chain with P(on) = share and lag-1
    autocorrelation rho, drawn run by run (geometric run lengths) to stay fast."""
    to_on = share * (1.0 - rho)
    to_off = (1.0 - share) * (1.0 - rho)
    total = windows * ticks_per_window
    on_ticks = [0.0] * windows
    tick = 0
    state_on = rng.random() < share
    while tick < total:
        leave = to_off if state_on else to_on
        run = 1 + int(math.log(1.0 - rng.random()) / math.log(1.0 - leave))
        end = min(tick + run, total)
        if state_on:
            while tick < end:
                window = tick // ticks_per_window
                window_end = min(end, (window + 1) * ticks_per_window)
                on_ticks[window] += window_end - tick
                tick = window_end
        tick = end
        state_on = not state_on
    return on_ticks, [float(ticks_per_window)] * windows


def naive_binomial_difference_significant(
    before: tuple[list[float], list[float]], after: tuple[list[float], list[float]]
) -> bool:
    """What treating every tick as an independent Bernoulli draw would conclude."""
    shares = []
    variances = []
    for on, ticks in (before, after):
        total = sum(ticks)
        p = sum(on) / total
        shares.append(p)
        variances.append(p * (1 - p) / total)
    return abs(shares[1] - shares[0]) > 1.959964 * math.sqrt(sum(variances))


TRIALS = 400


def test_simulated_process_has_the_requested_share_and_correlation() -> None:
    windows, ticks_per_window, share, rho = 2000, 100, 0.3, 0.9
    on, ticks = onoff_windows(random.Random(7), share, rho, windows, ticks_per_window)
    assert sum(on) / sum(ticks) == pytest.approx(share, abs=0.015)
    # Variance of a window's share: binomial p(1-p)/m times the AR(1) inflation factor
    # (1+rho)/(1-rho) - 2 rho (1-rho^m) / (m (1-rho)^2), about 17 here.
    window_shares = [count / ticks_per_window for count in on]
    mean = sum(window_shares) / windows
    variance = sum((x - mean) ** 2 for x in window_shares) / (windows - 1)
    inflation = variance / (share * (1 - share) / ticks_per_window)
    assert 13 < inflation < 22


def test_ratio_ci_covers_the_true_share_at_nominal_rate() -> None:
    rng = random.Random(20240801)
    covered = 0
    for _ in range(TRIALS):
        estimate = ratio_mean_ci(*onoff_windows(rng, 0.3, 0.9, 30, 100))
        covered += estimate.low <= 0.3 <= estimate.high
    assert 0.90 <= covered / TRIALS <= 0.98


Run = tuple[list[float], list[float]]  # onoff_windows: on-ticks and ticks, per window


def paired_runs(
    rng: random.Random, trials: int, before: float, after: float, ticks_per_window: int
) -> Iterator[tuple[Run, Run]]:
    """`trials` (before, after) pairs of simulated runs: 30 windows each, rho 0.9."""
    for _ in range(trials):
        yield (
            onoff_windows(rng, before, 0.9, 30, ticks_per_window),
            onoff_windows(rng, after, 0.9, 30, ticks_per_window),
        )


def test_false_positive_rate_is_nominal_and_binomial_would_be_far_higher() -> None:
    batch_means_hits = 0
    naive_hits = 0
    for before, after in paired_runs(random.Random(11), TRIALS, 0.3, 0.3, 100):
        batch_means_hits += ratio_difference_ci(*before, *after).significant
        naive_hits += naive_binomial_difference_significant(before, after)
    batch_means_rate = batch_means_hits / TRIALS
    naive_rate = naive_hits / TRIALS
    assert 0.01 <= batch_means_rate <= 0.12
    # Ticks are correlated over ~10 ticks: the binomial interval is ~4x too narrow and
    # "finds" a change in most comparisons of two identical runs.
    assert naive_rate > 0.4
    assert naive_rate > 4 * batch_means_rate


def test_known_difference_is_detected_with_the_right_sign() -> None:
    trials = 100
    detected = 0
    for before, after in paired_runs(random.Random(5), trials, 0.30, 0.20, 500):
        difference = ratio_difference_ci(*before, *after)
        detected += difference.significant and difference.high < 0
        assert difference.relative is not None
    assert detected >= 0.95 * trials


# ---------------------------------------------------------------------------------------
# Block bootstrap of median differences


def ar1_series(rng: random.Random, n: int, mean: float, phi: float, sigma: float) -> list[float]:
    values = []
    level = 0.0
    for _ in range(n):
        level = phi * level + rng.gauss(0.0, sigma)
        values.append(mean + level)
    return values


def test_median_difference_is_deterministic_for_a_seed() -> None:
    rng = random.Random(1)
    before = ar1_series(rng, 300, 120.0, 0.7, 3.0)
    after = ar1_series(rng, 300, 105.0, 0.7, 3.0)
    first = median_difference_ci(before, after, resamples=300, seed=3)
    again = median_difference_ci(before, after, resamples=300, seed=3)
    other = median_difference_ci(before, after, resamples=300, seed=4)
    assert first == again
    assert isinstance(first, Difference)
    assert (first.low, first.high) != (other.low, other.high)
    assert first.delta == pytest.approx(quantile(after, 0.5) - quantile(before, 0.5))
    assert first.significant and first.high < 0
    assert first.low <= first.delta <= first.high
    assert first.relative == pytest.approx(first.delta / first.before)


def test_median_difference_rarely_flags_identical_processes() -> None:
    rng = random.Random(2)
    trials = 30
    flagged = 0
    for seed in range(trials):
        before = ar1_series(rng, 150, 100.0, 0.6, 2.0)
        after = ar1_series(rng, 150, 100.0, 0.6, 2.0)
        flagged += median_difference_ci(before, after, resamples=150, seed=seed).significant
    assert flagged <= 0.2 * trials


def test_median_difference_with_one_value_has_no_interval() -> None:
    difference = median_difference_ci([5.0], [4.0, 6.0, 7.0])
    assert difference.delta == pytest.approx(1.0)
    assert math.isinf(difference.low) and math.isinf(difference.high)
    assert not difference.significant
    with pytest.raises(ValueError):
        median_difference_ci([], [1.0])


def test_median_difference_explicit_block_and_speed() -> None:
    rng = random.Random(9)
    before = ar1_series(rng, 2000, 50.0, 0.8, 1.0)
    after = ar1_series(rng, 2000, 52.0, 0.8, 1.0)
    started = time.perf_counter()
    difference = median_difference_ci(before, after, block=20, resamples=200, seed=0)
    # Generous: 200 resamples of 2 x 2000 values take well under a second on one core.
    assert time.perf_counter() - started < 10.0
    assert difference.significant and difference.low > 0
