"""Speed and memory of `gilprof report` on a large synthetic profile.

    python benchmarks/report_speed.py                       # 1e6 samples, 1e4 stacks, 300 windows
    python benchmarks/report_speed.py --scale 10 --scale 100 --json
    python benchmarks/report_speed.py --quick --json        # a smoke run, a few seconds
    python benchmarks/report_speed.py --target              # issue 15: 5e6 samples, 5e4 stacks,
                                                            # 300 windows; 4 ranks side by side
    python benchmarks/report_speed.py --schemas gil.json contention.json   # v1 vs v2 on captures

The profile is built with the Profile API, no sampler involved: 5 threads, stacks 10-40
frames deep that share prefixes as real call trees do, stack popularity Zipf-distributed
(s = 1.1), and per window each stack's count is its expected count rounded up or down at
random, so building costs the same for 1e6 or 1e8 samples. Each profile is saved in both
schemas (gilprof.profile/1, one JSON document; gilprof.profile/2, the gzip stream a capture
writes), each file's size, save and load time recorded; the rest reads the /2 file:

- in-process: `Profile.load`, `attribute`, and the json and table renderers through
  `gilprof.renderers.render`, each timed; peak memory of the same steps under tracemalloc
  (a second pass, since tracing slows Python down);
- end to end: `python -m gilprof report FILE --format json` as a subprocess, wall time and
  peak RSS (`getrusage(RUSAGE_CHILDREN).ru_maxrss` in a small runner process that starts it).

With `--ranks N` (N > 1), N copies of the first profile (as ranks 0..N-1) go through
`gilprof report FILE1 .. FILEN --format json` side by side: wall time and peak RSS.

The scaled profiles (`--scale K`: K times the samples, same stacks and windows) show what
memory grows with: the non-zero (window, stack) cells, which are bounded by
windows x stacks however many samples there are.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import _common
from _common import BenchmarkError

_common.ensure_gilprof_importable()

from gilprof.analysis.attribution import attribute  # noqa: E402
from gilprof.model import Frame, Mode, SamplingInfo, Target, ThreadState  # noqa: E402
from gilprof.profile import Profile, Window  # noqa: E402
from gilprof.renderers import render  # noqa: E402

WINDOW_S = 2.0
GIL_UTILIZATION = 0.85  # ticks are set so that this share of them had a GIL holder
ZIPF_S = 1.1
# (name, tid, weight): tids look like py-spy's pthread ids.
THREADS = (
    ("executor-loop", 139_872_412_001_856, 0.45),
    ("ingress", 139_872_403_609_152, 0.25),
    ("MainThread", 139_872_621_377_344, 0.1),
    ("await-response", 139_872_395_216_448, 0.1),
    ("client", 139_872_386_823_744, 0.1),
)
SITE = "/opt/venv/lib/python3.11/site-packages"


def _frame_pool(rng: random.Random, stacks: int) -> list[Frame]:
    modules = max(10, stacks // 50)
    functions = max(50, stacks // 5)
    pool: list[Frame] = []
    for k in range(functions):
        module = rng.randrange(modules)
        path = f"{SITE}/pkg{module % 12}/mod{module}.py"
        name = f"Class{k % 97}.method_{k}" if k % 3 else f"function_{k}"
        first = rng.randrange(10, 2000)
        pool.extend(Frame(name, path, first + 7 * i) for i in range(rng.randint(1, 3)))
    return pool


def _root(thread: str) -> list[Frame]:
    lib = "/usr/lib/python3.11/threading.py"
    if thread == "MainThread":
        return [Frame("<module>", "/app/server.py", 690), Frame("main", "/app/server.py", 672)]
    return [
        Frame("Thread._bootstrap", lib, 995),
        Frame("Thread._bootstrap_inner", lib, 1038),
        Frame("Thread.run", lib, 975),
        Frame(f"{thread}.run", "/app/server.py", 400),
    ]


def build_profile(samples: int, stacks: int, windows: int, seed: int = 0) -> Profile:
    rng = random.Random(seed)
    pool = _frame_pool(rng, stacks)
    rate = samples / (windows * WINDOW_S * GIL_UTILIZATION)
    profile = Profile(
        Target(pid=4242, rank=0, rank_source="PMI_RANK", hostname="bench", python="3.11.7"),
        SamplingInfo(
            sampler="synthetic", sampler_version="0", mode=Mode.GIL, rate_hz=rate, window_s=WINDOW_S
        ),
    )
    known: dict[int, list[list[Frame]]] = {tid: [] for _, tid, _ in THREADS}
    roots = {tid: _root(name) for name, tid, _ in THREADS}
    for name, tid, _ in THREADS:
        profile.threads[tid] = name
    weights = [w for _, _, w in THREADS]
    while len(profile.stacks) < stacks:
        tid = rng.choices([t for _, t, _ in THREADS], weights)[0]
        root, seen = roots[tid], known[tid]
        prefix = root
        if seen and rng.random() < 0.8:
            base = rng.choice(seen)
            prefix = base[: rng.randint(len(root), len(base) - 1)]
        depth = max(rng.randint(10, 40), len(prefix) + 1)
        frames = prefix + [rng.choice(pool) for _ in range(depth - len(prefix))]
        before = len(profile.stacks)
        profile.intern_stack(tid, ThreadState.HELD, frames)
        if len(profile.stacks) > before:
            seen.append(frames)
    order = list(range(stacks))
    rng.shuffle(order)
    zipf = [1.0 / (rank + 1) ** ZIPF_S for rank in range(stacks)]
    total = sum(zipf)
    per_window = samples / windows
    expected = [0.0] * stacks
    for rank, index in enumerate(order):
        expected[index] = per_window * zipf[rank] / total
    draw = rng.random
    for w in range(windows):
        counts = {}
        for index, mean in enumerate(expected):
            count = int(mean + draw())
            if count:
                counts[index] = count
        profile.windows.append(Window(w * WINDOW_S, (w + 1) * WINDOW_S, WINDOW_S * rate, counts))
    profile.finish()
    return profile


def _timed(func: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = func()
    return value, time.perf_counter() - started


def report_in_process(path: Path) -> dict[str, Any]:
    from gilprof.renderers import formats
    from gilprof.renderers.report import ReportData

    formats("report")  # imports the renderer modules (rich) outside the timed part

    cpu_started = time.process_time()
    profile, load_s = _timed(lambda: Profile.load(path))
    result, attribute_s = _timed(lambda: attribute(profile))
    data = ReportData(profile, result)
    text, json_s = _timed(lambda: render("report", "json", data))
    cpu_s = time.process_time() - cpu_started
    table, table_s = _timed(lambda: render("report", "table", data, width=120))
    return {
        "load_s": load_s,
        "attribute_s": attribute_s,
        "render_json_s": json_s,
        "render_table_s": table_s,
        "total_json_cpu_s": cpu_s,
        "json_bytes": len(text),
        "table_lines": table.count("\n"),
        "functions": len(result.functions),
        "samples": result.samples,
    }


def peak_in_process(path: Path) -> int:
    from gilprof.renderers.report import ReportData

    gc.collect()
    tracemalloc.start()
    try:
        profile = Profile.load(path)
        result = attribute(profile)
        data = ReportData(profile, result)
        render("report", "json", data)
        render("report", "table", data, width=120)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# Runs one command and prints its exit code, wall seconds, CPU seconds and peak RSS in KiB. It is
# started from this small process, not from the benchmark: a child forked from a big parent
# inherits the parent's resident pages into its ru_maxrss, even across exec.
_RUNNER = """
import resource, subprocess, sys, time
with open(sys.argv[1], "wb") as out:
    started = time.perf_counter()
    code = subprocess.call(sys.argv[2:], stdout=out)
    wall = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(code, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)
