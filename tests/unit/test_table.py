"""The shared per-window table: one pass, the counts every analysis reads."""

from __future__ import annotations

from gilprof.analysis.attribution import attribute
from gilprof.analysis.table import WindowTable, build_table
from gilprof.model import Mode, ThreadState
from tests.unit.builders import make_profile, sample


def _two_windows():
    return make_profile(
        [
            (
                100,
                [
                    sample("loop", "main", "x", count=5, tid=1),
                    sample("io", "main", "y", count=2, tid=2),
                ],
            ),
            (80, [sample("loop", "main", "x", "y", count=7, tid=1)]),
        ]
    )


def test_totals_count_each_function_once_per_sample_and_self_counts_the_leaf():
    table = build_table(_two_windows())
    assert table.total[("x", "app.py", 0, None)] == 12
    assert table.total[("y", "app.py", 0, None)] == 9
    assert table.total[("main", "app.py", 0, None)] == 14
    assert table.self_[("y", "app.py", 0, None)] == 9
    assert ("main", "app.py", 0, None) not in table.self_
    assert table.held == {1: 12, 2: 2} and table.samples == 14
    assert table.ticks == 180 and table.window_ticks() == [100, 80]


def test_series_keep_windows_apart_only_when_asked_for():
    assert build_table(_two_windows()).total_series is None
    table = build_table(_two_windows(), series=True)
    assert table.total_series is not None and table.held_series is not None
    assert table.total_series[("x", "app.py", 0, None)] == {0: 5, 1: 7}
    assert table.total_series[("y", "app.py", 0, None)] == {0: 2, 1: 7}
    assert table.held_series["io"] == {0: 2}
    assert table.gil_series == {0: 7, 1: 7}
    assert WindowTable.dense(table.held_series["io"], 2) == [2.0, 0.0]


def test_thread_states_are_counted_per_window_for_every_sample():
    profile = make_profile(
        [
            (
                10,
                [
                    sample("a", "f", count=6, tid=1),
                    sample("b", "g", count=10, tid=2, state=ThreadState.WAITING),
                ],
            ),
            (10, [sample("a", "f", count=3, tid=1, state=ThreadState.NATIVE)]),
        ],
        mode=Mode.CONTENTION,
    )
    table = build_table(profile)
    assert table.states[1] == {ThreadState.HELD: {0: 6}, ThreadState.NATIVE: {1: 3}}
    assert table.states[2] == {ThreadState.WAITING: {0: 10}}
    # Only held samples are GIL time in contention mode.
    assert table.held == {1: 6} and table.total == {("f", "app.py", 0, None): 6}


def test_thread_pattern_filters_function_rows_not_thread_rows():
    table = build_table(_two_windows(), thread_pattern="^io$")
    assert set(table.total) == {("main", "app.py", 0, None), ("y", "app.py", 0, None)}
    assert table.held == {1: 12, 2: 2}


def test_watch_matches_qualnames_and_records_what_matched():
    profile = make_profile([(10, [sample("t", "main", "Comm.safe_broadcast", count=4, tid=1)])])
    table = build_table(profile, watch=("safe_broadcast", "missing"))
    assert table.watch_total == {"safe_broadcast": 4, "missing": 0}
    assert table.watch_self == {"safe_broadcast": 4, "missing": 0}
    assert table.watch_matched["safe_broadcast"] == {"Comm.safe_broadcast"}


def test_attribution_from_a_given_table_equals_attribution_from_the_profile():
    profile = _two_windows()
    table = build_table(profile, by_thread=True, watch=("x",))
    assert attribute(profile, by_thread=True, watch=("x",), table=table) == attribute(
        profile, by_thread=True, watch=("x",)
    )
