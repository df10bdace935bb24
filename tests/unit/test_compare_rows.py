"""gilprof.analysis.compare: how rows match across profiles, what rows there are, bad input,
and the comparison of step times. Shares and noise: test_compare.py.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest

from gilprof.analysis.compare import (
    UNCHANGED,
    compare_profiles,
    compare_steps,
)
from gilprof.errors import UsageError
from gilprof.model import Mode
from gilprof.steps import RankSteps, parse_lines, summarize

from .builders import (
    EXEC,
    INGRESS,
    exact_profile,
    hot_noisy_windows,
    make_profile,
    one_row,
    sample,
)

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
    hot = one_row(c.functions, "hot")
    assert (hot.total.before, hot.total.after) == pytest.approx((0.40, 0.25))
    assert (hot.self_before, hot.self_after) == pytest.approx((0.40, 0.25))


def test_same_name_in_different_files_stays_two_rows():
    before = make_profile([(100, [sample("exec", "loop", "step@a.py", count=30, tid=EXEC)])] * 3)
    after = make_profile([(100, [sample("exec", "loop", "step@b.py", count=30, tid=EXEC)])] * 3)
    c = compare_profiles(before, after, watch=("step",))
    a_row, b_row = one_row(c.functions, "step", "a.py"), one_row(c.functions, "step", "b.py")
    assert (a_row.total.before, a_row.total.after) == pytest.approx((0.30, 0.0))
    assert (b_row.total.before, b_row.total.after) == pytest.approx((0.0, 0.30))
    assert a_row.total.relative == pytest.approx(-1.0) and b_row.total.relative is None
    # The watch matches by name alone, so both files count toward it.
    assert one_row(c.watch, "step").total.delta == pytest.approx(0.0)


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
    balance = one_row(c.watch, "_balance").total
    assert (balance.before, balance.after) == pytest.approx((0.30, 0.12))
    absent = one_row(c.watch, "absent")
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
    assert one_row(c.functions, "work", thread="exec").total.delta == pytest.approx(-0.20)
    assert one_row(c.functions, "work", thread="ingress").total.delta == pytest.approx(0.0)
    merged = compare_profiles(profile(30, 10), profile(10, 10), watch=())
    assert one_row(merged.functions, "work").thread is None


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
    assert one_row(c.functions, "<lambda>").total.delta == pytest.approx(-0.30)


def test_many_windows_are_regrouped_into_at_most_max_batches():
    rng = random.Random(5)
    long = make_profile(hot_noisy_windows(rng, 0.3, windows=45))
    short = make_profile(hot_noisy_windows(rng, 0.3, windows=12))
    assert compare_profiles(long, short).batches == (30, 12)
    assert compare_profiles(long, short, max_batches=10).batches == (10, 10)


def test_one_window_gives_no_interval_and_no_verdict():
    before = exact_profile(hot=30, loop_self=0, serve=0, windows=1)
    after = exact_profile(hot=10, loop_self=0, serve=0, windows=1)
    hot = one_row(compare_profiles(before, after, watch=("hot",)).watch, "hot")
    assert hot.total.delta == pytest.approx(-0.20)
    assert math.isinf(hot.total.low) and math.isinf(hot.total.high)
    assert hot.verdict == UNCHANGED


def test_wall_mode_has_no_utilization_and_rows_per_thread():
    before = exact_profile(hot=30, loop_self=10, serve=20, mode=Mode.WALL)
    after = exact_profile(hot=20, loop_self=10, serve=20, mode=Mode.WALL)
    c = compare_profiles(before, after, watch=("hot",))
    assert c.utilization is None and c.mode is Mode.WALL
    assert one_row(c.functions, "hot").thread == "exec"
    assert one_row(c.functions, "hot").total.delta == pytest.approx(-0.10)


# ---------------------------------------------------------------------------------------
# Bad input


def test_mode_mismatch_is_a_usage_error():
    with pytest.raises(UsageError, match="gil-mode profile with a wall-mode"):
        compare_profiles(exact_profile(30, 10, 20), exact_profile(30, 10, 20, mode=Mode.WALL))


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
    full = exact_profile(30, 10, 20)
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
        exact_profile(30, 10, 20), exact_profile(30, 10, 20), steps_before=steps, steps_after=steps
    )
    assert c.steps is not None and c.steps.host_p50.delta == 0.0
    assert (
        compare_profiles(
            exact_profile(30, 10, 20), exact_profile(30, 10, 20), steps_before=steps
        ).steps
        is None
    )


def test_a_share_table_without_rows_renders_its_header():
    """Two idle profiles have no functions to list: the table is empty, not an error."""
    from gilprof.renderers._rich import to_text
    from gilprof.renderers.compare_cells import share_table

    text = to_text([share_table("Functions (total share)", [], "function", wide=False, width=100)])
    assert "function" in text and "95% CI (pp)" in text and " rel " not in text


def test_blame_rows_keep_names_whole_at_100_columns():
    """Waiter, holder and function used to be three columns beside six figures: at 100
    columns each was 5 letters wide ("execu / tor-l / oop"). Now one column holds them on
    their own lines, whole where the table fits, the verdict wrapping at its words."""
    from gilprof.analysis.waits import BlameChange, WaitChange, WaitComparison
    from gilprof.renderers._rich import to_text
    from gilprof.renderers.compare_waits import waits_tables
    from gilprof.stats import Difference

    share = Difference(0.081, 0.105, 0.024, -0.001, 0.05, 0.3, False)
    function = "CopyingTokenRequest.__getstate__"
    waits = WaitComparison(
        (WaitChange("executor-loop", share, "no significant change"),),
        (BlameChange("client", "executor-loop", function, "adp_router.py", share, UNCHANGED),),
    )
    text = to_text(waits_tables(waits, width=100), width=100)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100, text
    assert any("client <- executor-loop" in line for line in lines), text
    assert any(f"in {function} " in line for line in lines), text
    assert any("(adp_router.py)" in line for line in lines), text
    assert " rel " not in text
    assert " rel " in to_text(waits_tables(waits, wide=True, width=160), width=160)
    # A terminal too narrow for the name folds it rather than pass the screen's edge.
    narrow = to_text(waits_tables(waits, width=60), width=60)
    assert max(len(line) for line in narrow.splitlines()) <= 60, narrow


def test_cost_rows_break_a_long_qualname_at_its_dots_at_100_columns():
    """The cost table folded `_balance_requests_across_ranks.<locals>.<listcomp>` at the
    column's edge, mid-word; it now breaks before a dot, each part whole."""
    from gilprof.analysis.compare import IMPROVED, ShareChange
    from gilprof.renderers._rich import to_text
    from gilprof.renderers.compare_cells import break_name
    from gilprof.renderers.compare_costs import cost_table
    from gilprof.stats import Difference

    name = "ADPRouter._balance_requests_across_ranks.<locals>.<listcomp>"
    share = Difference(0.109, 0.091, -0.019, -0.043, 0.005, -0.17, False)
    cost = Difference(4.1, 2.0, -2.1, -2.9, -1.3, -0.51, True)
    row = ShareChange(name, "adp_router.py", None, share, 0.1, 0.09, IMPROVED, cost=cost)
    text = to_text([cost_table("Functions", [row], "step", width=100)], width=100)
    lines = [line.strip("│ ") for line in text.splitlines()]
    assert max(len(line) for line in text.splitlines()) <= 100, text
    assert any(line.startswith("ADPRouter._balance_requests_across_ranks ") for line in lines)
    assert any(line.startswith(".<locals>.<listcomp>") for line in lines), text
    # without a width (markdown, or a caller that does not know it) the name is left whole
    assert break_name(name, len(name)) == name
    assert break_name(name, 20).split("\n") == [
        "ADPRouter",
        "._balance_requests_across_ranks",  # longer than the room: whole on its own line
        ".<locals>.<listcomp>",
    ]
