"""gilprof.analysis.compare: known changes are found with their sign, same-workload noise is not.

Matching, rows, bad input and step times: test_compare_rows.py.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterator

import pytest

from gilprof.analysis.compare import (
    IMPROVED,
    REGRESSED,
    UNCHANGED,
    Comparison,
    ShareChange,
    compare_profiles,
)
from gilprof.model import Mode, Sample
from gilprof.profile import Profile

from .builders import (
    EXEC,
    INGRESS,
    exact_profile,
    frames,
    hot_noisy_windows,
    make_profile,
    one_row,
    sample,
)


def _util(c: Comparison) -> ShareChange:
    assert c.utilization is not None
    return c.utilization


# ---------------------------------------------------------------------------------------
# Exact shares from hand-made counts


def test_shares_are_counts_over_ticks_on_each_side():
    before = exact_profile(hot=30, loop_self=10, serve=20)
    after = exact_profile(hot=10, loop_self=10, serve=20)
    c = compare_profiles(before, after, watch=("hot",))
    assert c.mode is Mode.GIL and c.batches == (4, 4)
    util = _util(c).total
    assert (util.before, util.after) == pytest.approx((0.60, 0.40))
    hot = one_row(c.functions, "hot", "app.py")
    assert (hot.total.before, hot.total.after, hot.total.delta) == pytest.approx(
        (0.30, 0.10, -0.20)
    )
    assert hot.total.relative == pytest.approx(-2 / 3)
    assert (hot.self_before, hot.self_after) == pytest.approx((0.30, 0.10))
    loop = one_row(c.functions, "loop", "app.py")
    assert (loop.total.before, loop.total.after) == pytest.approx((0.40, 0.20))
    assert (loop.self_before, loop.self_after) == pytest.approx((0.10, 0.10))
    threads = {t.name: t.total for t in c.threads}
    assert set(threads) == {"exec", "ingress"}
    assert (threads["exec"].before, threads["exec"].after) == pytest.approx((0.40, 0.20))
    assert threads["ingress"].delta == pytest.approx(0.0)
    watched = one_row(c.watch, "hot")
    assert watched.total.delta == pytest.approx(-0.20)
    # Identical windows on each side: zero variance, so any change is certain.
    assert hot.verdict == IMPROVED and watched.verdict == IMPROVED
    assert one_row(c.threads, "ingress").verdict == UNCHANGED


def test_thread_bootstrap_frames_are_left_out_of_the_function_rows_unless_asked():
    def side(hot: int) -> Profile:
        stack = ("Thread._bootstrap@threading.py", "Thread.run@threading.py", "loop", "hot")
        return make_profile([(100, [sample("exec", *stack, count=hot, tid=EXEC)])] * 4)

    before, after = side(30), side(10)
    names = {f.name for f in compare_profiles(before, after).functions}
    assert names == {"loop", "hot"}
    names = {f.name for f in compare_profiles(before, after, all_frames=True).functions}
    assert names == {"Thread._bootstrap", "Thread.run", "loop", "hot"}


def test_a_profile_compared_with_itself_has_no_change_anywhere():
    rng = random.Random(3)
    profile = make_profile(
        [
            (
                200,
                [
                    sample("exec", "loop", "hot", count=rng.randint(30, 70), tid=EXEC),
                    sample("ingress", "serve", count=rng.randint(40, 80), tid=INGRESS),
                ],
            )
            for _ in range(20)
        ]
    )
    c = compare_profiles(profile, profile, watch=("hot",))
    rows = [_util(c), *c.threads, *c.functions, *c.watch]
    assert len(rows) == 1 + 2 + 3 + 1
    for row in rows:
        assert row.total.delta == 0.0
        assert row.total.low < 0 < row.total.high, row
        assert row.verdict == UNCHANGED


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_known_drop_from_30_to_20_percent_is_found_with_its_sign(seed):
    rng = random.Random(seed)
    before_windows = hot_noisy_windows(rng, 0.30)
    after_windows = hot_noisy_windows(rng, 0.20)
    before, after = make_profile(before_windows), make_profile(after_windows)

    def hot_share(windows):
        return sum(s[0].count for _, s in windows) / sum(t for t, _ in windows)

    c = compare_profiles(before, after, watch=("hot",))
    for row in (one_row(c.watch, "hot"), one_row(c.functions, "hot", "app.py")):
        d = row.total
        assert d.before == pytest.approx(hot_share(before_windows))
        assert d.after == pytest.approx(hot_share(after_windows))
        assert d.delta == pytest.approx(-0.10, abs=0.03)
        assert d.significant and d.high < 0 and row.verdict == IMPROVED
        # The interval is about as wide as the window noise says, not a binomial sliver.
        assert 0.01 < d.high - d.low < 0.08
    reverse = compare_profiles(after, before, watch=("hot",))
    back = one_row(reverse.watch, "hot")
    assert back.verdict == REGRESSED and back.total.low > 0
    assert back.total.delta == pytest.approx(-one_row(c.watch, "hot").total.delta)


def test_an_untouched_function_next_to_a_changed_one_is_unchanged():
    rng = random.Random(11)
    before = make_profile(hot_noisy_windows(rng, 0.30))
    after = make_profile(hot_noisy_windows(rng, 0.30))
    c = compare_profiles(before, after, watch=("hot",))
    assert one_row(c.watch, "hot").verdict == UNCHANGED
    assert abs(one_row(c.watch, "hot").total.delta) < 0.03


# ---------------------------------------------------------------------------------------
# False-positive rate on two runs of the same workload


HOT, WORK, INGRESS_SHARE = 0.25, 0.15, 0.30
_HOT_FRAMES = frames("main", "loop", "hot")
_WORK_FRAMES = frames("main", "loop", "work")
_SERVE_FRAMES = frames("serve", "parse")


def _beta_shares(
    rng: random.Random, windows: int, concentration: float = 20.0
) -> Iterator[tuple[float, float]]:
    """Independent windows, each with its own share: the within-window correlation."""
    for _ in range(windows):
        yield (
            rng.betavariate(HOT * concentration, (1 - HOT) * concentration),
            rng.betavariate(INGRESS_SHARE * concentration, (1 - INGRESS_SHARE) * concentration),
        )


def _ar1_shares(
    rng: random.Random, windows: int, phi: float, sd: float = 0.06
) -> Iterator[tuple[float, float]]:
    """Shares that drift: each window's offset keeps `phi` of the previous one."""
    keep = math.sqrt(1 - phi * phi)
    x, y = rng.gauss(0, sd), rng.gauss(0, sd)
    for _ in range(windows):
        yield min(0.5, max(0.0, HOT + x)), min(0.45, max(0.0, INGRESS_SHARE + y))
        x, y = phi * x + keep * rng.gauss(0, sd), phi * y + keep * rng.gauss(0, sd)


