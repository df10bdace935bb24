"""Size and render time of the pictures (html, svg, perfetto, compare html) for a 10-minute capture.

    python benchmarks/pictures_speed.py                 # 10 minutes, gil and contention mode
    python benchmarks/pictures_speed.py --minutes 1 --json

gil mode: report_speed's generator (synthetic_profile.py: 5 threads, Zipf-popular stacks
10-40 frames deep) at 100 Hz x 85% utilization, 2 s windows. contention mode: the same
threads and frames, every thread sampled at every tick, as per-tick spans (runs of one stack,
exponential lengths with a 30 ms mean) in the states held/waiting/native/idle; that is what
makes the page big.
"""

from __future__ import annotations

import argparse
import random
from typing import Any

import _common

_common.ensure_gilprof_importable()

from synthetic_profile import THREADS, WINDOW_S, build_profile  # noqa: E402

from gilprof.analysis.attribution import attribute  # noqa: E402
from gilprof.analysis.compare import compare_profiles  # noqa: E402
from gilprof.model import Mode, Sample, SamplingInfo, Target, ThreadState  # noqa: E402
from gilprof.profile import Profile  # noqa: E402
from gilprof.renderers import render  # noqa: E402
from gilprof.renderers.compare import CompareView  # noqa: E402
from gilprof.renderers.report import ReportData  # noqa: E402

RATE = 100.0
STATE_WEIGHTS = (
    (ThreadState.HELD, 0.3),
    (ThreadState.WAITING, 0.25),
    (ThreadState.NATIVE, 0.15),
    (ThreadState.IDLE, 0.3),
)


def contention_profile(gil: Profile, minutes: float, seed: int = 1) -> Profile:
    rng = random.Random(seed)
    profile = Profile(
        Target(pid=4243, rank=0, hostname="bench"),
        SamplingInfo("synthetic", "0", Mode.CONTENTION, RATE, window_s=WINDOW_S),
    )
    by_thread: dict[int, list[tuple[Any, ...]]] = {}
    for index in range(len(gil.stacks)):
        by_thread.setdefault(gil.stacks[index].tid, []).append(gil.stack_frames(index))
    states = [state for state, _ in STATE_WEIGHTS]
    weights = [weight for _, weight in STATE_WEIGHTS]
    windows = int(minutes * 60 / WINDOW_S)
    for w in range(windows):
        t0 = w * WINDOW_S
        samples: list[Sample] = []
        spans: list[tuple[Sample, float, float]] = []
        for name, tid, _ in THREADS:
            pool = by_thread[tid][:300]
            t = 0.0
            while t < WINDOW_S - 1e-9:
                ticks = max(1, round(rng.expovariate(1 / 0.03) * RATE))
                end = min(WINDOW_S, t + ticks / RATE)
                state = rng.choices(states, weights)[0]
                sample = Sample(tid, name, rng.choice(pool), max(1, round((end - t) * RATE)), state)
                samples.append(sample)
                spans.append((sample, t, end))
                t = end
        profile.add_window(t0, t0 + WINDOW_S, WINDOW_S * RATE, samples, spans)
    profile.finish()
    return profile


def _timed(label: str, func: Any, results: dict[str, Any]) -> None:
    out, seconds = _common.timed(func)
    size = len(out.encode() if isinstance(out, str) else out)
    results[label] = {"seconds": round(seconds, 2), "bytes": size}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--stacks", type=int, default=5000)
    _common.output_options(parser, json_help="print JSON instead of one line per picture")
    args = parser.parse_args()
    windows = int(args.minutes * 60 / WINDOW_S)
    samples = int(args.minutes * 60 * RATE * 0.85)
    gil = build_profile(samples, args.stacks, windows)
    gil2 = build_profile(samples, args.stacks, windows, seed=7)
    cont = contention_profile(gil, args.minutes)
    results: dict[str, Any] = {
        "minutes": args.minutes,
        "stacks": args.stacks,
        "gil_samples": gil.sampling.samples,
        "contention_samples": cont.sampling.samples,
        "contention_spans": sum(len(w.spans) for w in cont.windows),
    }
    for label, p in (("gil", gil), ("contention", cont)):
        data = ReportData(p, attribute(p))
        for fmt in ("html", "svg", "perfetto"):
            _timed(f"{label} report {fmt}", lambda d=data, f=fmt: render("report", f, d), results)
    comparison = compare_profiles(gil, gil2)
    _timed(
        "gil compare html",
        lambda: render("compare", "html", CompareView(comparison, profiles=(gil, gil2))),
        results,
    )
    if args.json:
        _common.print_json(results)
    else:
        for key, value in results.items():
            if isinstance(value, dict):
                print(f"{key:28s} {value['bytes'] / 1e6:7.2f} MB  {value['seconds']:6.2f} s")
            else:
                print(f"{key:28s} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
