"""Quantiles, Student t, and confidence intervals for serially correlated measurements.

Stdlib only. GIL shares come from samples grouped into time windows, and step times come
from consecutive loop iterations: neither is a set of independent draws, so intervals here
use batch means (ratio estimators) or a moving-block bootstrap (medians) rather than
binomial or i.i.d. formulas, which are far too narrow on correlated data.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

__all__ = [
    "Difference",
    "Estimate",
    "batch_windows",
    "independent_sum",
    "median_difference_ci",
    "quantile",
    "quantiles",
    "ratio_difference_ci",
    "ratio_mean_ci",
    "series_mean_ci",
    "t_cdf",
    "t_quantile",
]


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its two-sided confidence interval; `dof` 0 means no interval."""

    value: float
    low: float
    high: float
    stderr: float
    dof: float


@dataclass(frozen=True)
class Difference:
    """`after - before` with its interval; significant iff the interval excludes 0."""

    before: float
    after: float
    delta: float
    low: float
    high: float
    relative: float | None
    significant: bool


# ---------------------------------------------------------------------------------------
# Quantiles


def quantiles(values: Sequence[float], qs: Sequence[float]) -> list[float]:
    """Several quantiles with one sort; linear interpolation (numpy's default method)."""
    if len(values) == 0:
        raise ValueError("quantile of an empty sequence")
    ordered = sorted(values)
    return [_quantile_sorted(ordered, q) for q in qs]


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) with linear interpolation between order statistics."""
    return quantiles(values, (q,))[0]


def _quantile_sorted(ordered: Sequence[float], q: float) -> float:
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile level must be within [0, 1], got {q}")
    position = (len(ordered) - 1) * q
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    fraction = position - below
    return ordered[below] + (ordered[above] - ordered[below]) * fraction


# ---------------------------------------------------------------------------------------
# Student t distribution


def _continued_fraction_beta(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function, evaluated by modified Lentz."""
    tiny = 1e-300
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 2000):
        two_m = 2 * m
        even_term = m * (b - m) * x / ((a + two_m - 1.0) * (a + two_m))
        odd_term = -(a + m) * (a + b + m) * x / ((a + two_m) * (a + two_m + 1.0))
        for term in (even_term, odd_term):
            d = 1.0 + term * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + term / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return result


