"""gilprof.analysis.straggler on hand-made contention-mode profiles (every thread at every tick): who paces the collective."""

from __future__ import annotations

import json
import random

from gilprof.analysis.ranks import compare_ranks
from gilprof.analysis.straggler import pacing_rank
from gilprof.model import Mode, ThreadState
from gilprof.profile import Profile
from gilprof.renderers.ranks import render_json, render_table

from .builders import make_profile, sample

LOOP, HELPER = 1, 2
TICKS, WINDOWS = 200, 10
STACKS = {
    "held": (("main", "step_loop", "host_work"), ThreadState.HELD),
    "gil": (("main", "step_loop", "host_work"), ThreadState.WAITING),
    "native": (("main", "step_loop", "crunch", "zlib_compress@libz.so.1"), ThreadState.NATIVE),
    "peers": (
        ("main", "step_loop", "all_reduce@distributed_c10d.py", "futex@[syscall]"),
        ThreadState.IDLE,
    ),
    "sleep": (("main", "step_loop", "sleep_step", "clock_nanosleep@[syscall]"), ThreadState.IDLE),
}


def _rank(
    rank: int, shares: dict[str, float], seed: int, sd: float = 0.015, busy_helper: bool = False
) -> Profile:
    """A rank whose loop thread spends `shares` of each window (drawn around them, sd `sd`)
    in each part; a helper thread sleeps beside it (`busy_helper`: spins, never waiting)."""
    rng = random.Random(seed)
    windows = []
    for _ in range(WINDOWS):
        drawn = {k: max(0.0, rng.gauss(v, sd)) for k, v in shares.items()}
        total = sum(drawn.values())
        counts = {k: round(TICKS * v / total) for k, v in drawn.items()}
        samples = [
            sample("MainThread", *STACKS[k][0], count=c, tid=LOOP, state=STACKS[k][1])
            for k, c in counts.items()
            if c
        ]
        if busy_helper:
            samples.append(sample("helper", "spin", count=TICKS, tid=HELPER))
        else:
            samples.append(
                sample(
                    "helper",
                    "idle_helper",
                    "clock_nanosleep@[syscall]",
                    count=TICKS,
                    tid=HELPER,
                    state=ThreadState.IDLE,
                )
            )
        windows.append((TICKS, samples))
    return make_profile(windows, mode=Mode.CONTENTION, rank=rank)


def test_two_ranks_the_sleeping_rank_paces_the_one_waiting_for_peers():
    profiles = [
        _rank(0, {"held": 0.1, "peers": 0.9}, 1),
        _rank(1, {"held": 0.1, "sleep": 0.85, "peers": 0.05}, 2),
    ]
    s = pacing_rank(profiles, step_ms=28.0)
    assert s.determined and s.pacing == 1 and s.component == "sleep"
    assert s.sentence.startswith("rank 1 paces the collective")
    assert "sleeping" in s.shorten and "ms per step" in s.shorten
    rank1 = next(lp for lp in s.loops if lp.rank == 1)
    assert rank1.thread == "MainThread"
    sleep = next(c for c in rank1.components if c.key == "sleep")
    assert sleep.ms is not None and abs(sleep.ms - 0.85 * 28.0) < 2.0


def test_four_ranks_the_one_slow_rank_is_named():
    fast = {"held": 0.15, "peers": 0.85}
    profiles = [_rank(r, fast, 10 + r) for r in (0, 1, 3)]
    profiles.append(_rank(2, {"held": 0.15, "native": 0.8, "peers": 0.05}, 12))
    s = pacing_rank(profiles)
    assert s.determined and s.pacing == 2 and s.component == "native"
    assert "native code" in s.shorten


def test_four_ranks_rank0_extra_host_work_paces_the_others():
    profiles = [_rank(0, {"held": 0.8, "gil": 0.05, "peers": 0.05, "sleep": 0.1}, 20)]
    profiles += [_rank(r, {"held": 0.12, "peers": 0.78, "sleep": 0.1}, 20 + r) for r in (1, 2, 3)]
    s = pacing_rank(profiles)
    assert s.determined and s.pacing == 0 and s.component == "held"
    assert "host" in s.shorten and s.shorten.startswith("rank 0's")


def test_all_ranks_alike_is_undetermined():
    profiles = [_rank(r, {"held": 0.3, "peers": 0.7}, 30 + r) for r in range(4)]
    s = pacing_rank(profiles)
    assert not s.determined and s.pacing is None
    assert "undetermined" in s.sentence and "sampling error" in s.sentence
    assert "what would decide" in s.shorten


def test_no_peer_waits_is_undetermined():
    profiles = [_rank(r, {"held": 0.5, "sleep": 0.5}, 40 + r) for r in range(2)]
    s = pacing_rank(profiles)
    assert not s.determined and "no rank's loop is seen waiting for peers" in s.sentence


def test_fewer_than_two_ranks_with_states_is_undetermined():
    gil = make_profile(
        [(100, [sample("MainThread", "main", "step_loop", count=50, tid=LOOP)])] * 6, rank=1
    )
    s = pacing_rank([_rank(0, {"held": 0.1, "peers": 0.9}, 50), gil])
    assert not s.determined and "1 of 2 ranks" in s.sentence and "gil mode" in s.sentence


def test_a_helper_waiting_for_peers_is_taken_when_the_chosen_thread_never_does():
    """The report's choice (busiest thread) is a spinner; the thread in the collective is the
    loop for this question."""
    profiles = [
        _rank(0, {"held": 0.1, "peers": 0.9}, 60, busy_helper=True),
        _rank(1, {"held": 0.1, "sleep": 0.8, "peers": 0.1}, 61, busy_helper=True),
    ]
    s = pacing_rank(profiles)
    assert all(lp.thread == "MainThread" for lp in s.loops)
    assert all("busiest thread waiting for peers" in lp.chosen_by for lp in s.loops), s.loops
    assert s.pacing == 1 and s.component == "sleep"


def test_the_ranks_comparison_leads_with_the_pacing_rank_and_drops_unseen_defaults():
    profiles = [
        _rank(0, {"held": 0.1, "peers": 0.9}, 70),
        _rank(1, {"held": 0.1, "sleep": 0.85, "peers": 0.05}, 71),
    ]
    r = compare_ranks(profiles, watch=("safe_broadcast", "_balance_requests_across_ranks"))
    assert r.watch == () and r.watch_unseen == ("safe_broadcast", "_balance_requests_across_ranks")
    doc = json.loads(render_json(r))
    assert doc["pacing"]["rank"] == 1 and doc["pacing"]["component"] == "sleep"
    assert list(doc)[:2] == ["schema", "pacing"]
    assert doc["watch"] == [] and doc["watch_unseen"] == list(r.watch_unseen)
    text = render_table(r, width=160)
    assert text.splitlines()[0].startswith("rank 1 paces the collective")
    assert "Watched functions" not in text
    assert "safe_broadcast, _balance_requests_across_ranks ran in none" in text


def test_a_watched_function_named_by_a_recipe_or_that_ran_is_kept():
    profiles = [_rank(r, {"held": 0.3, "peers": 0.7}, 80 + r) for r in range(2)]
    # listed twice: the defaults, then a recipe's names (cli watch_list)
    r = compare_ranks(profiles, watch=("safe_broadcast", "host_work", "safe_broadcast"))
    assert [w.function for w in r.watch] == ["safe_broadcast", "host_work"]
    assert r.watch_unseen == ()
    ran = compare_ranks(profiles, watch=("host_work",))
    assert [w.function for w in ran.watch] == ["host_work"]
