from __future__ import annotations

import pytest

from gilprof.analysis.attribution import attribute
from gilprof.model import Mode, ThreadState

from .builders import make_profile, sample


def test_shares_on_hand_built_samples():
    profile = make_profile(
        [
            (
                100,
                [
                    sample("executor", "loop", "safe_broadcast", "loads", count=30, tid=1),
                    sample("executor", "loop", "_balance_requests_across_ranks", count=20, tid=1),
                    sample("ingress", "serve", "json_loads", count=10, tid=2),
                ],
            )
        ]
    )
    a = attribute(profile)
    assert a.ticks == 100
    assert a.utilization == pytest.approx(0.60)
    held = {t.name: t.share for t in a.threads}
    assert held == {"executor": pytest.approx(0.5), "ingress": pytest.approx(0.1)}
    by_name = {f.key.name: f for f in a.functions}
    assert by_name["loop"].total_share == pytest.approx(0.5)
    assert by_name["loop"].self_share == 0
    assert by_name["loads"].self_share == pytest.approx(0.3)
    assert by_name["safe_broadcast"].total_share == pytest.approx(0.3)
    assert by_name["safe_broadcast"].self_share == 0
    # seconds = share x sampled duration (one window of 1 s)
    assert by_name["safe_broadcast"].total_s == pytest.approx(0.3)
    # sorted by total share, descending
    totals = [f.total_share for f in a.functions]
    assert totals == sorted(totals, reverse=True)
    watch = {w.function: w for w in a.watch}
    assert watch["safe_broadcast"].found and watch["safe_broadcast"].total_share == pytest.approx(
        0.3
    )
    assert watch["_balance_requests_across_ranks"].self_share == pytest.approx(0.2)


def test_recursion_counts_once_per_sample():
    profile = make_profile([(10, [sample("t", "f", "f", "f", "g", count=4, tid=1)])])
    by_name = {f.key.name: f for f in attribute(profile).functions}
    assert by_name["f"].total_share == pytest.approx(0.4)
    assert by_name["g"].self_share == pytest.approx(0.4)


def test_watch_matches_qualnames_and_reports_never_seen():
    profile = make_profile(
        [
            (
                50,
                [
                    sample(
                        "t",
                        "loop",
                        "DefaultADPRouter._balance_requests_across_ranks",
                        count=5,
                        tid=1,
                    )
                ],
            )
        ]
    )
    watch = {
        w.function: w
        for w in attribute(
            profile, watch=("_balance_requests_across_ranks", "safe_broadcast", "loop")
        ).watch
    }
    assert watch["_balance_requests_across_ranks"].found
    assert watch["_balance_requests_across_ranks"].matched == (
        "DefaultADPRouter._balance_requests_across_ranks",
    )
    assert watch["_balance_requests_across_ranks"].total_share == pytest.approx(0.1)
    assert not watch["safe_broadcast"].found and watch["safe_broadcast"].total_share == 0
    assert watch["loop"].total_share == pytest.approx(0.1)


def test_shares_pool_across_windows_and_threads_filter():
    profile = make_profile(
        [
            (100, [sample("a", "x", count=50, tid=1)]),
            (100, [sample("a", "x", count=10, tid=1), sample("b", "y", count=40, tid=2)]),
        ]
    )
    a = attribute(profile)
    assert a.ticks == 200
    assert {f.key.name: f.total_share for f in a.functions} == {"x": 0.3, "y": 0.2}
    only_b = attribute(profile, thread_pattern="^b$")
    assert [f.key.name for f in only_b.functions] == ["y"]
    assert [t.name for t in only_b.threads] == ["b"]


def test_by_thread_and_lines_split_keys():
    profile = make_profile(
        [(100, [sample("a", "shared", count=10, tid=1), sample("b", "shared", count=30, tid=2)])]
    )
    per_thread = attribute(profile, by_thread=True)
    assert {(f.key.name, f.key.thread): f.total_share for f in per_thread.functions} == {
        ("shared", "a"): 0.1,
        ("shared", "b"): 0.3,
    }
    pooled = attribute(profile)
    assert {f.key.name: f.total_share for f in pooled.functions} == {"shared": 0.4}


def test_top_cuts_functions():
    profile = make_profile([(100, [sample("a", "x", "y", "z", count=10, tid=1)])])
    assert len(attribute(profile, top=2).functions) == 2


def test_wall_mode_has_no_gil_utilization():
    profile = make_profile(
        [
            (
                100,
                [
                    sample("a", "x", count=100, tid=1, state=ThreadState.UNKNOWN),
                    sample("b", "y", count=100, tid=2, state=ThreadState.UNKNOWN),
                ],
            )
        ],
        mode=Mode.WALL,
    )
    a = attribute(profile)
    assert a.utilization is None
    assert a.by_thread
    assert {t.name: t.share for t in a.threads} == {"a": 1.0, "b": 1.0}


def test_empty_profile_is_all_zero():
    a = attribute(make_profile([]))
    assert a.ticks == 0 and a.utilization == 0 and a.functions == ()
