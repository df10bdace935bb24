"""How report_speed.py measures `gilprof report` on one saved profile: in process (each
step timed, and the tracemalloc peak in a second pass) and end to end (a subprocess started
by a small runner process, whose rusage gives its CPU time and peak RSS).
"""

from __future__ import annotations

import gc
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import _common
from _common import BenchmarkError

_common.ensure_gilprof_importable()

from gilprof.analysis.attribution import attribute  # noqa: E402
from gilprof.profile import Profile  # noqa: E402
from gilprof.renderers import render  # noqa: E402


def report_in_process(path: Path) -> dict[str, Any]:
    from gilprof.renderers import formats
    from gilprof.renderers.report import ReportData

    formats("report")  # imports the renderer modules (rich) outside the timed part

    cpu_started = time.process_time()
    profile, load_s = _common.timed(lambda: Profile.load(path))
    result, attribute_s = _common.timed(lambda: attribute(profile))
    data = ReportData(profile, result)
    text, json_s = _common.timed(lambda: render("report", "json", data))
    cpu_s = time.process_time() - cpu_started
    table, table_s = _common.timed(lambda: render("report", "table", data, width=120))
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
