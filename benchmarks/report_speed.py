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
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import _common
from _common import BenchmarkError

_common.ensure_gilprof_importable()

from report_speed_measure import peak_in_process, report_in_process, report_subprocess  # noqa: E402
from report_speed_schemas import compare_schemas, print_schemas  # noqa: E402
from synthetic_profile import build_profile  # noqa: E402

from gilprof.profile import Profile  # noqa: E402


def build_and_save(
    samples: int, stacks: int, windows: int, path: Path, seed: int, ranks: int = 1
) -> dict[str, Any]:
    """Builds and saves one profile (v2 at `path`, v1 beside it, and `ranks - 1` more copies
    as other ranks); returns its shape. The profile is dropped on return."""
    profile, build_s = _common.timed(lambda: build_profile(samples, stacks, windows, seed))
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
    _, load_s = _common.timed(lambda: Profile.load(path))
    _, load_v1_s = _common.timed(lambda: Profile.load(v1))
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
    _common.output_options(parser, quick="2e4 samples, 500 stacks, 30 windows: a smoke run")
    options = parser.parse_args(argv)
    if options.scale is None:
        options.scale = [10]
    if options.quick:
        options.samples, options.stacks, options.windows = 20_000, 500, 30
    if options.target:
        options.samples, options.stacks, options.windows = 5_000_000, 50_000, 300
        options.scale, options.ranks = [], max(options.ranks, 4)
    return options


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
