"""The shared per-window table: one pass, the counts every analysis reads."""

from __future__ import annotations

import dataclasses
import random

import pytest

from gilprof.analysis.attribution import attribute
from gilprof.analysis.table import WindowTable, build_table
from gilprof.model import Mode, ThreadState
from gilprof.profile import Profile
from tests.unit.builders import frames, make_profile, sample


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


def _random_profile(seed: int, mode: Mode) -> Profile:
    """Windows of random stacks over four threads: shared prefixes, recursion, the same
    function at two lines, every state, a qualname to watch, and zero counts."""
    rng = random.Random(seed)
    names = ["main", "loop", "Comm.safe_broadcast", "loads", "step", "step@other.py", "wait"]
    states = list(ThreadState) if mode is Mode.CONTENTION else [ThreadState.HELD]
    stacks = []
    for _ in range(40):
        depth = rng.randint(1, 6)
        thread = rng.choice(["executor", "ingress", "MainThread", "client"])
        stacks.append((thread, ["main", *rng.choices(names, k=depth)], rng.choice(states)))
    tids = {"executor": 1, "ingress": 2, "MainThread": 3, "client": 4}
    profile = make_profile([], mode=mode)
    # Stacks numbered in another order than they first appear in, as in a long capture.
    for thread, frame_names, state in rng.sample(stacks, len(stacks)):
        profile.intern_stack(tids[thread], state, frames(*frame_names))
    for w in range(12):
        chosen = rng.sample(stacks, rng.randint(0, 15))
        samples = [
            sample(
                thread, *names, count=rng.choice([0, 1, 1, 2, 5, 30]), tid=tids[thread], state=state
            )
            for thread, names, state in chosen
        ]
        profile.add_window(w, w + 1, rng.randint(50, 100), samples)
    profile.finish()
    return profile


def _fields(table: WindowTable) -> dict[str, object]:
    """Every field outside the series, with the order of every dict's keys (sort ties and
    renderers follow insertion order)."""
    out: dict[str, object] = {}
    for f in dataclasses.fields(table):
        if f.name.endswith("_series"):
            continue
        value = getattr(table, f.name)
        out[f.name] = value
        out[f.name + " order"] = _key_order(value)
    return out


def _key_order(value: object) -> object:
    if not isinstance(value, dict):
        return None
    return [(key, _key_order(inner)) for key, inner in value.items()]


@pytest.mark.parametrize("mode", [Mode.GIL, Mode.CONTENTION, Mode.WALL])
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"by_thread": True, "lines": True},
        {"thread_pattern": "^(executor|client)$"},
        {"watch": ("safe_broadcast", "Comm.safe_broadcast", "step", "missing")},
    ],
)
def test_totals_fast_path_equals_the_per_window_fold(tmp_path, mode, options):
    """A report folds each stack's total once; compare folds every (window, stack) cell:
    both give the same table, on a profile in memory and on one read back from a stream."""
    for seed in range(5):
        built = _random_profile(seed, mode)
        path = tmp_path / f"p{seed}.json"
        built.save(path, version=2)
        for profile in (built, Profile.load(path)):
            fast = build_table(profile, **options)
            per_window = build_table(profile, series=True, **options)
            assert fast.total_series is None and per_window.total_series is not None
            assert _fields(fast) == _fields(per_window)
            assert fast.samples == sum(per_window.gil_series.values())
