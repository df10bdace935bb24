"""Overhead of `gilprof attach` on a process with 64 OpenMP threads: states vs contention mode.

    python benchmarks/overhead_torch.py                       # 3 rounds of 8 s phases, ~3 min
    python benchmarks/overhead_torch.py --rounds 1 --phase-seconds 4 --json
    python benchmarks/overhead_torch.py --python /root/.pyenv/versions/3.11.7/bin/python3

The target imports torch (the CPU build), calls `torch.set_num_threads(64)` and runs a few
matrix products so that the OpenMP pool exists (~128 threads in all, as a real engine rank
with torch, OpenMP and NCCL threads has), then runs a pure-Python loop in its main thread
(one iteration: ITERATION_WORK additions, ~10 ms) and records each iteration's end time
and duration. The phases, in one run: unsampled, then `gilprof attach --pid P -d S -r 100
--mode states` and `--mode contention` (rotated one place per round), then unsampled again
after every round. A sampled phase lasts from the moment its first `py-spy record` process
appears until its last one is gone (overhead_phases.run_phase). A mode's ratio is the median
iteration time of its phases over the median of all unsampled phases pooled, with the 95%
interval of overhead.py (moving-block bootstrap of the difference of median log times).
contention mode pauses the target for each sample, one thread after another: with 128
threads every pause is long; states mode never pauses it and reads its Python threads only.
The reader's own CPU per tick and per Python thread read is the profile's
"thread-state reader" message, printed per states phase.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common
from _common import BenchmarkError

_common.ensure_gilprof_importable()

from overhead import _config_row, assign_steps  # noqa: E402
from overhead_phases import Config, Phase, TimedStep, rotated_schedule, run_phase  # noqa: E402

from gilprof.stats import quantiles  # noqa: E402

ITERATION_WORK = 60_000
TARGET = """
import json, os, select, sys, time
import torch
torch.set_num_threads(64)
a = torch.randn(512, 512)
for _ in range(20):
    a = torch.tanh(a @ a) # the OpenMP pool starts: 64 threads
threads = len(os.listdir("/proc/self/task"))
print("ready", os.getpid(), threads, flush=True)
records = []
now = time.monotonic
work = int(sys.argv[1])
while True:
    t0 = now()
    total = 0
    for i in range(work):
        total += i
    t1 = now()
    records.append((t1, t1 - t0))
    if select.select([sys.stdin], [], [], 0)[0]:
        break
print(json.dumps({"threads": threads, "records": records}), flush=True)
"""
UNSAMPLED = Config("none", "no sampler", None)
SAMPLED = (
    Config("states", "100 Hz states (default)", 100, mode="states"),
    Config("contention", "100 Hz contention", 100, mode="contention"),
)


def schedule(rounds: int) -> list[Config]:
    return rotated_schedule(UNSAMPLED, list(SAMPLED), rounds)


def run(options: argparse.Namespace) -> dict[str, Any]:
    load_before = _common.load_average()
    order = schedule(options.rounds)
    with tempfile.TemporaryDirectory(prefix="gilprof-overhead-torch-") as tmp:
        target = _common.start_in_session(
            [options.python, "-c", TARGET, str(ITERATION_WORK)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert target.stdout is not None
            ready = target.stdout.readline().decode().split()
            if ready[:1] != ["ready"]:
                err = target.stderr.read().decode() if target.stderr else ""
                raise BenchmarkError(f"the torch target did not start: {err.strip()[-300:]}")
            time.sleep(options.warmup)
            phases: list[Phase] = []
            for config in order:
                phases.append(run_phase(config, target.pid, options.phase_seconds, Path(tmp)))
                time.sleep(options.settle)
            out, _ = target.communicate(b"stop\n", timeout=60)
        finally:
            _common.stop_session(target)
    record = json.loads(out.decode().strip().splitlines()[-1])
    steps = [TimedStep(t, i, 1e3 * d) for i, (t, d) in enumerate(record["records"])]
    assign_steps(phases, steps)
    baseline = [ms for p in phases if p.config.rate_hz is None for ms in p.host_ms()]
    if len(baseline) < 3:
        raise BenchmarkError(f"only {len(baseline)} unsampled iterations; raise --phase-seconds")
    base_median = quantiles(baseline, [0.5])[0]
    configs = [
        _config_row(c, [p for p in phases if p.config == c], baseline, base_median)
        for c in (UNSAMPLED, *SAMPLED)
    ]
    unsampled_ratios = [
        round(quantiles(p.host_ms(), [0.5])[0] / base_median, 4)
        for p in phases
        if p.config.rate_hz is None and p.steps
    ]
    return {
        "benchmark": "overhead_torch",
        "python": options.python,
        "target_threads": record["threads"],
        "iteration_work": ITERATION_WORK,
        "phase_seconds": options.phase_seconds,
        "rounds": options.rounds,
        "order": [c.key for c in order],
        "machine": _common.machine_info(),
        "load_before": load_before,
        "load_after": _common.load_average(),
        "baseline_median_ms": round(base_median, 3),
        "unsampled_phase_ratios": unsampled_ratios,
        "ratios": {row["key"]: row["ratio"] for row in configs if row["rate_hz"] is not None},
        "configs": configs,
    }


def print_report(result: dict[str, Any]) -> None:
    rows = []
    for r in result["configs"]:
        ci = r["ratio_ci95"]
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        rows.append(
            [
                r["label"],
                str(r["phases"]),
                str(r["iterations"]),
                "-" if r["median_ms"] is None else f"{r['median_ms']:.2f}",
                ratio + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""),
                "-" if r["pyspy_cpu_share"] is None else f"{r['pyspy_cpu_share']:.1%}",
            ]
        )
    notes = [
        f"target: {result['target_threads']} threads (torch.set_num_threads(64)), "
        f"Python {result['python']}; order: {', '.join(result['order'])}",
        "noise floor: each unsampled phase's median / unsampled median: "
        + ", ".join(f"{x:.3f}" for x in result["unsampled_phase_ratios"]),
        f"load average before {result['load_before']}, after {result['load_after']}",
    ]
    for r in result["configs"]:
        notes += [f"{r['key']} phase {i}: {m}" for i, m in enumerate(r["reader_cost"], 1)]
    _common.print_table(
        "gilprof attach overhead on a torch process with 64 OpenMP threads (Python loop time)",
        ["configuration", "phases", "iters", "median ms", "ratio [95% CI]", "py-spy CPU"],
        rows,
        notes=notes,
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--python", default=sys.executable, help="the target's interpreter")
    parser.add_argument("--phase-seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--settle", type=float, default=1.0)
    _common.output_options(parser, quick="one round of 2 s phases: a smoke run")
    options = parser.parse_args(argv)
    if options.quick:
        options.phase_seconds, options.rounds, options.warmup, options.settle = 2.0, 1, 1.0, 0.5
    return options


def main(argv: list[str] | None = None) -> int:
    return _common.run_main(argv, parse_args, run, print_report)


if __name__ == "__main__":
    sys.exit(main())
