"""Cross-check of the two samplers: py-spy and austin sample one workload in wall mode.

    python benchmarks/backend_crosscheck.py                      # 20 s each, concurrently
    python benchmarks/backend_crosscheck.py --sequential         # py-spy 20 s, then austin 20 s
    python benchmarks/backend_crosscheck.py --seconds 4 --json   # what the integration test runs

The target is tests/integration/workloads/gil_workload.py (threads `executor-loop` and
`ingress` taking turns through a lock). Both backends run through `gilprof.sampling` as
`gilprof attach --mode wall` does; each profile goes through `gilprof.analysis.attribution` with
per-thread keys. A row is one (thread, function, file): the fraction of ticks at which that
thread had the function on its stack, per backend, and austin minus py-spy in points.
Threads are matched by OS thread id, which both samplers report, and named from py-spy.

By default both samplers run at the same time on the same seconds of the workload, so a
difference is the samplers' own (sampling noise, bias), not the workload's drift from one
interval to the next; `--sequential` shows that drift too. FOCUS lists the functions that
tell the threads' behaviour apart; `max_abs_diff_focus` is the largest difference among them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from typing import Any

import _common

_common.ensure_gilprof_importable()

from gilprof.analysis.attribution import attribute, thread_label  # noqa: E402
from gilprof.errors import GilprofError  # noqa: E402
from gilprof.model import Mode, Target  # noqa: E402
from gilprof.profile import Profile  # noqa: E402
from gilprof.sampling.backends import SamplerSettings, get_backend  # noqa: E402
from gilprof.sampling.processes import die_with_parent  # noqa: E402
from gilprof.sampling.session import SessionOptions, run_session  # noqa: E402

WORKLOAD = _common.REPO_ROOT / "tests" / "integration" / "workloads" / "gil_workload.py"
BACKENDS = ("py-spy", "austin")
FOCUS = (
    "executor_loop",
    "safe_broadcast",
    "_balance_requests_across_ranks",
    "ingress",
    "ingress_work",
)
WORK_SIZES = {"broadcast": 40_000, "route": 15_000, "ingress": 20_000}  # the workload's defaults
WARMUP_S = 0.8  # the workload's threads are running by then
RowKey = tuple[int, str, str]  # tid, function, file


def sample(name: str, pid: int, args: argparse.Namespace) -> Profile:
    backend = get_backend(name)
    options = SessionOptions(
        settings=SamplerSettings(mode=Mode.WALL, rate_hz=args.rate),
        duration=args.seconds,
        window_s=args.window,
    )
    return run_session(Target(pid=pid), backend, options, threading.Event())


def shares(profile: Profile) -> dict[RowKey, float]:
    tids = {thread_label(profile, s.tid): s.tid for s in profile.stacks}
    result = attribute(profile, by_thread=True, watch=())
    return {
        (tids[f.key.thread or ""], f.key.name, f.key.file): f.total_share
        for f in result.functions
        if f.key.thread in tids
    }


def run_profiles(args: argparse.Namespace) -> dict[str, Profile]:
    runs = 1 if not args.sequential else len(BACKENDS)
    duration = WARMUP_S + runs * (args.seconds + 3.0) + 5.0
    sizes = [f"--{name}-work={round(size * args.scale)}" for name, size in WORK_SIZES.items()]
    target = subprocess.Popen(
        [args.python, str(WORKLOAD), "--duration", f"{duration:.1f}", *sizes],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        preexec_fn=die_with_parent,
    )
    profiles: dict[str, Profile] = {}
    failures: list[BaseException] = []
    try:
        time.sleep(WARMUP_S)

        def work(name: str) -> None:
            try:
                profiles[name] = sample(name, target.pid, args)
            except (GilprofError, OSError) as exc:
                failures.append(exc)

        if args.sequential:
            for name in BACKENDS:
                work(name)
        else:
            threads = [
                threading.Thread(target=work, args=(n,), name=f"crosscheck-{n}") for n in BACKENDS
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        target.kill()
        target.wait()
    if failures:
        raise _common.BenchmarkError(str(failures[0]))
    return profiles


def compare(profiles: dict[str, Profile], min_share: float) -> dict[str, Any]:
    per_backend = {name: shares(p) for name, p in profiles.items()}
    pyspy, austin = per_backend["py-spy"], per_backend["austin"]
    names = {tid: name for tid, name in profiles["py-spy"].threads.items() if name}
    rows: list[dict[str, Any]] = []
    for key in sorted(set(pyspy) | set(austin)):
        a, p = austin.get(key, 0.0), pyspy.get(key, 0.0)
        if max(a, p) < min_share and key[1] not in FOCUS:
            continue
        tid, function, file = key
        rows.append(
            {
                "thread": names.get(tid, f"tid {tid}"),
                "tid": tid,
                "function": function,
                "file": file,
                "py-spy": round(100 * p, 2),
                "austin": round(100 * a, 2),
                "diff": round(100 * (a - p), 2),
                "focus": function in FOCUS,
                "in_both": key in pyspy and key in austin,
            }
        )
    focus_rows = [r for r in rows if r["focus"]]
    return {
        "backends": {name: _sampling(p) for name, p in profiles.items()},
        "rows": rows,
        "max_abs_diff": max((abs(r["diff"]) for r in rows), default=0.0),
        "max_abs_diff_focus": max((abs(r["diff"]) for r in focus_rows), default=0.0),
        "focus_found": sorted({r["function"] for r in focus_rows if r["in_both"]}),
        "only_in_one": [
            f"{r['thread']}: {r['function']} ({r['file']})" for r in rows if not r["in_both"]
        ],
    }


def _sampling(profile: Profile) -> dict[str, Any]:
    """Per backend; `thread_coverage` is a thread's samples per tick (1.0: seen at every tick)."""
    s = profile.sampling
    per_thread: dict[int, int] = {}
    for sample in profile.samples():
        per_thread[sample.tid] = per_thread.get(sample.tid, 0) + sample.count
    return {
        "version": s.sampler_version,
        "windows": len(profile.windows),
        "duration_s": round(s.duration_s, 3),
        "ticks": s.ticks,
        "ticks_source": s.ticks_source,
        "effective_rate_hz": round(s.ticks / s.duration_s, 1) if s.duration_s else 0.0,
        "samples": s.samples,
        "errors": s.errors,
        "partial": s.partial,
        "thread_coverage": {
            str(tid): round(n / s.ticks, 4) if s.ticks else 0.0
            for tid, n in sorted(per_thread.items())
        },
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="sampling seconds per backend")
    parser.add_argument("--rate", type=float, default=100.0, help="samples per second")
    parser.add_argument("--window", type=float, default=2.0, help="seconds per sampling window")
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiply the workload's work sizes (longer phases per loop)",
    )
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="py-spy first, then austin (default: both at once)",
    )
    parser.add_argument("--python", default=sys.executable, help="interpreter of the workload")
    parser.add_argument(
        "--min-share",
        type=float,
        default=1.0,
        help="list functions with at least this share (%%) in either backend",
    )
    _common.output_options(parser)
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    profiles = run_profiles(args)
    return {
        "machine": _common.machine_info(),
        "config": {
            "seconds": args.seconds,
            "rate_hz": args.rate,
            "window_s": args.window,
            "mode": "wall",
            "scale": args.scale,
            "schedule": "sequential" if args.sequential else "concurrent",
            "python": args.python,
        },
        **compare(profiles, args.min_share / 100),
        "wall_s": round(time.monotonic() - started, 1),
    }