"""


def report_subprocess(args: list[str], output: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and peak RSS in bytes of `python -m gilprof ARGS`."""
    command = [sys.executable, "-c", _RUNNER, str(output), sys.executable, "-m", "gilprof", *args]
    done = subprocess.run(
        command, capture_output=True, text=True, env=_common.child_env(), timeout=3600
    )
    fields = done.stdout.split()
    if done.returncode != 0 or len(fields) != 4 or fields[0] != "0":
        raise BenchmarkError(
            f"gilprof {' '.join(args)} failed: "
            f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}"
        )
    rss_kib = int(fields[3])
    # ru_maxrss is in KiB on Linux and in bytes on macOS.
    return (
        float(fields[1]),
        float(fields[2]),
        rss_kib if sys.platform == "darwin" else rss_kib * 1024,
    )


def build_and_save(
    samples: int, stacks: int, windows: int, path: Path, seed: int, ranks: int = 1
) -> dict[str, Any]:
    """Builds and saves one profile (v2 at `path`, v1 beside it, and `ranks - 1` more copies
    as other ranks); returns its shape. The profile is dropped on return."""
    profile, build_s = _timed(lambda: build_profile(samples, stacks, windows, seed))
    v1 = path.with_suffix(".v1.json")
    started = time.perf_counter()
    profile.save(path, version=2)
    save_s = time.perf_counter() - started
    profile.save(v1, version=1)
    save_v1_s = time.perf_counter() - started - save_s
    for rank in range(1, ranks):
        profile.target = replace(profile.target, pid=4242 + rank, rank=rank)
        profile.save(_rank_path(path, rank), version=2)
    shape = {
        "samples": profile.sampling.samples,
        "stacks": len(profile.stacks),
        "frames": len(profile.frames),
        "threads": len(profile.threads),
        "windows": windows,
        "cells": sum(len(w.counts) for w in profile.windows),
        "mean_depth": round(sum(len(s.frames) for s in profile.stacks) / len(profile.stacks), 1),
        "file_bytes": path.stat().st_size,
        "build_s": round(build_s, 3),
        "save_s": round(save_s, 3),
    }
    del profile
    gc.collect()
    _, load_s = _timed(lambda: Profile.load(path))
    _, load_v1_s = _timed(lambda: Profile.load(v1))
    shape["schemas"] = {
        "v1": {
            "file_bytes": v1.stat().st_size,
            "save_s": round(save_v1_s, 3),
            "load_s": round(load_v1_s, 3),
        },
        "v2": {
            "file_bytes": shape["file_bytes"],
            "save_s": shape["save_s"],
            "load_s": round(load_s, 3),
        },
    }
    v1.unlink()
    return shape


