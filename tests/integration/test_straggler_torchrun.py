"""A real torch.distributed job (gloo, CPU, torchrun) with one slow rank: `gilprof report` of
every rank names it as the rank that paces the collective.

Each step every rank does ~2 ms of Python, the slow rank first sleeps 25 ms, then all call
`dist.all_reduce`: the others wait for the slow one in the collective. The job prints
"step N rank R t=<wall clock> slept=<seconds inside time.sleep>" every 20 steps (the step
log), from which the loop's period and the slow rank's measured sleep share (the truth) are
read. Every rank is sampled with `gilprof attach --ranks all` (states mode, the default), then
reported side by side.

Tolerances are the profile's own sampling error: the decision rests on the peer-wait
intervals, and the slow rank's sleep share must hold the truth within twice its interval.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from .conftest import kill_tree, run_gilprof, wait_for
from .test_torchrun import torchrun, workers_of

pytestmark = pytest.mark.integration

SLEEP_MS = 25.0
SAMPLE_S = 8
APP = """
import argparse, os, time
import torch
import torch.distributed as dist


def host_work(seconds):
    end = time.perf_counter() + seconds
    total = 0
    while time.perf_counter() < end:
        for i in range(100):
            total += i * i
    return total


SLEPT = [0.0]  # wall seconds spent inside time.sleep, timer expiry to reschedule included


def slow_down(seconds):
    begin = time.perf_counter()
    time.sleep(seconds)
    SLEPT[0] += time.perf_counter() - begin


def step_loop(rank, args):
    deadline = time.monotonic() + args.max_seconds
    flag = torch.zeros(1)
    step = 0
    while True:
        if rank == args.slow_rank and args.slow_by == "work":
            host_work(args.sleep_ms / 1000)  # the seed's shape: extra host work on one rank
        elif rank == args.slow_rank:
            slow_down(args.sleep_ms / 1000)
        host_work(0.002)
        stop = rank == 0 and (time.monotonic() > deadline or os.path.exists(args.stop_file))
        flag[0] = 1.0 if stop else 0.0
        dist.all_reduce(flag)  # every rank leaves after the same step
        if flag[0] > 0:
            return step
        step += 1
        if step % 20 == 0:
            print(f"step {step} rank {rank} t={time.time():.4f} slept={SLEPT[0]:.4f}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--stop-file", required=True)
    p.add_argument("--slow-rank", type=int, required=True)
    p.add_argument("--sleep-ms", type=float, required=True)
    p.add_argument("--max-seconds", type=float, default=90.0)
    p.add_argument("--slow-by", choices=("sleep", "work"), default="sleep")
    args = p.parse_args()
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    rank = dist.get_rank()
    steps = step_loop(rank, args)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank} done after {steps} steps", flush=True)