def print_report(result: dict[str, Any]) -> None:
    backends = result["backends"]
    notes = [
        f"{name}: {b['version']}, {b['ticks']:.0f} ticks ({b['ticks_source']}) over "
        f"{b['duration_s']:.1f} s = {b['effective_rate_hz']} Hz, {b['errors']} errors"
        for name, b in backends.items()
    ]
    notes.append(
        f"max |diff| over focus functions: {result['max_abs_diff_focus']:.2f} points; "
        f"over all rows: {result['max_abs_diff']:.2f}"
    )
    notes += [f"only in one backend: {item}" for item in result["only_in_one"]]
    config = result["config"]
    _common.print_table(
        f"wall-mode shares, {config['schedule']}, {config['seconds']:g} s at {config['rate_hz']:g} Hz",
        ["thread / function", "py-spy %", "austin %", "diff (points)"],
        [
            [
                f"{'* ' if r['focus'] else ''}{r['thread']}: {r['function']}",
                f"{r['py-spy']:.1f}",
                f"{r['austin']:.1f}",
                f"{r['diff']:+.1f}",
            ]
            for r in result["rows"]
        ],
        notes,
    )


def main(argv: list[str] | None = None) -> int:
    return _common.run_main(argv, parse_args, run, print_report)


if __name__ == "__main__":
    sys.exit(main())