def _rank_path(path: Path, rank: int) -> Path:
    return path if rank == 0 else path.with_name(f"{path.stem}-rank{rank}{path.suffix}")


def measure(
    samples: int, stacks: int, windows: int, workdir: Path, seed: int, ranks: int = 1
) -> dict[str, Any]:
    path = workdir / f"profile-{samples}.json"
    shape = build_and_save(samples, stacks, windows, path, seed, ranks)
    gc.collect()
    timings = report_in_process(path)
    if timings.pop("samples") != shape["samples"]:
        raise BenchmarkError("the loaded profile's sample count differs from the built one")
    in_process_s = timings["load_s"] + timings["attribute_s"] + timings["render_json_s"]
    in_process = {
        key: round(value, 4) if isinstance(value, float) else value
        for key, value in timings.items()
    }
    in_process["total_json_s"] = round(in_process_s, 4)
    in_process["samples_per_s"] = round(shape["samples"] / in_process_s)
    in_process["samples_per_cpu_s"] = round(
        shape["samples"] / max(timings["total_json_cpu_s"], 1e-9)
    )
    in_process["peak_bytes"] = peak_in_process(path)
    output = workdir / "report.json"
    wall, cpu, rss = report_subprocess(["report", str(path), "--format", "json"], output)
    reported = json.loads(output.read_text())["sampling"]["samples"]
    if reported != shape["samples"]:
        raise BenchmarkError(
            f"`gilprof report` reported {reported} samples, expected {shape['samples']}"
        )
    side_by_side = None
    if ranks > 1:
        paths = [str(_rank_path(path, r)) for r in range(ranks)]
        many_wall, many_cpu, many_rss = report_subprocess(
            ["report", *paths, "--format", "json"], output
        )
        side_by_side = {
            "ranks": ranks,
            "wall_s": round(many_wall, 3),
            "cpu_s": round(many_cpu, 3),
            "max_rss_bytes": many_rss,
        }
        for extra in paths[1:]:
            Path(extra).unlink()
    path.unlink()
    return {
        **shape,
        "in_process": in_process,
        "subprocess": {
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3),
            "samples_per_s": round(shape["samples"] / wall),
            "samples_per_cpu_s": round(shape["samples"] / max(cpu, 1e-9)),
            "max_rss_bytes": rss,
        },
        "side_by_side": side_by_side,
    }


