"""Overhead of `gilprof attach` on rank 0, with sampling switched on and off every few seconds.

    python benchmarks/overhead_alternating.py                        # 100 Hz states, 8 min
    python benchmarks/overhead_alternating.py --minutes 2 --json     # a quick run
    python benchmarks/overhead_alternating.py --mode gil             # py-spy alone

Why a second overhead benchmark: on the example server the median step of one 8 s phase
moves by ±8-15% against the next with no sampler at all (the closed-loop client's load
drifts over seconds), so overhead.py's separate `gilprof attach` runs per phase need tens of
minutes to resolve a bound of a few percent. Here one `gilprof attach` samples rank 0 for
the whole run and the script stops it and its py-spy children (SIGSTOP) for every other
`--period` seconds, then lets them go on (SIGCONT). The target is never paused by either
sampler in these modes (non-blocking), so a stopped gilprof costs it nothing: the off
periods are unsampled phases of the same run, interleaved with the sampled ones at the
scale of a few seconds, and the drift cancels.

Each iteration of rank 0's log belongs to the period that holds at least half of it
(overhead.assign_steps). Reported:
- the ratio of median step times, sampled over unsampled periods pooled, with the same 95%
  moving-block bootstrap interval as overhead.py (`gilprof.stats.median_difference_ci`);
- a paired estimate: per sampled period, its median over the mean median of the unsampled
  periods on either side, with a t interval of the mean log-ratio;
- the unsampled periods' own spread, the samples per sampled second, and the cost of the
  reader and py-spy from the profile's messages.
The first period after each SIGCONT includes py-spy's catch-up, if it had any: that is
part of the cost measured.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common
from _common import BenchmarkError

_common.ensure_gilprof_importable()

import psutil  # noqa: E402
from overhead import assign_steps  # noqa: E402
from overhead_phases import CONFIGS, ExampleJob, Phase, StepLogTail  # noqa: E402

from gilprof.profile import Profile  # noqa: E402
from gilprof.sampling.processes import die_with_parent  # noqa: E402
from gilprof.stats import median_difference_ci, quantiles, t_quantile  # noqa: E402

(UNSAMPLED,) = (c for c in CONFIGS if c.rate_hz is None)


def _tree(pid: int) -> list[psutil.Process]:
    try:
        parent = psutil.Process(pid)
        return [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def pause(pid: int) -> None:
    """Stop gilprof, then every descendant it has (none can be born while it is stopped)."""
    for proc in _tree(pid):
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGSTOP)


def resume(pid: int) -> None:
    for proc in reversed(_tree(pid)):  # children first: gilprof finds them running
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGCONT)


def paired_ratios(phases: list[Phase]) -> list[float]:
    """Per sampled period: its median over the mean median of its unsampled neighbours."""
    out = []
    for i, phase in enumerate(phases):
        if phase.config.rate_hz is None or not phase.host_ms():
            continue
        around = [
            statistics.median(p.host_ms())
            for p in (phases[i - 1] if i else None, phases[i + 1] if i + 1 < len(phases) else None)
            if p is not None and p.config.rate_hz is None and p.host_ms()
        ]
        if around:
            out.append(statistics.median(phase.host_ms()) / statistics.mean(around))
    return out


def run(options: argparse.Namespace) -> dict[str, Any]:
    (sampled_config,) = (
        c for c in CONFIGS if c.key == ("100st" if options.mode == "states" else "100nb")
    )
    total = options.minutes * 60.0
    load_before = _common.load_average()
    with tempfile.TemporaryDirectory(prefix="gilprof-overhead-alt-") as tmp:
        workdir = Path(tmp)
        job = ExampleJob(options.ranks, options.impl, options.warmup + total + 60, workdir)
        tail = StepLogTail(job.log_path)
        tail.start()
        proc = None
        try:
            rank0 = job.rank0_pid(timeout=90)
            deadline = time.monotonic() + 90
            while not tail.records():
                if not job.alive() or time.monotonic() > deadline:
                    raise BenchmarkError(f"rank 0 logged no iteration: {job.output_tail()}")
                time.sleep(0.1)
            time.sleep(options.warmup)
            output = workdir / "profile.json"
            cmd = [
                sys.executable, "-m", "gilprof", "attach", "--pid", str(rank0),
                "-d", f"{total + 30:g}", "-q", "-o", str(output),
                "--rate", str(options.rate), "--mode", options.mode,
            ]  # fmt: skip
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=_common.child_env(),
                preexec_fn=die_with_parent,
            )
            time.sleep(3.0)  # gilprof's start-up and its first window: not measured
            if proc.poll() is not None:
                said = proc.stderr.read().decode() if proc.stderr else ""
                raise BenchmarkError(f"gilprof attach exited: {said[-300:]}")
            phases: list[Phase] = []
            sampling = True
            end = time.monotonic() + total
            while time.monotonic() < end:
                start = time.monotonic()
                time.sleep(options.period)
                config = sampled_config if sampling else UNSAMPLED
                phases.append(Phase(config, start, time.monotonic()))
                if sampling:
                    pause(proc.pid)
                else:
                    resume(proc.pid)
                sampling = not sampling
            resume(proc.pid)
            proc.send_signal(signal.SIGINT)  # writes the profile, marked partial
            proc.wait(timeout=60)
            steps = tail.records()
            profile = Profile.load(output)
        finally:
            if proc is not None and proc.poll() is None:
                resume(proc.pid)
                proc.kill()
                proc.wait()
            tail.stop()
            job.stop()
    phases = phases[1:]  # the first sampled period follows gilprof's start-up
    assign_steps(phases, steps)
    return summarize(phases, profile, options, load_before, job.display)


def summarize(
    phases: list[Phase], profile: Profile, options: argparse.Namespace, load_before: Any, job: str
) -> dict[str, Any]:
    off = [ms for p in phases if p.config.rate_hz is None for ms in p.host_ms()]
    on = [ms for p in phases if p.config.rate_hz is not None for ms in p.host_ms()]
    if len(off) < 10 or len(on) < 10:
        raise BenchmarkError(f"too few iterations ({len(off)} unsampled, {len(on)} sampled)")
    base = quantiles(off, [0.5])[0]
    ordered = sorted(
        [(s, False) for p in phases if p.config.rate_hz is None for s in p.steps]
        + [(s, True) for p in phases if p.config.rate_hz is not None for s in p.steps],
        key=lambda x: x[0].seen_at,
    )
    diff = median_difference_ci(
        [math.log(s.host_ms) for s, sampled in ordered if not sampled],
        [math.log(s.host_ms) for s, sampled in ordered if sampled],
        resamples=2000,
    )
    logs = [math.log(r) for r in paired_ratios(phases)]
    mean = statistics.mean(logs)
    half = t_quantile(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    off_medians = [statistics.median(p.host_ms()) / base for p in phases
                   if p.config.rate_hz is None and p.host_ms()]  # fmt: skip
    sampled_s = sum(p.seconds for p in phases if p.config.rate_hz is not None)
    return {
        "benchmark": "overhead_alternating",
        "job": job,
        "mode": options.mode,
        "rate_hz": options.rate,
        "period_s": options.period,
        "periods": len(phases),
        "iterations": {"unsampled": len(off), "sampled": len(on)},
        "baseline_median_ms": round(base, 3),
        "ratio": round(quantiles(on, [0.5])[0] / base, 4),
        "ratio_ci95": [round(math.exp(diff.low), 4), round(math.exp(diff.high), 4)],
        "paired_ratio": round(math.exp(mean), 4),
        "paired_ci95": [round(math.exp(mean - half), 4), round(math.exp(mean + half), 4)],
        "unsampled_period_ratios": {
            "p10": round(quantiles(off_medians, [0.1])[0], 3),
            "p90": round(quantiles(off_medians, [0.9])[0], 3),
        },
        "samples_per_sampled_s": round(profile.sampling.samples / sampled_s, 1),
        "reader_cost": [m for m in profile.sampling.messages if "thread-state reader" in m],
        "machine": _common.machine_info(),
        "load_before": load_before,
        "load_after": _common.load_average(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=8.0, help="measured minutes (8)")
    parser.add_argument("--period", type=float, default=2.0, help="seconds per period (2)")
    parser.add_argument("--mode", choices=("states", "gil"), default="states")
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--impl", default="before")
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()

    def terminated(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)  # runs the clean-up: gilprof resumed, then stopped

    signal.signal(signal.SIGTERM, terminated)
    try:
        result = run(options)
    except BenchmarkError as exc:
        _common.fail(str(exc))
    if options.json:
        print(json.dumps(result, indent=2))
    else:
        ci, pci = result["ratio_ci95"], result["paired_ci95"]
        print(
            f"{result['mode']} {result['rate_hz']} Hz on/off every {result['period_s']:g} s, "
            f"{result['periods']} periods, baseline median {result['baseline_median_ms']} ms\n"
            f"ratio {result['ratio']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]  paired "
            f"{result['paired_ratio']:.3f} [{pci[0]:.3f}, {pci[1]:.3f}]\n"
            f"unsampled periods p10-p90 {result['unsampled_period_ratios']}\n"
            + "\n".join(result["reader_cost"][:1])
        )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
