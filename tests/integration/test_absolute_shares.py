"""Absolute GIL shares: real py-spy on real targets, against the truth the target measures itself.

Each test starts one workload of benchmarks/accuracy/workloads.py, samples it with a real
`python -m gilprof attach` and reads `gilprof report --format json`, through the benchmark's
own code (accuracy_sample.sample, which kills both processes in a `finally`). The truth is
not CPU time but perf_counter timestamps taken inside the target every ~1 us: wall time
inside each function, and who held the GIL on the merged time line of all threads (a band
where a GIL hand-off could belong to either side; see workloads.py). So it stays right on a
loaded machine, and the assertions are on absolute shares of wall time, not on ratios.

Tolerance of every share, in points of wall time (conftest.share_tolerance):

    Z * spread * sqrt(p * (1 - p) / n) + margin

- `p` is the truth and `n` the ticks gilprof counted (py-spy's exact tick count): the
  binomial error of a proportion. py-spy spaces its ticks at random (exponential intervals),
  so ticks are independent draws of the state even when the state itself is periodic.
- Z = 4: about 20 shares are asserted per run of this file; at 4 standard errors the chance
  that sampling noise alone fails one is ~1e-3.
- `spread` is 1 in gil mode; in contention mode, whose pauses tie a tick's state to the last
  one's, it is the measured ratio of the run-to-run spread to the binomial error
  (conftest.CONTENTION_SPREAD).
- `margin` is the residual bias gilprof is known to have, each documented where it is set.

Rates are 500 Hz in gil mode (n ~ 3000 in 6 s: 4 SE of a 20% share is 2.9 points) and 200
Hz in contention mode, whose sampler pauses the target at every tick. Contention mode is
checked on spinners only: on threads that sleep between short bursts it misses by 5-15
points (docs/accuracy.md), which no tolerance that still tests something would cover.
The whole file takes ~40 s; the targets are timed by the clock, so their truths hold
however loaded the machine is.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gilprof.sampling.backends.base import realtime_refusal

from .conftest import CONTENTION_MARGIN, CONTENTION_SPREAD, accuracy_module, share_tolerance

pytestmark = pytest.mark.integration

GIL_RATE, GIL_SECONDS = 500, 6.0
CONTENTION_RATE, CONTENTION_SECONDS = 200, 6.0
# gil mode at SCHED_FIFO: the truth's intervals are the py-spy processes' lifetimes, polled
# every 20 ms (benchmarks/accuracy), so each 2 s window's edges are off by up to 20 ms (1%
# of a window), and the target's bookkeeping between its timed stretches falls between
# truth and gilprof; in the benchmark's 20 s runs (quiet and beside 2 CPU hogs) no
# exact-truth share was off by more than 1.4 points with SE ~1.
GIL_MARGIN = 0.01
# Sampler at normal priority (no CAP_SYS_NICE): it wakes late exactly when the target
# just woke, so a GIL hold shorter than ~1 ms right after a sleep reads low; measured on
# `burst` (0.3 ms holds after 4 ms sleeps): 0.4-1.1% for a truth of 3.2% on an idle
# machine, 2.2% for 2.5% beside 2 CPU hogs. No margin makes that a measurement, so the
# test checks that the profile says so, and the direction and destination of the error.


@dataclass
class Run:
    rows: dict[tuple[str, str], Any]  # (subject, metric) -> accuracy_compare.Row
    ticks: float
    priority: str
    messages: tuple[str, ...]
    report: dict[str, Any]

    def thread(self, name: str) -> dict[str, Any]:
        return next(t for t in self.report["gil"]["threads"] if t["name"] == name)


def _run(tmp_path: Path, workload: str, mode: str, realtime: bool = True) -> Run:
    sample, compare, truth = (
        accuracy_module("accuracy_sample"),
        accuracy_module("accuracy_compare"),
        accuracy_module("accuracy_truth"),
    )
    rate, seconds = (
        (GIL_RATE, GIL_SECONDS) if mode == "gil" else (CONTENTION_RATE, CONTENTION_SECONDS)
    )
    config = sample.Config(workload, mode, rate, seconds, realtime=realtime)
    got = sample.sample(config, sys.executable, tmp_path, None, 0.3)
    ticks = float(got.report["sampling"]["ticks"])
    # Not the planned count on a loaded machine (a blocking window that overran is cut
    # short), but enough that the binomial error below means something.
    assert ticks >= 0.5 * rate * seconds, got.report["sampling"]
    known = truth.truth_over(got.record, got.sampled)
    rows, _top = compare.compare(config, got.report, known, ticks)
    return Run(
        {(r.subject, r.metric): r for r in rows},
        ticks,
        got.priority,
        got.messages,
        got.report,
    )


def _check(run: Run, subject: str, metric: str, margin: float, spread: float = 1.0) -> None:
    row = run.rows[(subject, metric)]
    truth = (row.truth_lo + row.truth_hi) / 2
    limit = share_tolerance(truth, run.ticks, margin, spread)
    # Shown with a failure (and with -s): how close each share came to its tolerance.
    print(
        f"share {subject} {metric}: error {100 * row.error:.2f} limit {100 * limit:.2f} "
        f"({100 * row.error / limit:.0f}% of it) priority {run.priority!r}"
    )
    assert row.error <= limit, (
        f"{subject} {metric}: gilprof {100 * row.measured:.1f}% vs truth "
        f"{100 * row.truth_lo:.1f}-{100 * row.truth_hi:.1f}%, off by {100 * row.error:.1f} "
        f"points > {100 * limit:.1f} ({run.ticks:.0f} ticks)"
    )


def _expect_realtime(run: Run) -> None:
    """The profile records the sampler's scheduling; SCHED_FIFO wherever it is permitted."""
    if realtime_refusal() is None:
        assert run.priority.startswith("SCHED_FIFO"), run.priority
    else:
        assert run.priority.startswith("normal ("), run.priority
        assert any("SCHED_FIFO" in m for m in run.messages), run.messages