def run(options: argparse.Namespace) -> dict[str, Any]:
    load_before = _common.load_average()
    with tempfile.TemporaryDirectory(prefix="gilprof-report-speed-") as tmp:
        workdir = Path(tmp)
        baseline_wall, baseline_cpu, baseline_rss = report_subprocess(
            ["report", "--help"], workdir / "help.txt"
        )
        profiles = [
            measure(
                options.samples * factor,
                options.stacks,
                options.windows,
                workdir,
                options.seed,
                options.ranks if factor == 1 else 1,
            )
            for factor in (1, *options.scale)
        ]
    base = profiles[0]
    scaling = []
    for row in profiles[1:]:
        scaling.append(
            {
                "samples_ratio": round(row["samples"] / base["samples"], 2),
                "cells_ratio": round(row["cells"] / base["cells"], 2),
                "file_ratio": round(row["file_bytes"] / base["file_bytes"], 2),
                "in_process_peak_ratio": round(
                    row["in_process"]["peak_bytes"] / base["in_process"]["peak_bytes"], 2
                ),
                "subprocess_rss_ratio": round(
                    row["subprocess"]["max_rss_bytes"] / base["subprocess"]["max_rss_bytes"], 2
                ),
                "subprocess_rss_above_startup_ratio": round(
                    max(1, row["subprocess"]["max_rss_bytes"] - baseline_rss)
                    / max(1, base["subprocess"]["max_rss_bytes"] - baseline_rss),
                    2,
                ),
            }
        )
    return {
        "benchmark": "report_speed",
        "settings": {
            "samples": options.samples,
            "stacks": options.stacks,
            "windows": options.windows,
            "scale": list(options.scale),
            "seed": options.seed,
            "ranks": options.ranks,
        },
        "machine": _common.machine_info(),
        "load_before": load_before,
        "load_after": _common.load_average(),
        "startup": {
            "wall_s": round(baseline_wall, 3),
            "cpu_s": round(baseline_cpu, 3),
            "max_rss_bytes": baseline_rss,
            "command": "python -m gilprof report --help",
        },
        "profiles": profiles,
        "memory_scaling": scaling,
    }


