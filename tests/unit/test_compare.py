"""gilprof.analysis.compare: known changes are found with their sign, same-workload noise is not."""

from __future__ import annotations

import bisect
import math
import random
import statistics
from collections.abc import Iterator

import pytest

from gilprof.analysis.compare import (
    IMPROVED,
    REGRESSED,
    UNCHANGED,
    Comparison,
    ShareChange,
    compare_profiles,
    compare_steps,
)
from gilprof.errors import UsageError
from gilprof.model import Mode, Sample
from gilprof.profile import Profile
from gilprof.steps import RankSteps, parse_lines, summarize

from .builders import frames, make_profile, noisy_windows, sample, steady_profile

EXEC, INGRESS = 7, 8


def _util(c: Comparison) -> ShareChange:
    assert c.utilization is not None
    return c.utilization


def _row(rows, name, file=None, thread=None):
    found = [
        r
        for r in rows
        if r.name == name
        and (file is None or r.file == file)
        and (thread is None or r.thread == thread)
    ]
    assert len(found) == 1, (name, file, [(r.name, r.file, r.thread) for r in rows])
    return found[0]


# ---------------------------------------------------------------------------------------
# Exact shares from hand-made counts


def _exact(
    hot: int, loop_self: int, serve: int, windows: int = 4, ticks: int = 100, **kwargs
) -> Profile:
    return steady_profile(
        sample("exec", "loop", "hot", count=hot, tid=EXEC),
        sample("exec", "loop", count=loop_self, tid=EXEC),
        sample("ingress", "serve", count=serve, tid=INGRESS),
        windows=windows,
        ticks=ticks,
        **kwargs,
    )


def test_shares_are_counts_over_ticks_on_each_side():
    before = _exact(hot=30, loop_self=10, serve=20)
    after = _exact(hot=10, loop_self=10, serve=20)
    c = compare_profiles(before, after, watch=("hot",))
    assert c.mode is Mode.GIL and c.batches == (4, 4)
    util = _util(c).total
    assert (util.before, util.after) == pytest.approx((0.60, 0.40))
    hot = _row(c.functions, "hot", "app.py")
    assert (hot.total.before, hot.total.after, hot.total.delta) == pytest.approx(
        (0.30, 0.10, -0.20)
    )
    assert hot.total.relative == pytest.approx(-2 / 3)
    assert (hot.self_before, hot.self_after) == pytest.approx((0.30, 0.10))
    loop = _row(c.functions, "loop", "app.py")
    assert (loop.total.before, loop.total.after) == pytest.approx((0.40, 0.20))
    assert (loop.self_before, loop.self_after) == pytest.approx((0.10, 0.10))
    threads = {t.name: t.total for t in c.threads}
    assert set(threads) == {"exec", "ingress"}
    assert (threads["exec"].before, threads["exec"].after) == pytest.approx((0.40, 0.20))
    assert threads["ingress"].delta == pytest.approx(0.0)
    watched = _row(c.watch, "hot")
    assert watched.total.delta == pytest.approx(-0.20)
    # Identical windows on each side: zero variance, so any change is certain.
    assert hot.verdict == IMPROVED and watched.verdict == IMPROVED
    assert _row(c.threads, "ingress").verdict == UNCHANGED


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


