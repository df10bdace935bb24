"""Run-to-run spread of contention-mode shares on two spinners: the margin the short tests use.

    python benchmarks/accuracy/spread.py                     # 12 runs of 4 s at 100 Hz
    python benchmarks/accuracy/spread.py --runs 20 --seconds 6 --rate 200 --hogs 2

Each run samples the `spin2` workload once (as tests/integration/test_accuracy_short.py does)
and prints each spinner's held share against the middle of its truth band. The summary is the
mean and standard deviation of those deviations, next to the binomial standard error at the
ticks counted: a mean away from 0 is a bias, a deviation above the binomial error is the
extra spread of pausing the target at every tick (docs/accuracy.md, "tick by tick").
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import accuracy_compare  # noqa: E402
from accuracy_sample import Config  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--hogs", type=int, default=0)
    options = parser.parse_args(argv)
    deviations: list[float] = []
    ticks: list[float] = []
    for run in range(options.runs):
        config = Config("spin2", "contention", options.rate, options.seconds, hogs=options.hogs)
        with tempfile.TemporaryDirectory(prefix="gilprof-spread-") as workdir:
            outcome = accuracy_compare.measure(
                config, sys.executable, Path(workdir), baseline_s=0.2
            )
        rows = {(r.subject, r.metric): r for r in outcome.rows}
        parts = []
        for name in ("spin-0", "spin-1"):
            held = rows[(name, "held")]
            middle = (held.truth_lo + held.truth_hi) / 2
            deviations.append(held.measured - middle)
            parts.append(
                f"{name} held {100 * held.measured:.1f} vs {100 * held.truth_lo:.1f}-"
                f"{100 * held.truth_hi:.1f}"
            )
        ticks.append(outcome.ticks)
        print(f"run {run}: {outcome.ticks:.0f} ticks  " + "  ".join(parts), flush=True)
    binomial = math.sqrt(0.25 / statistics.fmean(ticks))
    print(
        f"held share minus the middle of its band, {len(deviations)} readings: mean "
        f"{100 * statistics.fmean(deviations):+.1f} points, SD "
        f"{100 * statistics.stdev(deviations):.1f}, worst {100 * max(map(abs, deviations)):.1f}; "
        f"binomial SE at 50% {100 * binomial:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