def print_report(result: dict[str, Any]) -> None:
    mb = _common.megabytes
    rows = []
    for p in result["profiles"]:
        ip, sp = p["in_process"], p["subprocess"]
        rows.append(
            [
                f"{p['samples']:,}",
                f"{p['stacks']:,}",
                f"{p['cells']:,}",
                mb(p["file_bytes"]),
                f"{ip['load_s']:.2f}",
                f"{ip['attribute_s']:.2f}",
                f"{ip['render_json_s']:.2f}",
                f"{ip['render_table_s']:.2f}",
                f"{ip['samples_per_s']:,}",
                mb(ip["peak_bytes"]),
                f"{sp['wall_s']:.2f}",
                f"{sp['cpu_s']:.2f}",
                f"{sp['samples_per_s']:,}",
                mb(sp["max_rss_bytes"]),
            ]
        )
    notes = [
        f"cells: non-zero (window, stack) counts over {result['settings']['windows']} windows; "
        "s columns are seconds",
        "in-process samples/s = samples / wall seconds of load + attribute + json; "
        "peak = tracemalloc over load, attribute, json and table",
        "e2e: wall and CPU seconds, samples / wall second and peak RSS of the subprocess",
        f"subprocess: python -m gilprof report FILE --format json; its start-up alone "
        f"(report --help) takes {result['startup']['wall_s']:.2f} s wall, "
        f"{result['startup']['cpu_s']:.2f} s CPU and "
        f"{mb(result['startup']['max_rss_bytes'])} RSS",
    ]
    for p in result["profiles"]:
        v1, v2 = p["schemas"]["v1"], p["schemas"]["v2"]
        notes.append(
            f"{p['samples']:,} samples: file v1 {mb(v1['file_bytes'])} / v2 "
            f"{mb(v2['file_bytes'])}; save v1 {v1['save_s']:.2f} s / v2 {v2['save_s']:.2f} s; "
            f"load v1 {v1['load_s']:.2f} s / v2 {v2['load_s']:.2f} s"
        )
        many = p.get("side_by_side")
        if many:
            notes.append(
                f"{many['ranks']} such ranks side by side (report FILE x{many['ranks']}): "
                f"{many['wall_s']:.2f} s wall, {many['cpu_s']:.2f} s CPU, "
                f"{mb(many['max_rss_bytes'])} peak RSS"
            )
    for s in result["memory_scaling"]:
        notes.append(
            f"x{s['samples_ratio']:g} samples: x{s['cells_ratio']:g} cells, "
            f"x{s['in_process_peak_ratio']:g} in-process peak, x{s['subprocess_rss_ratio']:g} "
            f"subprocess RSS (x{s['subprocess_rss_above_startup_ratio']:g} above start-up)"
        )
    notes.append(
        f"{result['machine']['cpus']} CPUs; load average before {result['load_before']}, "
        f"after {result['load_after']}"
    )
    _common.print_table(
        "gilprof report on synthetic profiles",
        [
            "samples",
            "stacks",
            "cells",
            "file",
            "load s",
            "attr s",
            "json s",
            "table s",
            "samples/s",
            "peak",
            "e2e s",
            "e2e CPU s",
            "e2e samples/s",
            "e2e RSS",
        ],
        rows,
        notes,
    )