def _workload(rng: random.Random, shares: Iterator[tuple[float, float]]) -> Profile:
    """Per window ~200 ticks, each tick in one of hot/work/ingress/idle (a multinomial)."""
    windows = []
    for hot, ingress in shares:
        ticks = rng.randint(180, 220)
        draws = sorted([rng.random() for _ in range(ticks)])
        c1 = bisect.bisect_left(draws, hot)
        c2 = bisect.bisect_left(draws, hot + WORK)
        c3 = bisect.bisect_left(draws, hot + WORK + ingress)
        windows.append(
            (
                ticks,
                [
                    Sample(EXEC, "exec", _HOT_FRAMES, c1),
                    Sample(EXEC, "exec", _WORK_FRAMES, c2 - c1),
                    Sample(INGRESS, "ingress", _SERVE_FRAMES, c3 - c2),
                ],
            )
        )
    return make_profile(windows)


def _false_positive_rates(make_shares, trials: int, seed: int) -> tuple[float, float, float]:
    rng = random.Random(seed)
    hot_hits = util_hits = naive_hits = 0
    for _ in range(trials):
        before = _workload(rng, make_shares(rng))
        after = _workload(rng, make_shares(rng))
        c = compare_profiles(before, after, watch=("hot",), top=None)
        hot = one_row(c.watch, "hot").total
        hot_hits += hot.significant
        util_hits += _util(c).total.significant
        pooled = (hot.before + hot.after) / 2
        naive_se = math.sqrt(
            pooled * (1 - pooled) * (1 / before.sampling.ticks + 1 / after.sampling.ticks)
        )
        naive_hits += abs(hot.delta) > 1.96 * naive_se
    return hot_hits / trials, util_hits / trials, naive_hits / trials


def test_same_workload_false_positive_rate_is_near_five_percent():
    hot_rate, util_rate, naive_rate = _false_positive_rates(
        lambda rng: _beta_shares(rng, 40), trials=300, seed=2
    )
    # The data must be correlated enough that a binomial interval would be fooled;
    # otherwise this test could not tell an honest interval from a naive one.
    assert naive_rate > 0.25, naive_rate
    assert 0.01 <= hot_rate <= 0.12, hot_rate
    assert 0.01 <= util_rate <= 0.12, util_rate


def test_false_positive_rate_with_drift_between_windows():
    hot_rate, util_rate, _ = _false_positive_rates(
        lambda rng: _ar1_shares(rng, 40, phi=0.5), trials=150, seed=9
    )
    assert 0.01 <= hot_rate <= 0.12, hot_rate
    assert 0.01 <= util_rate <= 0.12, util_rate