def _regularized_beta(a: float, b: float, x: float, one_minus_x: float) -> float:
    """I_x(a, b); the caller passes 1 - x separately so that it keeps full precision."""
    if x <= 0.0:
        return 0.0
    if one_minus_x <= 0.0:
        return 1.0
    log_front = (
        a * math.log(x)
        + b * math.log(one_minus_x)
        - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    )
    # The fraction converges fast only below the mode; use the symmetry I_x(a,b) = 1 - I_{1-x}(b,a).
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _continued_fraction_beta(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction_beta(b, a, one_minus_x) / b


def _t_upper_tail(t: float, dof: float) -> float:
    """P(T > t) for t >= 0."""
    denominator = dof + t * t
    return 0.5 * _regularized_beta(dof / 2.0, 0.5, dof / denominator, t * t / denominator)


def _t_density(t: float, dof: float) -> float:
    log_norm = (
        math.lgamma((dof + 1.0) / 2.0) - math.lgamma(dof / 2.0) - 0.5 * math.log(dof * math.pi)
    )
    return math.exp(log_norm - (dof + 1.0) / 2.0 * math.log1p(t * t / dof))


def t_cdf(t: float, dof: float) -> float:
    """Student t cumulative distribution function for any dof > 0 (inf means normal)."""
    if dof <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {dof}")
    if math.isinf(dof):
        return NormalDist().cdf(t)
    tail = _t_upper_tail(abs(t), dof)
    return 1.0 - tail if t >= 0 else tail


def _cornish_fisher_guess(z: float, dof: float) -> float:
    """Series expansion of the t quantile around the normal one; a good Newton start."""
    z2 = z * z
    return z * (
        1.0
        + (z2 + 1.0) / (4.0 * dof)
        + (5.0 * z2 * z2 + 16.0 * z2 + 3.0) / (96.0 * dof**2)
        + (3.0 * z2**3 + 19.0 * z2 * z2 + 17.0 * z2 - 15.0) / (384.0 * dof**3)
    )


def t_quantile(p: float, dof: float) -> float:
    """Inverse of `t_cdf`: the t with P(T <= t) = p, for 0 < p < 1 and dof > 0."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability must be within (0, 1), got {p}")
    if dof <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {dof}")
    if p < 0.5:
        return -t_quantile(1.0 - p, dof)
    if p == 0.5:
        return 0.0
    if math.isinf(dof):
        return NormalDist().inv_cdf(p)
    if dof == 1:
        return math.tan(math.pi * (p - 0.5))
    if dof == 2:
        return (2.0 * p - 1.0) / math.sqrt(2.0 * p * (1.0 - p))
    upper = 1.0 - p
    # Solve P(T > t) = upper by Newton steps kept inside a shrinking bracket [low, high].
    low, high = 0.0, max(1.0, 2.0 * _cornish_fisher_guess(NormalDist().inv_cdf(p), dof))
    while _t_upper_tail(high, dof) > upper:
        low, high = high, high * 2.0
    t = min(max(_cornish_fisher_guess(NormalDist().inv_cdf(p), dof), low), high)
    for _ in range(200):
        excess = _t_upper_tail(t, dof) - upper
        if excess > 0:
            low = t
        else:
            high = t
        density = _t_density(t, dof)
        candidate = t + excess / density if density > 0 else math.nan
        if not low < candidate < high:
            candidate = (low + high) / 2.0
        if abs(candidate - t) <= 1e-12 * (1.0 + abs(t)):
            return candidate
        t = candidate
    return t


# ---------------------------------------------------------------------------------------
# Ratio estimators over time windows (batch means)


def ratio_mean_ci(
    numerators: Sequence[float], denominators: Sequence[float], confidence: float = 0.95
) -> Estimate:
    """sum(num)/sum(den) with a batch-means interval, one batch per window.

    The variance uses the linearization of the ratio, so windows of unequal length (or
    unequal sample counts) are weighted by their denominators. Windows must be long
    compared with the correlation time of the process for the interval to hold;
    regroup fine windows with `batch_windows` first.
    """
    if len(numerators) != len(denominators):
        raise ValueError("numerators and denominators differ in length")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")
    total_den = math.fsum(denominators)
    if total_den == 0:
        raise ValueError("denominators sum to zero")
    value = math.fsum(numerators) / total_den
    windows = len(numerators)
    if windows < 2:
        return Estimate(value, -math.inf, math.inf, math.inf, 0.0)
    residuals = [
        (num - value * den) / total_den for num, den in zip(numerators, denominators, strict=True)
    ]
    residual_sq = math.fsum(r * r for r in residuals)
    # Neighbouring windows are still correlated when a share drifts (a phase of heavy load
    # lasts several windows). Batch means assume independent batches; inflate the variance
    # by the AR(1) factor (1 + rho) / (1 - rho) of the residuals' lag-1 autocorrelation, and
    # shrink the degrees of freedom to the effective number of windows.
    rho = lag1_autocorrelation(residuals)
    inflation = (1 + rho) / (1 - rho)
    stderr = math.sqrt(windows / (windows - 1) * residual_sq * inflation)
    dof = max(1.0, windows / inflation - 1)
    half_width = t_quantile(0.5 + confidence / 2.0, dof) * stderr
    return Estimate(value, value - half_width, value + half_width, stderr, dof)


def lag1_autocorrelation(values: Sequence[float], cap: float = 0.9) -> float:
    """Bias-corrected lag-1 autocorrelation, clamped to [0, cap] (0 for fewer than 3 values).

    Negative estimates are clamped to 0 so the interval is never narrowed below batch means;
    the cap keeps one freak series from producing an infinite interval.
    """
    count = len(values)
    if count < 3:
        return 0.0
    mean = math.fsum(values) / count
    centered = [v - mean for v in values]
    denominator = math.fsum(c * c for c in centered)
    if denominator == 0:
        return 0.0
    numerator = math.fsum(a * b for a, b in itertools.pairwise(centered))
    raw = numerator / denominator
    # The estimate is biased low in short series, E[r] ~ rho - (1 + 3 rho) / n
    # (Marriott & Pope, 1954); windows are few, so correct for it.
    return min(cap, max(0.0, raw + (1 + 3 * raw) / count))


def ratio_difference_ci(
    before_num: Sequence[float],
    before_den: Sequence[float],
    after_num: Sequence[float],
    after_den: Sequence[float],
    confidence: float = 0.95,
) -> Difference:
    """after ratio - before ratio, with a Welch-Satterthwaite t interval."""
    before = ratio_mean_ci(before_num, before_den, confidence)
    after = ratio_mean_ci(after_num, after_den, confidence)
    return _welch_difference(before, after, confidence)


def estimate_difference(before: Estimate, after: Estimate, confidence: float = 0.95) -> Difference:
    """after - before for two independent estimates, with a Welch-Satterthwaite t interval."""
    return _welch_difference(before, after, confidence)


def _welch_difference(before: Estimate, after: Estimate, confidence: float) -> Difference:
    delta = after.value - before.value
    relative = delta / before.value if before.value != 0 else None
    interval = independent_sum(delta, (before, after), confidence)
    low, high = interval.low, interval.high
    return Difference(before.value, after.value, delta, low, high, relative, low > 0 or high < 0)


def independent_sum(value: float, parts: Sequence[Estimate], confidence: float = 0.95) -> Estimate:
    """`value`, a signed sum of the independent estimates `parts`, with its interval: the
    standard errors add in quadrature, the degrees of freedom by Welch-Satterthwaite. A part
    without an interval (dof 0) leaves the sum without one."""
    if not parts or any(p.dof == 0 for p in parts):
        return Estimate(value, -math.inf, math.inf, math.inf, 0.0)
    variance = math.fsum(p.stderr**2 for p in parts)
    if variance == 0:
        return Estimate(value, value, value, 0.0, math.inf)
    dof = variance**2 / math.fsum(p.stderr**4 / p.dof for p in parts)
    half_width = t_quantile(0.5 + confidence / 2.0, dof) * math.sqrt(variance)
    return Estimate(value, value - half_width, value + half_width, math.sqrt(variance), dof)


def batch_windows(
    numerators: Sequence[float], denominators: Sequence[float], max_batches: int = 30
) -> tuple[list[float], list[float]]:
    """Sum consecutive windows into at most `max_batches` contiguous batches.

    Fewer, longer batches make batch means nearly independent when the process is
    correlated over several windows; sizes differ by at most one window.
    """
    if len(numerators) != len(denominators):
        raise ValueError("numerators and denominators differ in length")
    if max_batches < 1:
        raise ValueError("max_batches must be at least 1")
    count = len(numerators)
    if count <= max_batches:
        return list(numerators), list(denominators)
    bounds = [i * count // max_batches for i in range(max_batches + 1)]
    batch_num = [math.fsum(numerators[s:e]) for s, e in itertools.pairwise(bounds)]
    batch_den = [math.fsum(denominators[s:e]) for s, e in itertools.pairwise(bounds)]
    return batch_num, batch_den


def series_mean_ci(
    values: Sequence[float], confidence: float = 0.95, max_batches: int = 20
) -> Estimate:
    """The mean of a correlated series (a log's step times) with a batch-means interval.

    Consecutive values are summed into at most `max_batches` batches, so a slow drift within
    the series (steps that grow slower for seconds at a time) widens the interval, where a
    per-value standard error would call it precise.
    """
    if not values:
        raise ValueError("no values")
    numerators, denominators = batch_windows(values, [1.0] * len(values), max_batches)
    return ratio_mean_ci(numerators, denominators, confidence)


# ---------------------------------------------------------------------------------------
# Medians of correlated series (moving-block bootstrap)


def default_block_length(count: int) -> int:
    """n ** (1/3), the usual order of the optimal block length for variance-type targets."""
    return max(1, round(count ** (1.0 / 3.0)))


def _block_bootstrap_median(values: list[float], block: int, rng: random.Random) -> float:
    count = len(values)
    last_start = count - block
    resample: list[float] = []
    while len(resample) < count:
        start = rng.randint(0, last_start)
        resample.extend(values[start : start + block])
    del resample[count:]
    resample.sort()
    return _quantile_sorted(resample, 0.5)


def median_difference_ci(
    before_values: Sequence[float],
    after_values: Sequence[float],
    *,
    confidence: float = 0.95,
    block: int | None = None,
    resamples: int = 2000,
    seed: int = 0,
) -> Difference:
    """median(after) - median(before) with a moving-block bootstrap percentile interval.

    Consecutive step times are correlated (a slow phase lasts many iterations), so the
    series are resampled in blocks of `block` consecutive values (default n ** (1/3),
    per series). Cost is about `resamples` x (n log n) per series; deterministic for a
    given `seed`. With fewer than 2 values in either series there is no interval.
    """
    if len(before_values) == 0 or len(after_values) == 0:
        raise ValueError("median difference needs values on both sides")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    if block is not None and block < 1:
        raise ValueError("block length must be at least 1")
    before = list(before_values)
    after = list(after_values)
    before_median = quantile(before, 0.5)
    after_median = quantile(after, 0.5)
    delta = after_median - before_median
    relative = delta / before_median if before_median != 0 else None
    if len(before) < 2 or len(after) < 2:
        return Difference(before_median, after_median, delta, -math.inf, math.inf, relative, False)
    before_block = min(block or default_block_length(len(before)), len(before))
    after_block = min(block or default_block_length(len(after)), len(after))
    rng = random.Random(seed)
    deltas = [
        _block_bootstrap_median(after, after_block, rng)
        - _block_bootstrap_median(before, before_block, rng)
        for _ in range(resamples)
    ]
    alpha = 1.0 - confidence
    low, high = quantiles(deltas, (alpha / 2.0, 1.0 - alpha / 2.0))
    return Difference(before_median, after_median, delta, low, high, relative, low > 0 or high < 0)
