"""Accuracy of gilprof's held and wait shares against ground truth measured inside the target.

    python benchmarks/accuracy/run.py              # 100 Hz x 20 s per workload + sweeps, ~10 min
    python benchmarks/accuracy/run.py --quick      # 3 s runs, ~3 min
    python benchmarks/accuracy/run.py --quick --no-sweeps --scenario both   # quiet + loaded
    python benchmarks/accuracy/run.py --hogs 2 --only burst --only planted  # loaded only
    python benchmarks/accuracy/run.py --json       # the same, as JSON
    python benchmarks/accuracy/run.py --no-realtime --only burst   # sampler not at SCHED_FIFO
    python benchmarks/accuracy/run.py --python /root/.pyenv/versions/3.13.0/bin/python3
    python benchmarks/accuracy/run.py --mode states --scenario both --hogs 2 --no-sweeps

States mode (`--mode states`, root) is compared with the exact truth from uprobes on the
target's take_gil/drop_gil and the scheduler's tracepoints (benchmarks/uprobe_truth.py)
rather than with the target's own timestamps; see README.md.

Each measurement starts one target (`workloads.py NAME`), lets it run unsampled, runs
`python -m gilprof attach --pid P -d S -r R --mode gil|contention -q -o F`, lets the target
run unsampled again, then stops it and reads what it recorded. The loaded scenario runs
`--hogs N` CPU-bound processes (default: one per core), each in a session of its own like
another user's job, beside the target for the whole measurement. Truth is computed over the
lifetimes of the `py-spy record` processes (polled every 20 ms), and compared with
`python -m gilprof report F --format json [--contention]`. Truth is a band [lo, hi]: GIL
hand-offs are counted as held by nobody (lo) or by the threads on either side (hi); the error
is the distance from gilprof's figure to the band (0 inside it). The target's speed while
sampled over its speed unsampled (iterations per second of its compute loops) is the
sampler's pause overhead. The 1-minute load average is printed with every result: above
the core count, the machine is oversubscribed and truths based on CPU time are wrong (see
workloads.py), which is why the truths here are built from timestamps.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import _common  # noqa: E402

_common.ensure_gilprof_importable()

import workloads  # noqa: E402
from accuracy_compare import (  # noqa: E402
    SWEPT,
    TARGETS,
    Outcome,
    Row,
    measure,
    schedule,
    summary,
    sweep_rows,
)
from accuracy_sample import Config  # noqa: E402
from accuracy_tables import print_report  # noqa: E402

# What tests/integration/test_accuracy_short.py and test_absolute_shares.py use of this module.
__all__ = ["TARGETS", "Config", "Outcome", "Row", "main", "measure", "run"]


def run(options: argparse.Namespace) -> dict[str, Any]:
    hog_count = options.hogs if options.hogs is not None else os.cpu_count() or 2
    loads = {"quiet": (0,), "loaded": (hog_count,), "both": (0, hog_count)}[options.scenario]
    if options.hogs is not None and options.scenario == "quiet":
        loads = (options.hogs,)
    modes = tuple(options.mode) if options.mode else ("gil", "contention")
    main, by_duration, by_rate = schedule(
        options.quick,
        options.only,
        not options.no_sweeps,
        loads,
        modes,
        options.seconds,
        not options.no_realtime,
    )
    outcomes: dict[Config, list[Outcome]] = {}
    machine = _common.machine_info()
    with tempfile.TemporaryDirectory(prefix="gilprof-accuracy-") as tmp:
        todo = [*main, *by_duration, *[c for c in by_rate if c not in main]]
        for index, config in enumerate(todo, 1):
            if not options.json:
                print(
                    f"[{index}/{len(todo)}] {config.scenario} {config.workload} {config.mode} "
                    f"{config.rate} Hz {config.seconds:g} s (load {os.getloadavg()[0]:.1f})",
                    file=sys.stderr,
                )
            outcomes.setdefault(config, []).append(
                measure(config, options.python, Path(tmp), -20 if options.boost else None)
            )
    main_out = [outcomes[c][0] for c in main]
    with_main = [o for c in main if (c.workload, c.mode) in SWEPT for o in outcomes[c]]
    duration_out = with_main + [o for c in dict.fromkeys(by_duration) for o in outcomes[c]]
    rate_out = with_main + [o for c in by_rate for o in outcomes[c]]

    def as_dict(o: Outcome) -> dict[str, Any]:
        d = asdict(o)
        for row, r in zip(d["rows"], o.rows, strict=True):
            row["error"] = r.error
        return d

    return {
        "machine": machine,
        "boost": options.boost,
        "target_python": main_out[0].python if main_out else "",
        "load_average_end": _common.load_average(),
        "main": [as_dict(o) for o in main_out],
        "summary": summary(main_out),
        "sweeps": {
            "seconds": sweep_rows(duration_out, "seconds"),
            "rate": sweep_rows(rate_out, "rate"),
        },
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Accuracy of gilprof's GIL held and wait shares against in-target ground truth.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    _common.output_options(
        parser, quick="3 s runs and short sweeps", json_help="print JSON instead of tables"
    )
    parser.add_argument("--python", default=sys.executable, help="interpreter of the targets")
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(workloads.WORKLOADS),
        help="run only this workload (repeatable)",
    )
    parser.add_argument(
        "--boost",
        action="store_true",
        help="run targets at autogroup nice -20 (root): a loaded machine then "
        "preempts them rarely, which sharpens the truth band",
    )
    parser.add_argument(
        "--no-sweeps", action="store_true", help="skip the duration and rate sweeps"
    )
    parser.add_argument(
        "--scenario",
        choices=("quiet", "loaded", "both"),
        default="quiet",
        help="quiet: the target alone; loaded: with --hogs CPU hogs beside it",
    )
    parser.add_argument(
        "--hogs",
        type=int,
        default=None,
        help="CPU-bound processes beside the target in the loaded scenario "
        "(default: one per core); alone, runs only that scenario",
    )
    parser.add_argument(
        "--mode",
        action="append",
        choices=("gil", "contention", "states"),
        help="run only this mode (repeatable)",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="sampled seconds per run (default 20, --quick 3)",
    )
    parser.add_argument(
        "--no-realtime",
        action="store_true",
        help="run gilprof without CAP_SYS_NICE (setpriv), so that its sampler falls back to "
        "normal priority as for a non-root user: what the profile's warning is measured on",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return _common.run_main(argv, parse_args, run, print_report)


if __name__ == "__main__":
    raise SystemExit(main())
