"""The benchmarks run end to end in --quick mode and print the JSON their README describes.

Nothing here is timed: the machine is shared, so only shapes and sanity are checked.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import ROOT, require_tool

pytestmark = pytest.mark.integration
BENCHMARKS = ROOT / "benchmarks"
SAMPLED = ("100st", "100nb", "100b", "1000nb", "1000b")


def run_quick(spawn, script: str, timeout: float) -> dict:
    proc = spawn([sys.executable, str(BENCHMARKS / script), "--quick", "--json"])
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{script} --quick did not finish in {timeout:g} s")
    assert proc.returncode == 0, err.decode(errors="replace")
    return json.loads(out)


def test_overhead_quick(spawn):
    require_tool("mpiexec")
    result = run_quick(spawn, "overhead.py", timeout=240)
    assert result["benchmark"] == "overhead"
    assert result["order"] == ["none", *SAMPLED, "none"]
    assert len(result["phases"]) == len(result["order"])
    assert result["baseline_median_ms"] > 0
    assert result["baseline_iterations"] >= 3
    assert len(result["unsampled_phase_ratios"]) == 2
    assert all(r > 0 for r in result["unsampled_phase_ratios"])
    assert set(result["ratios"]) == set(SAMPLED)
    assert all(isinstance(r, float) and r > 0 for r in result["ratios"].values()), result["ratios"]
    configs = {row["key"]: row for row in result["configs"]}
    assert set(configs) == {"none", *SAMPLED}
    for key in SAMPLED:
        row = configs[key]
        assert row["iterations"] > 0
        assert row["seconds"] > 0
        assert row["samples_per_s"] > 0, row  # py-spy really sampled rank 0
        assert row["pyspy_cpu_share"] is not None and row["pyspy_cpu_share"] >= 0
        lo, hi = row["ratio_ci95"]
        assert 0 < lo <= hi
    # --rate reaches py-spy: ten times the rate records several times the samples.
    assert configs["1000nb"]["samples_per_s"] > 2 * configs["100nb"]["samples_per_s"]
    assert configs["1000b"]["blocking"] and not configs["1000nb"]["blocking"]
    assert len(result["load_before"]) == 3 and len(result["load_after"]) == 3
    assert result["machine"]["cpus"] >= 1


def test_report_speed_quick(spawn):
    result = run_quick(spawn, "report_speed.py", timeout=180)
    assert result["benchmark"] == "report_speed"
    settings = result["settings"]
    assert (settings["samples"], settings["stacks"], settings["windows"]) == (20_000, 500, 30)
    base, scaled = result["profiles"]
    # Counts are expected values rounded at random, so totals land near the request.
    assert abs(base["samples"] - 20_000) < 1_000
    assert abs(scaled["samples"] - 200_000) < 10_000
    for row in (base, scaled):
        assert row["stacks"] == 500 and row["windows"] == 30 and row["threads"] == 5
        assert 0 < row["cells"] <= row["stacks"] * row["windows"]
        assert 10 <= row["mean_depth"] <= 40
        assert row["file_bytes"] > 0
        assert row["in_process"]["samples_per_s"] > 0
        assert row["in_process"]["peak_bytes"] > 0
        assert row["in_process"]["functions"] > 0
        assert row["subprocess"]["samples_per_s"] > 0
        assert row["subprocess"]["max_rss_bytes"] > 0
    assert scaled["cells"] >= base["cells"]
    (scaling,) = result["memory_scaling"]
    assert 9.5 < scaling["samples_ratio"] < 10.5
    assert scaling["cells_ratio"] >= 1
    assert scaling["in_process_peak_ratio"] > 0