def _noisy_windows(
    rng: random.Random, share: float, windows: int = 40
) -> list[tuple[float, list[Sample]]]:
    """Per window: the hot share drawn around `share` (sd 4 pp), then counts out of 200 ticks."""
    hot = ("exec", "main", "loop", "hot")
    return noisy_windows(rng, share, hot, sd=0.04, windows=windows, tids=(EXEC, INGRESS))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_known_drop_from_30_to_20_percent_is_found_with_its_sign(seed):
    rng = random.Random(seed)
    before_windows = _noisy_windows(rng, 0.30)
    after_windows = _noisy_windows(rng, 0.20)
    before, after = make_profile(before_windows), make_profile(after_windows)

    def hot_share(windows):
        return sum(s[0].count for _, s in windows) / sum(t for t, _ in windows)

    c = compare_profiles(before, after, watch=("hot",))
    for row in (_row(c.watch, "hot"), _row(c.functions, "hot", "app.py")):
        d = row.total
        assert d.before == pytest.approx(hot_share(before_windows))
        assert d.after == pytest.approx(hot_share(after_windows))
        assert d.delta == pytest.approx(-0.10, abs=0.03)
        assert d.significant and d.high < 0 and row.verdict == IMPROVED
        # The interval is about as wide as the window noise says, not a binomial sliver.
        assert 0.01 < d.high - d.low < 0.08
    reverse = compare_profiles(after, before, watch=("hot",))
    back = _row(reverse.watch, "hot")
    assert back.verdict == REGRESSED and back.total.low > 0
    assert back.total.delta == pytest.approx(-_row(c.watch, "hot").total.delta)


def test_an_untouched_function_next_to_a_changed_one_is_unchanged():
    rng = random.Random(11)
    before = make_profile(_noisy_windows(rng, 0.30))
    after = make_profile(_noisy_windows(rng, 0.30))
    c = compare_profiles(before, after, watch=("hot",))
    assert _row(c.watch, "hot").verdict == UNCHANGED
    assert abs(_row(c.watch, "hot").total.delta) < 0.03


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
        hot = _row(c.watch, "hot").total
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


# ---------------------------------------------------------------------------------------
# Matching and rows


def test_functions_match_by_name_and_file_basename_across_machines():
    before = make_profile(
        [
            (
                100,
                [
                    sample(
                        "exec",
                        "main@/home/alice/src/app/run.py",
                        "hot@/home/alice/src/app/hot.py",
                        count=40,
                        tid=EXEC,
                    )
                ],
            )
        ]
        * 3
    )
    after = make_profile(
        [
            (
                100,
                [
                    sample(
                        "exec",
                        "main@/opt/build/app/run.py",
                        "hot@/opt/build/app/hot.py",
                        count=25,
                        tid=EXEC,
                    )
                ],
            )
        ]
        * 3
    )
    c = compare_profiles(before, after, watch=())
    assert sorted((r.name, r.file) for r in c.functions) == [("hot", "hot.py"), ("main", "run.py")]
    hot = _row(c.functions, "hot")
    assert (hot.total.before, hot.total.after) == pytest.approx((0.40, 0.25))
    assert (hot.self_before, hot.self_after) == pytest.approx((0.40, 0.25))


def test_same_name_in_different_files_stays_two_rows():
    before = make_profile([(100, [sample("exec", "loop", "step@a.py", count=30, tid=EXEC)])] * 3)
    after = make_profile([(100, [sample("exec", "loop", "step@b.py", count=30, tid=EXEC)])] * 3)
    c = compare_profiles(before, after, watch=("step",))
    a_row, b_row = _row(c.functions, "step", "a.py"), _row(c.functions, "step", "b.py")
    assert (a_row.total.before, a_row.total.after) == pytest.approx((0.30, 0.0))
    assert (b_row.total.before, b_row.total.after) == pytest.approx((0.0, 0.30))
    assert a_row.total.relative == pytest.approx(-1.0) and b_row.total.relative is None
    # The watch matches by name alone, so both files count toward it.
    assert _row(c.watch, "step").total.delta == pytest.approx(0.0)


def test_watch_matches_qualnames_and_counts_recursion_once():
    def profile(count):
        return make_profile(
            [
                (
                    100,
                    [
                        sample(
                            "exec",
                            "loop",
                            "Router._balance",
                            "Router._balance",
                            count=count,
                            tid=EXEC,
                        )
                    ],
                )
            ]
            * 3
        )

    c = compare_profiles(profile(30), profile(12), watch=("_balance", "_balance", "absent"))
    assert [w.name for w in c.watch] == ["_balance", "absent"]
    balance = _row(c.watch, "_balance").total
    assert (balance.before, balance.after) == pytest.approx((0.30, 0.12))
    absent = _row(c.watch, "absent")
    assert absent.total.before == absent.total.after == 0.0 and absent.verdict == UNCHANGED


