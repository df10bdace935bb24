"""Overhead of `gilprof attach` on rank 0: loop iteration time unsampled vs sampled.

    python benchmarks/overhead.py                   # 6 phases of 8 s, about 70 s
    python benchmarks/overhead.py --rounds 3 --phase-seconds 6    # 16 phases, about 2.5 min
    python benchmarks/overhead.py --quick --json    # 6 phases of 1.5 s, about 20-40 s

One run of the example job (`mpiexec -n 4 python examples/disagg_gen/server.py --impl before`)
goes through sequential phases: no sampler, 100 Hz states mode (the default: py-spy
non-blocking plus gilprof's thread-state reader), 100 Hz gil non-blocking, 100 Hz gil
blocking, 1000 Hz gil non-blocking, 1000 Hz gil blocking, and no sampler again
(`--config 100st` runs only the states phases, between unsampled ones). A sampled phase is one
`python -m gilprof attach --pid RANK0 -d S -q -o FILE` run; it lasts from the moment its
first `py-spy record` process appears until its last one is gone, so gilprof's own start-up
is left out but the gaps between sampling windows are in. Rank 0 logs TensorRT-LLM iteration
lines; a line read from the log at time t with host_step_time h is an iteration that ran
over [t - h, t], and it counts for a phase when at least half of it lies inside the phase.
A configuration's ratio is the median iteration time of its phases over the median of all
unsampled phases pooled; its 95% interval is a moving-block bootstrap of the difference of
median log times (`gilprof.stats.median_difference_ci`), exponentiated. `--rounds N`
repeats the sampled configurations N times, rotated, each round after an unsampled phase,
so that slow drift in the job or in the machine's load averages out.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common
from _common import BenchmarkError

_common.ensure_gilprof_importable()

# This script schedules the phases and summarizes them; overhead_phases runs the job, tails
# rank 0's log and runs one phase.
from overhead_phases import (  # noqa: E402
    CONFIGS,
    Config,
    ExampleJob,
    Phase,
    StepLogTail,
    TimedStep,
    rotated_schedule,
    run_phase,
)

from gilprof.stats import median_difference_ci, quantiles  # noqa: E402

# Allowance per sampled phase for `python -m gilprof attach` to start and save its profile.
ATTACH_ALLOWANCE_S = 6.0


def assign_steps(phases: list[Phase], steps: list[TimedStep]) -> None:
    """An iteration belongs to the phase that holds at least half of it."""
    for phase in phases:
        phase.steps = [
            s
            for s in steps
            if min(s.seen_at, phase.end) - max(s.started_at, phase.start) >= s.host_ms / 2e3
        ]


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _phase_row(phase: Phase, origin: float, base_median: float) -> dict[str, Any]:
    values = phase.host_ms()
    median = quantiles(values, [0.5])[0] if values else None
    return {
        "key": phase.config.key,
        "start_s": round(phase.start - origin, 3),
        "seconds": round(phase.seconds, 3),
        "iterations": len(values),
        "median_ms": _round(median, 3),
        "ratio": None if median is None else round(median / base_median, 4),
        "samples": phase.samples,
        "windows": phase.windows,
        "sampler_errors": phase.errors,
        "attach_cpu_s": _round(phase.attach_cpu_s, 3),
        "pyspy_cpu_s": _round(phase.pyspy_cpu_s, 3),
    }


def _config_row(
    config: Config, phases: list[Phase], baseline: list[float], base_median: float
) -> dict[str, Any]:
    values = [ms for p in phases for ms in p.host_ms()]
    seconds = sum(p.seconds for p in phases)
    row: dict[str, Any] = {
        "key": config.key,
        "label": config.label,
        "rate_hz": config.rate_hz,
        "blocking": config.blocking,
        "phases": len(phases),
        "seconds": round(seconds, 3),
        "iterations": len(values),
        "median_ms": None,
        "p10_ms": None,
        "p90_ms": None,
        "ratio": None,
        "ratio_ci95": None,
        "samples_per_s": None,
        "pyspy_cpu_share": None,
        "reader_cost": [p.reader_cost for p in phases if p.reader_cost],
    }
    if config.rate_hz is not None and seconds > 0:
        row["samples_per_s"] = round(sum(p.samples or 0 for p in phases) / seconds, 1)
        row["pyspy_cpu_share"] = round(sum(p.pyspy_cpu_s or 0.0 for p in phases) / seconds, 4)
    if values:
        p10, p50, p90 = quantiles(values, [0.1, 0.5, 0.9])
        row.update(
            median_ms=round(p50, 3),
            p10_ms=round(p10, 3),
            p90_ms=round(p90, 3),
            ratio=round(p50 / base_median, 4),
        )
        if config.rate_hz is not None and len(values) >= 2:
            # On log times a difference of medians is the log of their ratio (the median
            # commutes with a monotone map), so the interval's ends are ratios too.
            diff = median_difference_ci(
                [math.log(max(v, 1e-3)) for v in baseline],
                [math.log(max(v, 1e-3)) for v in values],
                resamples=1000,
            )
            row["ratio_ci95"] = [round(math.exp(diff.low), 4), round(math.exp(diff.high), 4)]
    return row


def summarize(phases: list[Phase]) -> dict[str, Any]:
    unsampled = [p for p in phases if p.config.rate_hz is None]
    baseline = [ms for p in unsampled for ms in p.host_ms()]
    if len(baseline) < 3:
        raise BenchmarkError(f"only {len(baseline)} unsampled iterations; raise --phase-seconds")
    base_median = quantiles(baseline, [0.5])[0]
    configs = [
        _config_row(c, [p for p in phases if p.config == c], baseline, base_median)
        for c in CONFIGS
        if any(p.config == c for p in phases)
    ]
    phase_rows = [_phase_row(p, phases[0].start, base_median) for p in phases]
    return {
        "baseline_median_ms": round(base_median, 3),
        "baseline_iterations": len(baseline),
        "ratios": {row["key"]: row["ratio"] for row in configs if row["rate_hz"] is not None},
        "unsampled_phase_ratios": [row["ratio"] for row in phase_rows if row["key"] == "none"],
        "configs": configs,
        "phases": phase_rows,
    }


def schedule(rounds: int, only: list[str] | None = None) -> list[Config]:
    """rotated_schedule over the sampled configurations (`only` these keys, if given)."""
    sampled = [c for c in CONFIGS[1:] if not only or c.key in only]
    return rotated_schedule(CONFIGS[0], sampled, rounds)


def run(options: argparse.Namespace) -> dict[str, Any]:
    load_before = _common.load_average()
    order = schedule(options.rounds, options.config)
    loop_seconds = options.duration or (
        options.warmup
        + len(order) * (options.phase_seconds + options.settle + ATTACH_ALLOWANCE_S)
        + 30
    )
    with tempfile.TemporaryDirectory(prefix="gilprof-overhead-") as tmp:
        workdir = Path(tmp)
        job = ExampleJob(options.ranks, options.impl, loop_seconds, workdir)
        tail = StepLogTail(job.log_path)
        tail.start()
        try:
            rank0 = job.rank0_pid(timeout=90)
            deadline = time.monotonic() + 90
            while not tail.records():
                if not job.alive() or time.monotonic() > deadline:
                    raise BenchmarkError(f"rank 0 logged no iteration: {job.output_tail()}")
                time.sleep(0.1)
            time.sleep(options.warmup)
            phases = []
            for config in order:
                if not job.alive():
                    raise BenchmarkError(
                        f"the job ended before phase {config.label!r}; raise --duration"
                    )
                phases.append(run_phase(config, rank0, options.phase_seconds, workdir))
                time.sleep(options.settle)
            if not job.alive():
                raise BenchmarkError("the job ended during the last phase; raise --duration")
            steps = tail.records()
        finally:
            tail.stop()
            job.stop()
    assign_steps(phases, steps)
    result = summarize(phases)
    return {
        "benchmark": "overhead",
        "job": {
            "command": job.display,
            "ranks": options.ranks,
            "impl": options.impl,
            "loop_seconds": loop_seconds,
        },
        "phase_seconds": options.phase_seconds,
        "rounds": options.rounds,
        "order": [c.key for c in order],
        "machine": _common.machine_info(),
        "load_before": load_before,
        "load_after": _common.load_average(),
        **result,
    }


def _fmt(value: float | None, pattern: str) -> str:
    return "-" if value is None else format(value, pattern)


def print_report(result: dict[str, Any]) -> None:
    rows = []
    for r in result["configs"]:
        ci = r["ratio_ci95"]
        ratio = _fmt(r["ratio"], ".3f") + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
        rows.append(
            [
                r["label"],
                str(r["phases"]),
                f"{r['seconds']:.1f}",
                str(r["iterations"]),
                _fmt(r["median_ms"], ".1f"),
                _fmt(r["p90_ms"], ".1f"),
                ratio,
                _fmt(r["samples_per_s"], ".0f"),
                _fmt(r["pyspy_cpu_share"], ".1%"),
            ]
        )
    _common.print_table(
        f"gilprof attach overhead on rank 0 ({result['job']['command']})",
        [
            "configuration",
            "phases",
            "s",
            "iters",
            "median ms",
            "p90 ms",
            "ratio [95% CI]",
            "samples/s",
            "py-spy CPU",
        ],
        rows,
        notes=[
            f"order: {', '.join(result['order'])}",
            f"unsampled median {result['baseline_median_ms']:.1f} ms over "
            f"{result['baseline_iterations']} iterations; ratio = median / unsampled median",
            "noise floor: each unsampled phase's median / unsampled median: "
            + ", ".join(_fmt(r, ".3f") for r in result["unsampled_phase_ratios"]),
            "samples/s: GIL-held samples recorded per second (gil mode records a tick "
            "only when a thread holds the GIL)",
            "py-spy CPU = CPU time of the phase's py-spy processes / phase seconds "
            "(one core = 100%)",
            f"{result['machine']['cpus']} CPUs; load average before {result['load_before']}, "
            f"after {result['load_after']}",
            *[
                f"{r['key']} phase {i}: {note}"
                for r in result["configs"]
                for i, note in enumerate(r.get("reader_cost") or [], 1)
            ],
        ],
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--phase-seconds",
        type=float,
        default=8.0,
        help="seconds each phase samples (or runs unsampled); default 8",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="the job's loop seconds (default: long enough for all phases)",
    )
    parser.add_argument(
        "--warmup",
        type=float,
        default=3.0,
        help="seconds after rank 0's first iteration before the first phase",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="repeat the sampled configurations this many times, each round "
        "after an unsampled phase (default 1)",
    )
    parser.add_argument(
        "--settle", type=float, default=1.0, help="unmeasured seconds between phases"
    )
    parser.add_argument("--ranks", type=int, default=4, help="MPI ranks (default 4)")
    parser.add_argument(
        "--config",
        action="append",
        choices=[c.key for c in CONFIGS[1:]],
        help="run only this sampled configuration (repeatable; default: all)",
    )
    parser.add_argument("--impl", default="before", help="the example's --impl (default before)")
    _common.output_options(parser, quick="1.5 s phases, 1 s warm-up, 0.5 s settle: a smoke run")
    options = parser.parse_args(argv)
    if options.quick:
        options.phase_seconds, options.warmup, options.settle, options.rounds = 1.5, 1.0, 0.5, 1
    if (
        options.phase_seconds <= 0
        or options.warmup < 0
        or options.settle < 0
        or options.ranks < 1
        or options.rounds < 1
    ):
        parser.error(
            "--phase-seconds must be > 0, --warmup and --settle >= 0, --ranks and --rounds >= 1"
        )
    return options


def main(argv: list[str] | None = None) -> int:
    return _common.run_main(argv, parse_args, run, print_report)


if __name__ == "__main__":
    sys.exit(main())
