"""`report_speed.py --schemas FILE...`: gilprof.profile/1 against /2 on real captures."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

import _common

_common.ensure_gilprof_importable()

from gilprof.profile import Profile  # noqa: E402


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
                _, save_s = _common.timed(functools.partial(profile.save, out, version=version))
                _, load_s = _common.timed(functools.partial(Profile.load, out))
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