def _count(text: str) -> int:
    """Counts accept 1e6 and 1_000_000 as well as 1000000."""
    try:
        value = int(float(text)) if "e" in text.lower() else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a count: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text!r}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=_count, default=1_000_000, help="samples (default 1e6)")
    parser.add_argument(
        "--stacks", type=_count, default=10_000, help="distinct stacks (default 1e4)"
    )
    parser.add_argument(
        "--windows", type=_count, default=300, help="sampling windows (default 300)"
    )
    parser.add_argument(
        "--scale",
        type=_count,
        action="append",
        default=None,
        help="also a profile with this many times the samples, same stacks and "
        "windows (repeatable; default 10)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--ranks",
        type=int,
        default=1,
        help="also report this many copies of the first profile side by side",
    )
    parser.add_argument(
        "--target",
        action="store_true",
        help="issue 15's target: 5e6 samples, 5e4 stacks, 300 windows, no "
        "scaled profile, 4 ranks side by side",
    )
    parser.add_argument(
        "--quick", action="store_true", help="2e4 samples, 500 stacks, 30 windows: a smoke run"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    options = parser.parse_args(argv)
    if options.scale is None:
        options.scale = [10]
    if options.quick:
        options.samples, options.stacks, options.windows = 20_000, 500, 30
    if options.target:
        options.samples, options.stacks, options.windows = 5_000_000, 50_000, 300
        options.scale, options.ranks = [], max(options.ranks, 4)
    return options


def compare_schemas(paths: list[str]) -> dict[str, Any]:
    """v1 vs v2 on real captures: file size (and per 10 minutes of sampling), write and load
    time, each capture loaded from the file given and written in both schemas."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="gilprof-schemas-") as tmp:
        for path in paths:
            profile = Profile.load(path)
            seconds = max(profile.sampling.duration_s, 1e-9)
            row: dict[str, Any] = {
                "file": path,
                "mode": str(profile.sampling.mode),
                "rate_hz": profile.sampling.rate_hz,
                "sampled_s": round(seconds, 2),
                "windows": len(profile.windows),
                "samples": profile.sampling.samples,
                "stacks": len(profile.stacks),
                "spans": sum(len(w.spans) for w in profile.windows),
            }
            for version in (1, 2):
                out = Path(tmp) / f"v{version}"
                started = time.perf_counter()
                profile.save(out, version=version)
                save_s = time.perf_counter() - started
                started = time.perf_counter()
                Profile.load(out)
                load_s = time.perf_counter() - started
                size = out.stat().st_size
                row[f"v{version}"] = {
                    "file_bytes": size,
                    "bytes_per_10_min": round(size * 600 / seconds),
                    "save_s": round(save_s, 4),
                    "load_s": round(load_s, 4),
                    "save_per_window_ms": round(1000 * save_s / max(1, len(profile.windows)), 2),
                }
            rows.append(row)
    return {
        "benchmark": "profile_schemas",
        "machine": _common.machine_info(),
        "load_average": _common.load_average(),
        "captures": rows,
    }


def print_schemas(result: dict[str, Any]) -> None:
    def mb(count: float) -> str:
        return f"{count / 1e3:,.0f} kB" if count < 1e6 else _common.megabytes(count)

    rows = [
        [
            r["mode"],
            f"{r['rate_hz']:g}",
            f"{r['sampled_s']:g}",
            str(r["windows"]),
            f"{r['samples']:,}",
            str(r["stacks"]),
            f"{r['spans']:,}",
            mb(r["v1"]["file_bytes"]),
            mb(r["v2"]["file_bytes"]),
            mb(r["v1"]["bytes_per_10_min"]),
            mb(r["v2"]["bytes_per_10_min"]),
            f"{r['v1']['save_s']:.3f}",
            f"{r['v2']['save_s']:.3f}",
            f"{r['v2']['save_per_window_ms']:.2f}",
            f"{r['v1']['load_s']:.3f}",
            f"{r['v2']['load_s']:.3f}",
        ]
        for r in result["captures"]
    ]
    _common.print_table(
        "gilprof.profile/1 vs /2 on the same captures",
        [
            "mode",
            "Hz",
            "s",
            "windows",
            "samples",
            "stacks",
            "runs",
            "v1 file",
            "v2 file",
            "v1 /10 min",
            "v2 /10 min",
            "v1 write s",
            "v2 write s",
            "v2 ms/window",
            "v1 load s",
            "v2 load s",
        ],
        rows,
        [
            f"load average {result['load_average']}; write = the whole profile at once "
            "(a capture writes v2 a window at a time: ms/window)"
        ],
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--schemas"]:  # compare_schemas on capture files
        as_json = "--json" in args
        paths = [a for a in args[1:] if a != "--json"]
        if not paths:
            _common.fail("--schemas needs profile files (from gilprof attach, one per mode)")
        result = compare_schemas(paths)
        _common.print_json(result) if as_json else print_schemas(result)
        return 0
    return _common.run_main(argv, parse_args, run, print_report)


if __name__ == "__main__":
    sys.exit(main())