def test_by_thread_splits_a_function_per_thread():
    def profile(a, b):
        return make_profile(
            [
                (
                    100,
                    [
                        sample("exec", "loop", "work", count=a, tid=EXEC),
                        sample("ingress", "serve", "work", count=b, tid=INGRESS),
                    ],
                )
            ]
            * 3
        )

    c = compare_profiles(profile(30, 10), profile(10, 10), by_thread=True, watch=())
    assert _row(c.functions, "work", thread="exec").total.delta == pytest.approx(-0.20)
    assert _row(c.functions, "work", thread="ingress").total.delta == pytest.approx(0.0)
    merged = compare_profiles(profile(30, 10), profile(10, 10), watch=())
    assert _row(merged.functions, "work").thread is None


def test_top_limits_function_rows_largest_first():
    def profile():
        return make_profile(
            [(100, [sample("t", f"f{i}", count=i + 1, tid=1) for i in range(8)])] * 3
        )

    c = compare_profiles(profile(), profile(), watch=(), top=3)
    assert [r.name for r in c.functions] == ["f7", "f6", "f5"]
    assert len(compare_profiles(profile(), profile(), watch=(), top=None).functions) == 8


def test_functions_named_in_angle_brackets_get_rows():
    before = make_profile(
        [(100, [sample("main", "<module>", "run", "<lambda>", count=40, tid=1)])] * 3
    )
    after = make_profile(
        [(100, [sample("main", "<module>", "run", "<lambda>", count=10, tid=1)])] * 3
    )
    c = compare_profiles(before, after, watch=(), all_frames=True)  # <module> is a wrapper frame
    names = {r.name for r in c.functions}
    assert {"<module>", "run", "<lambda>"} <= names
    assert _row(c.functions, "<lambda>").total.delta == pytest.approx(-0.30)


def test_many_windows_are_regrouped_into_at_most_max_batches():
    rng = random.Random(5)
    long = make_profile(_noisy_windows(rng, 0.3, windows=45))
    short = make_profile(_noisy_windows(rng, 0.3, windows=12))
    assert compare_profiles(long, short).batches == (30, 12)
    assert compare_profiles(long, short, max_batches=10).batches == (10, 10)


def test_one_window_gives_no_interval_and_no_verdict():
    before = _exact(hot=30, loop_self=0, serve=0, windows=1)
    after = _exact(hot=10, loop_self=0, serve=0, windows=1)
    hot = _row(compare_profiles(before, after, watch=("hot",)).watch, "hot")
    assert hot.total.delta == pytest.approx(-0.20)
    assert math.isinf(hot.total.low) and math.isinf(hot.total.high)
    assert hot.verdict == UNCHANGED


def test_wall_mode_has_no_utilization_and_rows_per_thread():
    before = _exact(hot=30, loop_self=10, serve=20, mode=Mode.WALL)
    after = _exact(hot=20, loop_self=10, serve=20, mode=Mode.WALL)
    c = compare_profiles(before, after, watch=("hot",))
    assert c.utilization is None and c.mode is Mode.WALL
    assert _row(c.functions, "hot").thread == "exec"
    assert _row(c.functions, "hot").total.delta == pytest.approx(-0.10)


# ---------------------------------------------------------------------------------------
# Bad input


def test_mode_mismatch_is_a_usage_error():
    with pytest.raises(UsageError, match="gil-mode profile with a wall-mode"):
        compare_profiles(_exact(30, 10, 20), _exact(30, 10, 20, mode=Mode.WALL))


