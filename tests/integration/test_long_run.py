"""The short version of benchmarks/long_run.py: 2 ranks at 1000 Hz for 15 s.

Every window's samples in the profile file must equal what py-spy said it recorded for that
window, and gilprof's RSS must not grow with time (no timing assertions: the machine is
shared).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import ROOT, kill_tree, require_tool

pytestmark = pytest.mark.integration
BENCHMARK = ROOT / "benchmarks" / "long_run.py"


def test_fifteen_seconds_at_1000_hz_loses_no_sample_and_keeps_memory_flat(spawn):
    require_tool("mpiexec")
    run = spawn(
        [
            sys.executable,
            str(BENCHMARK),
            "--minutes",
            "0.25",
            "--ranks",
            "2",
            "--rate",
            "1000",
            "--max-growth-mb",
            "30",
            "--json",
        ]
    )
    try:
        out, err = run.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        kill_tree(run)
        pytest.fail("benchmarks/long_run.py did not finish in 240 s")
    assert run.returncode in (0, 1), err.decode()  # 2: the run itself could not be made
    result = json.loads(out)

    assert len(result["per_rank"]) == 2
    for rank in result["per_rank"]:
        assert rank["windows"] >= 3, rank  # 2 s windows over 15 s
        assert rank["windows_unreported"] == 0, rank
        assert rank["windows_mismatched"] == 0, rank
        assert rank["samples_written"] == rank["samples_reported"] > 0, rank
    assert result["samples_written"] == result["samples_reported"]
    assert result["all_windows_match"] is True
    assert result["rss_growth_mb"] < 30, result["rss_series"]
    assert result["memory_bounded"] is True
    assert run.returncode == 0
