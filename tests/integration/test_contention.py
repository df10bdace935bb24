"""GIL wait and blame against ground truth, on CPython 3.11-3.13 targets.

Truth for never-sleeping spinners: while the process runs, exactly one spinner holds the GIL,
so spinner i's share of the running time is cpu_i / sum(cpu) and it waits the rest. Dividing
by the spinners' summed CPU (not by wall time) removes what would otherwise bias the truth:
contention mode pauses the target at every sample (py-spy --native is blocking), and on a
loaded machine the OS preempts a thread that holds the GIL; neither advances CPU time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gilprof.model import ThreadState
from gilprof.profile import Profile
from gilprof.stats import ratio_mean_ci

from .conftest import (
    WORKLOADS,
    assert_exits,
    attach,
    gilprof_stdout,
    require_interpreter,
    run_cli,
    start_target,
)

pytestmark = pytest.mark.integration
WORKLOAD = str(WORKLOADS / "contention_workload.py")


def _sample(spawn, tmp_path, python, spinners, seconds=8.0, native=False, window=2.0):
    truth_file = tmp_path / "truth.json"
    args = ["--spinners", str(spinners), "--duration", str(seconds + 3), "--truth", str(truth_file)]
    target = start_target(spawn, [python, WORKLOAD, *args, *(["--native"] if native else [])], 0.8)
    out = tmp_path / "c.json"
    run = attach(
        spawn, target.pid, out, "--mode", "contention", "-d", str(seconds), "--window", str(window)
    )
    assert_exits(run, timeout=seconds + 60)
    assert target.wait(timeout=60) == 0
    report = gilprof_stdout(spawn, "report", str(out), "--contention", "--format", "json")
    return json.loads(report), json.loads(truth_file.read_text())


# The truth is thread CPU time read once at the end: its own error is a few scheduler ticks
# (4 ms each) over ~10 s of CPU, well under a point; 0.01 covers it.
TRUTH_ERROR = 0.01
CONFIDENCE = 0.999  # a correct sampler fails 1 run in 1000


def _sampling_tolerance(
    path: Path, names: tuple[str, ...], state: ThreadState = ThreadState.HELD
) -> dict[str, float]:
    """Half-width of the 99.9% batch-means interval (one batch per sampling window, Student t
    on the windows' degrees of freedom: gilprof.stats.ratio_mean_ci, the interval `compare`
    reports) of each spinner's samples in `state` over the spinners' held samples, plus the
    truth's error.

    Not a binomial interval: pausing the target at every tick correlates a tick's holder with
    the last one's (likely because the waiter's switch timer runs on through a pause, so a
    pause tends to be followed by a hand-off). Measured over repeated 4 s runs at 100 Hz, a spinner's share
    varied by 5-6 points where a binomial error would be 2.5.
    """
    profile = Profile.load(path)
    out = {}
    for name in names:
        num, den = [], []
        for window in profile.windows:
            mine = total = 0
            for index, count in window.counts.items():
                stack = profile.stacks[index]
                if stack.state is ThreadState.HELD and profile.threads.get(stack.tid) in names:
                    total += count
                mine += (
                    count if stack.state is state and profile.threads.get(stack.tid) == name else 0
                )
            num.append(mine)
            den.append(total)
        estimate = ratio_mean_ci(num, den, CONFIDENCE)
        out[name] = (estimate.high - estimate.low) / 2 + TRUTH_ERROR
    return out


@pytest.mark.parametrize("minor", ["11", "12", "13"])
def test_two_spinners_wait_share_matches_truth_and_blame_names_the_other(tmp_path, spawn, minor):
    python = require_interpreter(minor)
    # 1 s windows: eight batches for the sampling error of each share.
    report, truth = _sample(spawn, tmp_path, python, spinners=2, window=1.0)
    threads = {t["name"]: t for t in report["gil"]["threads"]}
    names = ("spin-0", "spin-1")
    running = sum(truth[n] for n in names)
    held_total = sum(threads[n]["held_share"] for n in names)
    assert held_total > 0.8  # the GIL is almost never free between two spinners
    tolerance = _sampling_tolerance(tmp_path / "c.json", names)
    wait_tolerance = _sampling_tolerance(tmp_path / "c.json", names, ThreadState.WAITING)
    # The CPU-time truth says who runs, not who waits while the GIL is in hand-off (free, the
    # woken spinner not yet holding it): a tick there can read a spinner waiting that the truth
    # cannot split. Those ticks are measured in this run: the share where no spinner held.
    free = (1 - held_total) / held_total
    for name in names:
        held, wait = threads[name]["held_share"], threads[name]["wait_share"]
        share_truth = truth[name] / running
        # Tolerances from the sampling error of this very run, not from what passed once. A
        # spinner's wait also loses the samples that stayed unclassified (measured here).
        lost = threads[name]["unclassified_share"] / held_total
        assert abs(held / held_total - share_truth) < tolerance[name], (
            name,
            threads[name],
            truth,
            tolerance,
        )
        assert abs(wait / held_total - (1 - share_truth)) < wait_tolerance[name] + lost + free, (
            name,
            threads[name],
            truth,
            wait_tolerance,
            free,
        )
    # while spin-0 waits, spin-1 holds the GIL, and the other way round
    for waiter, holder in (("spin-0", "spin-1"), ("spin-1", "spin-0")):
        rows = [b for b in report["blame"] if b["waiter"] == waiter]
        assert rows and rows[0]["holder"] == holder, rows[:3]
        assert rows[0]["holder_function"] == "spin_forever"


def test_four_spinners_and_a_native_thread(tmp_path, spawn):
    python = require_interpreter("11")
    report, truth = _sample(spawn, tmp_path, python, spinners=4, native=True, window=1.0)
    threads = {t["name"]: t for t in report["gil"]["threads"]}
    names = tuple(f"spin-{i}" for i in range(4))
    running = sum(truth[n] for n in names)
    held_total = sum(threads[n]["held_share"] for n in names)
    tolerance = _sampling_tolerance(tmp_path / "c.json", names)
    for name in names:
        share_truth = truth[name] / running
        assert abs(threads[name]["held_share"] / held_total - share_truth) < tolerance[name], (
            threads[name],
            truth,
            tolerance,
        )
        assert threads[name]["wait_share"] > 0.4  # four spinners: each waits most of the time
    zlib = threads["zlib"]
    assert zlib["native_share"] > 0.05  # deflate runs without the GIL
    assert zlib["wait_share"] > 0.05  # and must take the GIL back after each call
    assert report["gil"]["utilization"] > 0.8


def test_contention_flag_on_a_gil_profile_is_refused(tmp_path):
    from tests.unit.builders import make_profile, sample

    path = tmp_path / "gil.json"
    make_profile([(100, [sample("t", "f", count=5, tid=1)])]).save(path)
    result = run_cli("report", path, "--contention")
    assert result.exit_code == 2
    assert "--mode states" in result.output