@pytest.mark.parametrize("side", ["before", "after"])
@pytest.mark.parametrize(
    "empty",
    [
        lambda: make_profile([]),
        lambda: make_profile([(0, [])]),
    ],
    ids=["no-windows", "zero-ticks"],
)
def test_an_empty_profile_is_a_usage_error_naming_its_side(side, empty):
    full = _exact(30, 10, 20)
    pair = (empty(), full) if side == "before" else (full, empty())
    with pytest.raises(UsageError, match=f"the {side} profile has no samples"):
        compare_profiles(*pair)


# ---------------------------------------------------------------------------------------
# Step times


def _log(host: list[float], device: list[float | None]) -> list[str]:
    lines = ["[TRT-LLM] [I] server starting"]
    for i, (h, d) in enumerate(zip(host, device, strict=True)):
        dev = "N/A" if d is None else f"{d:.3f}ms"
        lines.append(
            f"[TRT-LLM] [I] [_torch][RANK 0] iter = {i}, global_rank = 0, rank = 0, "
            f"currank_total_requests = 8/32, host_step_time = {h:.3f}ms, "
            f"prev_device_step_time = {dev}, timestamp = 2026-08-04 19:08:{i % 60:02d}, "
            f"num_scheduled_requests: 8, states = {{'num_ctx_requests': 0}}"
        )
    return lines


def _rank_steps(host: list[float], device: list[float | None]) -> RankSteps:
    steps = summarize(parse_lines(_log(host, device))).rank(0)
    assert steps is not None
    return steps


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[8]


def test_compare_steps_finds_a_faster_host_step_and_the_verdicts():
    # Before: the device step is dragged up to the host step (host-bound).
    # After: the host is 40 ms faster and the device no longer waits (device-bound).
    host_b = [100.0 + (i % 7) - 3 for i in range(60)]
    dev_b: list[float | None] = [None] + [h - 1.0 for h in host_b[1:]]
    host_a = [60.0 + (i % 5) - 2 for i in range(60)]
    dev_a: list[float | None] = [None] + [40.0 + (i % 3) for i in range(1, 60)]
    change = compare_steps(_rank_steps(host_b, dev_b), _rank_steps(host_a, dev_a))
    assert change.rank == 0
    host = change.host_p50
    assert (host.before, host.after) == (statistics.median(host_b), statistics.median(host_a))
    assert host.delta == pytest.approx(-40.0)
    assert host.significant and host.low <= -40.0 <= host.high and host.high < 0
    assert host.relative == pytest.approx(-0.4)
    device = change.device_p50
    assert device is not None
    assert device.before == statistics.median([d for d in dev_b if d is not None])
    assert device.after == statistics.median([d for d in dev_a if d is not None])
    assert device.significant and device.high < 0
    assert change.host_p90_before == pytest.approx(_p90(host_b))
    assert change.host_p90_after == pytest.approx(_p90(host_a))
    assert (change.reading_before, change.reading_after) == ("device~host", "device<host")
    assert change.ratio_before == pytest.approx(99.0 / 100.0)
    assert change.ratio_after == pytest.approx(41.0 / 60.0)


def test_compare_steps_of_the_same_distribution_is_not_significant():
    rng = random.Random(9)
    host_b = [rng.gauss(80, 5) for _ in range(80)]
    host_a = [rng.gauss(80, 5) for _ in range(80)]
    change = compare_steps(_rank_steps(host_b, [None] * 80), _rank_steps(host_a, [None] * 80))
    assert not change.host_p50.significant
    assert change.host_p50.low < 0 < change.host_p50.high
    assert change.device_p50 is None
    assert change.reading_before == change.reading_after == "unknown"


def test_compare_profiles_carries_the_steps_comparison():
    host = [50.0 + (i % 4) for i in range(20)]
    steps = _rank_steps(host, [None, *host[1:]])
    c = compare_profiles(
        _exact(30, 10, 20), _exact(30, 10, 20), steps_before=steps, steps_after=steps
    )
    assert c.steps is not None and c.steps.host_p50.delta == 0.0
    assert (
        compare_profiles(_exact(30, 10, 20), _exact(30, 10, 20), steps_before=steps).steps is None
    )