main()
"""
STEP = re.compile(r"^step (\d+) rank (\d+) t=([\d.]+) slept=([\d.]+)$", re.M)


def _step_log(log: str, rank: int, start: float, end: float) -> tuple[float, float]:
    """Over the sampled seconds, from the step log of `rank`: the loop's mean period in ms, and
    the share of wall time the rank spent inside time.sleep as it measured it itself. The
    measured share, not 25 ms over the period, is the truth: on a loaded host a thread whose
    timer has expired stays in the call until it gets a CPU, and the profile rightly counts
    that time as sleep."""
    lines = [
        (int(s), float(t), float(slept))
        for s, r, t, slept in STEP.findall(log)
        if int(r) == rank and start <= float(t) <= end
    ]
    assert len(lines) >= 2, log[-2000:]
    (s0, t0, slept0), (s1, t1, slept1) = lines[0], lines[-1]
    return 1000 * (t1 - t0) / (s1 - s0), (slept1 - slept0) / (t1 - t0)


def _run(
    tmp_path: Path, nproc: int, slow_rank: int, slow_by: str = "sleep"
) -> tuple[dict, str, tuple[float, float]]:
    app, stop, log = tmp_path / "app.py", tmp_path / "stop", tmp_path / "job.log"
    app.write_text(APP)
    with log.open("wb") as out:
        job = subprocess.Popen(
            [
                *torchrun(),
                *("--standalone", "--nproc-per-node", str(nproc), str(app)),
                *("--stop-file", str(stop), "--slow-rank", str(slow_rank)),
                *("--sleep-ms", str(SLEEP_MS), "--slow-by", slow_by),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        warm = wait_for(lambda: log.read_text().count("step 40 ") >= nproc, 120, 0.2)
        assert warm, log.read_text()[-3000:]
        assert sorted(workers_of(psutil.Process(job.pid))) == list(range(nproc))
        folder = tmp_path / "ranks"
        start = time.time()
        sampled = run_gilprof(
            *("attach", "--ranks", "all", "--job", str(job.pid), "-d", str(SAMPLE_S)),
            *("--window", "1", "-q", "-o", str(folder)),
            timeout=SAMPLE_S + 60,
        )
        end = time.time()
        assert sampled.returncode == 0, sampled.stderr
        stop.touch()
        assert job.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        stop.touch()
        if job.poll() is None:
            kill_tree(job)
    files = sorted(map(str, folder.glob("*.json")))
    assert len(files) == nproc, files
    report = run_gilprof("report", *files, "--format", "json")
    assert report.returncode == 0, report.stderr
    table = run_gilprof("report", *files, "--top", "5")
    assert table.returncode == 0, table.stderr
    print(table.stdout)
    return (
        json.loads(report.stdout),
        table.stdout,
        _step_log(log.read_text(), slow_rank, start, end),
    )


def _check(doc: dict, table: str, slow_rank: int, steps: tuple[float, float]) -> None:
    period_ms, truth = steps
    pacing = doc["pacing"]
    print(f"period {period_ms:.1f} ms, slept {truth:.3f} (nominal {SLEEP_MS / period_ms:.3f})")
    print(pacing["sentence"])
    print(pacing["shorten"])
    assert pacing["determined"] and pacing["rank"] == slow_rank, pacing["sentence"]
    assert pacing["component"] == "sleep", pacing["shorten"]
    assert table.startswith(f"rank {slow_rank} paces the collective"), table[:400]
    loops = {lp["rank"]: lp for lp in pacing["ranks"]}
    slow = loops[slow_rank]
    # the decision, read back: the slow rank's peer-wait interval lies below every other's
    for rank, lp in loops.items():
        if rank != slow_rank:
            assert slow["peer_wait"]["high"] < lp["peer_wait"]["low"], (slow, lp)
    # the sleep's share holds the truth (the rank's own measured share) within its sampling error
    sleep = next(part for part in slow["split"] if part["part"] == "sleep")
    half = (sleep["interval"]["high"] - sleep["interval"]["low"]) / 2
    print(f"sleep read {sleep['share']:.3f} +- {half:.3f} for a measured {truth:.3f}")
    assert abs(sleep["share"] - truth) <= 2 * half, (sleep, truth, period_ms)
    # no row of 0% for the seed change's functions, which this job does not have
    assert doc["watch"] == [] and "safe_broadcast" in doc["watch_unseen"]


def test_two_ranks_the_sleeping_rank_paces_the_all_reduce(tmp_path):
    doc, table, steps = _run(tmp_path, 2, 1)
    _check(doc, table, 1, steps)


def test_four_ranks_the_one_slow_rank_is_named(tmp_path):
    doc, table, steps = _run(tmp_path, 4, 2)
    _check(doc, table, 2, steps)


def test_four_ranks_rank_0s_extra_host_work_paces_the_others(tmp_path):
    """The seed's shape: rank 0 does 25 ms more Python per step than the others, which wait
    for it in the collective; rank 0 is named, and its host Python is what paces them."""
    doc, table, _steps = _run(tmp_path, 4, 0, "work")
    pacing = doc["pacing"]
    print(pacing["sentence"], pacing["shorten"])
    assert pacing["determined"] and pacing["rank"] == 0, pacing["sentence"]
    assert pacing["component"] in ("held", "gil", "native", "running"), pacing["shorten"]
    assert table.startswith("rank 0 paces the collective"), table[:400]