def test_gil_mode_held_and_function_shares_of_planted_work(tmp_path):
    # One thread runs planted_20pct / 5pct / 1pct for that share of every 50 ms, by the
    # clock, and sleeps the rest: each function's total share and the thread's held share
    # are exact truths.
    run = _run(tmp_path, "planted", "gil")
    _expect_realtime(run)
    _check(run, "planted-loop", "held", GIL_MARGIN)
    for function in ("planted_20pct", "planted_5pct", "planted_1pct"):
        _check(run, function, "function", GIL_MARGIN)


def test_gil_mode_utilization_of_two_threads_taking_turns(tmp_path):
    # duo-a holds the GIL 15% and duo-b 10% of every 50 ms, half a period apart: no hand-off
    # is ambiguous, so utilization (ticks with any holder) and each held share are exact.
    run = _run(tmp_path, "duo", "gil")
    _check(run, "(any thread)", "utilization", GIL_MARGIN)
    for name, function in (("duo-a", "duo_a"), ("duo-b", "duo_b")):
        _check(run, name, "held", GIL_MARGIN)
        _check(run, function, "function", GIL_MARGIN)


def test_gil_mode_short_holds_after_sleep_beside_a_spinner(tmp_path):
    # burst_fn holds the GIL 0.3 ms after each 4 ms sleep while a spinner holds it the rest
    # of the time: the case a late-waking sampler misses (issue 11: 0.3% read for 3%).
    run = _run(tmp_path, "burst", "gil")
    _expect_realtime(run)
    if not run.priority.startswith("SCHED_FIFO"):
        _check_short_holds_at_normal_priority(run)  # SCHED_FIFO not permitted here
        return
    _check(run, "burst_fn", "function", GIL_MARGIN)
    _check(run, "burst", "held", GIL_MARGIN)
    _check(run, "spin-0", "held", GIL_MARGIN)
    _check(run, "(any thread)", "utilization", GIL_MARGIN)


def _check_short_holds_at_normal_priority(run: Run) -> None:
    assert any("not at real-time priority" in m for m in run.messages), run.messages
    burst = run.rows[("burst_fn", "function")]
    # Short holds read low, never high...
    limit = share_tolerance(burst.truth_hi, run.ticks, GIL_MARGIN)
    assert burst.measured <= burst.truth_hi + limit, burst
    # ...and the ticks missed go to the spinner, which held the GIL next, or to the
    # hand-off itself (the moment a late sampler gets a core is when a target thread
    # blocks): the spinner's share and the utilization are each off by at most what the
    # burst thread lost. (A CI run read utilization 97.9% for 99.3-100%: 1.4 points over a
    # 1.39 limit that left out the second way.)
    _check(run, "spin-0", "held", GIL_MARGIN + burst.truth_hi)
    _check(run, "(any thread)", "utilization", GIL_MARGIN + burst.truth_hi)


def test_gil_mode_sampler_at_normal_priority_is_recorded_and_told(tmp_path):
    # gilprof without CAP_SYS_NICE (setpriv): it asks for SCHED_FIFO, the kernel refuses,
    # and the profile must record the policy it got and carry the accuracy message.
    run = _run(tmp_path, "burst", "gil", realtime=False)
    assert run.priority.startswith("normal ("), run.priority
    _check_short_holds_at_normal_priority(run)


def test_contention_mode_held_wait_and_blame_of_two_spinners(tmp_path):
    # Two threads that never sleep contend for the GIL: each holds it about half of the wall
    # time and waits for it the other half, and while one waits the other holds it. The
    # truth is a band only as wide as the hand-offs between them (a few points at most).
    run = _run(tmp_path, "spin2", "contention")
    assert run.priority.startswith("normal (blocking"), run.priority
    for name, other in (("spin-0", "spin-1"), ("spin-1", "spin-0")):
        seen = run.thread(name)
        unknown = (seen.get("unclassified_share") or 0.0) + (seen.get("native_share") or 0.0)
        margin = CONTENTION_MARGIN + unknown
        _check(run, name, "held", margin, CONTENTION_SPREAD)
        _check(run, name, "wait", margin, CONTENTION_SPREAD)
        # A blame share counts ticks where this thread's stack reads as a GIL wait, so the
        # waits py-spy could not name come out of it as they come out of the wait share.
        _check(run, f"{name} <- {other}", "blame", margin, CONTENTION_SPREAD)
