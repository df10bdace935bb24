"""Short versions of benchmarks/accuracy: gilprof's shares against truth measured in the target.

Each test runs one real target (benchmarks/accuracy/workloads.py) and one real
`python -m gilprof attach`, through the benchmark's own `measure`, which kills both in a
`finally`. Truth comes from timestamps inside the target, not CPU time, so it stays right on
an oversubscribed machine; where a GIL hand-off could belong to either side the truth is a
band, and a row's `error` is gilprof's distance to that band (0 inside it).

Tolerances are wider than the benchmark's targets (held 2 points, wait 5 points at 100 Hz
over 20 s): 4 s at 100 Hz gives ~400 ticks, so one share of 50% has a sampling error of 2.5
points by itself. Contention-mode shares are held to conftest.share_tolerance (4 standard
errors of the truth at the ticks counted, plus the documented margin and what gilprof itself
reported as unclassified or native for that thread), as in test_absolute_shares.py.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest

from .conftest import CONTENTION_MARGIN, CONTENTION_SPREAD, accuracy_runner, share_tolerance

pytestmark = pytest.mark.integration

SECONDS = 4.0


def _measure(tmp_path, workload: str, mode: str):
    run = accuracy_runner()
    return run.measure(
        run.Config(workload, mode, 100, SECONDS), sys.executable, tmp_path, baseline_s=0.2
    )


def _rows(outcome: Any, metric: str) -> dict[str, Any]:
    return {r.subject: r for r in outcome.rows if r.metric == metric}


def test_planted_function_shares_match_wall_time_inside_them(tmp_path):
    outcome = _measure(tmp_path, "planted", "gil")
    functions = _rows(outcome, "function")
    # 4 s at 100 Hz is two or three py-spy windows of ~199 ticks; on a loaded machine a run
    # has been counted over one window alone (measured shares of k/199), where 20% of wall
    # has a sampling error of 2.8 points. So each bound is the wider of the fixed one (room
    # for load at ~400 ticks) and 3.5 binomial errors at the truth and this run's ticks.
    # at least one whole window was counted (a window py-spy failed is now sampled again:
    # session.WINDOW_RETRIES); the messages say what a short capture lost
    assert outcome.ticks >= 150, (outcome.ticks, outcome.messages)
    for name, fixed in (("planted_20pct", 0.05), ("planted_5pct", 0.04), ("planted_1pct", 0.02)):
        row = functions[name]
        truth = (row.truth_lo + row.truth_hi) / 2
        bound = max(fixed, 3.5 * math.sqrt(truth * (1 - truth) / outcome.ticks))
        assert row.error < bound, (name, f"bound {bound:.3f}", outcome.ticks, functions)
    held = _rows(outcome, "held")["planted-loop"]
    assert held.error < 0.06, held


def _check(outcome: Any, subject: str, metric: str, margin: float) -> None:
    """Every check here is of contention mode: its spread is wider than binomial."""
    row = _rows(outcome, metric)[subject]
    middle = (row.truth_lo + row.truth_hi) / 2
    limit = share_tolerance(middle, outcome.ticks, margin, CONTENTION_SPREAD)
    assert row.error <= limit, (subject, metric, row, f"limit {limit:.3f}", outcome.config)


def _unnamed(outcome: Any, name: str) -> float:
    """What gilprof reported of `name` as unclassified or native: a spinner's held and wait
    shares may each miss by that much (see conftest.CONTENTION_MARGIN)."""
    rows = [r for r in outcome.rows if r.subject == name and r.metric in ("unclassified", "native")]
    return sum(r.measured for r in rows)


def test_two_spinners_wait_shares_and_blame_name_the_other_thread(tmp_path):
    outcome = _measure(tmp_path, "spin2", "contention")
    for name, other in (("spin-0", "spin-1"), ("spin-1", "spin-0")):
        # ~400 ticks: 4 x 1.5 SE of a 50% share is 15 points; the band widens with hand-offs.
        margin = CONTENTION_MARGIN + _unnamed(outcome, name)
        _check(outcome, name, "wait", margin)
        _check(outcome, name, "held", margin)
        # A blame share counts only ticks at which the waiter's stack reads as a GIL wait,
        # so the waits py-spy cannot name come out of it as they come out of the wait share.
        _check(outcome, f"{name} <- {other}", "blame", margin)
    # While spin-0 waits, spin-1 holds the GIL, and the other way round.
    assert outcome.top_holder == {"spin-0": "spin-1", "spin-1": "spin-0"}


def test_four_spinners_wait_shares_match_truth(tmp_path):
    outcome = _measure(tmp_path, "spin4", "contention")
    names = {f"spin-{i}" for i in range(4)}
    assert set(_rows(outcome, "wait")) == names
    for name in sorted(names):
        _check(outcome, name, "wait", CONTENTION_MARGIN + _unnamed(outcome, name))
    # Every spinner names another spinner as its top holder, never itself or nobody.
    for waiter, holder in outcome.top_holder.items():
        assert holder.startswith("spin-") and holder != waiter, outcome.top_holder


def test_wait_to_retake_the_gil_after_sleep_is_counted_as_wait(tmp_path):
    # py-spy shows this wait as pthread_cond_timedwait under time_sleep; before the leaf
    # frame decided the state it was reported as idle (0.1% against a truth of 54-63%).
    outcome = _measure(tmp_path, "sleeper", "contention")
    assert _rows(outcome, "wait")["sleeper"].truth_lo > 0.2  # the workload does make it wait
    # ~55% of wall at ~400 ticks: 4 x 1.5 SE is 15 points. The truth's wait starts at the sleep's
    # deadline, where py-spy sees the thread wake (measured tick by tick: 52.8% read, 53.0%
    # true at its stops, benchmarks/accuracy/accuracy_ticks.py).
    _check(outcome, "sleeper", "wait", CONTENTION_MARGIN + _unnamed(outcome, "sleeper"))
