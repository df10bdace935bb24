"""`gilprof compare` and `gilprof report` through the real click group: JSON keys, step
logs, markdown and table output, bad input; what a newcomer reads first in a report. `gate`:
test_compare_gate_cli.py.

In-process (CliRunner) on profiles and logs written to disk, as test_compare_gate_cli.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gilprof.model import Mode

from ..unit.builders import (
    fixed_shares,
    make_profile,
    noisy_profile,
    sample,
    saved,
    steps_log,
    truncated_profile,
)
from .conftest import run_cli

pytestmark = pytest.mark.integration


# ---------------------------------------------------------------------------------------
# compare CLI


@pytest.fixture
def pair(tmp_path) -> tuple[Path, Path]:
    return (
        saved(noisy_profile(1, 0.30), tmp_path / "before.json"),
        saved(noisy_profile(2, 0.15), tmp_path / "after.json"),
    )


def test_compare_json_has_the_documented_keys(pair):
    result = run_cli("compare", *pair, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == "gilprof.analysis.compare/2"
    assert {"utilization", "threads", "functions", "watch", "steps"} <= set(data)
    assert data["mode"] == "gil" and data["steps"] is None
    assert set(data["utilization"]) >= {
        "before",
        "after",
        "delta",
        "ci_low",
        "ci_high",
        "significant",
    }
    watch = {w["function"]: w for w in data["watch"]}
    assert set(watch) >= {"safe_broadcast", "_balance_requests_across_ranks"}
    sb = watch["safe_broadcast"]
    assert sb["verdict"] == "improved" and sb["total_share"]["ci_high"] < 0
    assert sb["total_share"]["before"] == pytest.approx(0.30, abs=0.03)
    assert watch["_balance_requests_across_ranks"]["total_share"]["before"] == 0
    threads = {t["thread"]: t for t in data["threads"]}
    assert set(threads) == {"executor-loop", "ingress"}
    assert set(threads["executor-loop"]["held_share"]) >= {"before", "after", "delta"}
    functions = {(f["function"], f["file"]) for f in data["functions"]}
    assert {("safe_broadcast", "app.py"), ("serve", "app.py"), ("loop", "app.py")} <= functions


def test_compare_json_with_step_logs(pair, tmp_path):
    before_log = steps_log(tmp_path / "before.log", host_ms=100, device_ms=99)
    after_log = steps_log(tmp_path / "after.log", host_ms=70, device_ms=50)
    result = run_cli(
        "compare",
        *pair,
        "--steps-before",
        before_log,
        "--steps-after",
        after_log,
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    steps = json.loads(result.stdout)["steps"]
    assert steps["rank"] == 0
    host = steps["host_step_ms_p50"]
    assert (host["before"], host["after"], host["delta"]) == (102.0, 72.0, -30.0)
    assert host["significant"] and host["ci_high"] < 0
    # The logs alone give readings; the verdicts come from each profile's loop thread (gil
    # mode here: held 30% of the time proves neither side).
    assert steps["reading_before"] == "device~host" and steps["reading_after"] == "device<host"
    for side in ("verdict_before", "verdict_after"):
        assert steps[side]["bound"] == "undetermined" and steps[side]["thread"] == "executor-loop"


def test_compare_markdown_is_a_markdown_table(pair, tmp_path):
    out = tmp_path / "pr-comment.md"
    result = run_cli("compare", *pair, "--format", "markdown", "-o", out)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    lines = out.read_text().splitlines()
    assert lines[0] == "### gilprof compare"
    header = lines.index("| | before | after | change | rel | 95% CI (pp) | verdict |")
    assert lines[header + 1].startswith("|---|")
    rows = []
    for line in lines[header + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    assert len(rows) == 3  # utilization + two default watched functions
    assert all(row.count("|") == 8 for row in rows)
    assert any(row.startswith("| `safe_broadcast` |") and "improved" in row for row in rows)


def test_compare_table_is_the_default(pair):
    result = run_cli("compare", *pair)
    assert result.exit_code == 0, result.output
    assert "Watched functions" in result.stdout and "safe_broadcast" in result.stdout
    assert "improved" in result.stdout


@pytest.mark.parametrize("flag", ["--steps-before", "--steps-after"])
def test_compare_needs_both_step_logs(pair, tmp_path, flag):
    log = steps_log(tmp_path / "one.log", host_ms=100, device_ms=99)
    result = run_cli("compare", *pair, flag, log)
    assert result.exit_code == 2
    assert "give both --steps-before and --steps-after" in result.stderr


def test_compare_bad_inputs_exit_2(pair, tmp_path):
    wall = saved(fixed_shares(mode=Mode.WALL), tmp_path / "wall.json")
    cases = [
        (["compare", pair[0], tmp_path / "nope.json"], "no such file"),
        (["compare", pair[0], truncated_profile(tmp_path)], "truncated profile"),
        (["compare", pair[0], wall], "cannot compare a gil-mode profile with a wall-mode one"),
        (["compare", *pair, "--format", "yaml"], "unknown format 'yaml'"),
    ]
    for args, message in cases:
        result = run_cli(*args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr and "Traceback" not in result.output


# ---------------------------------------------------------------------------------------
# report: what a newcomer reads first


def _deep_profile(tmp_path: Path, errors: int = 0) -> Path:
    """30 leaf functions under thread-bootstrap and module frames; leaf i has i+1 samples."""
    boot = (
        "<module>@app.py",
        "Thread._bootstrap@threading.py",
        "Thread._bootstrap_inner@threading.py",
        "Thread.run@threading.py",
        "work@app.py",
    )
    profile = make_profile(
        [
            (
                1000,
                [sample("worker", *boot, f"leaf{i}@app.py", count=i + 1, tid=1) for i in range(30)],
            )
        ]
        * 2
    )
    from dataclasses import replace

    profile.sampling = replace(profile.sampling, errors=errors)
    return saved(profile, tmp_path / "deep.json")


def _function_rows(out: str) -> list[str]:
    rows = out.split("Functions by self share", 1)[1].split("Watched functions", 1)[0].splitlines()
    return [r.split("│")[1].strip() for r in rows if r.startswith("│")]


def test_report_lists_top_20_by_self_share_without_wrapper_frames(tmp_path):
    result = run_cli("report", _deep_profile(tmp_path))
    assert result.exit_code == 0, result.output
    rows = _function_rows(result.stdout)
    assert len(rows) == 20 and rows[0].startswith("leaf29") and rows[19].startswith("leaf10")
    assert not any(r.startswith(("Thread.", "<module>")) for r in rows)
    assert "bootstrap and <module> frames hidden (--all-frames)" in result.stdout
    everything = _function_rows(
        run_cli("report", _deep_profile(tmp_path), "--all-frames", "--top", "100").stdout
    )
    assert {
        "Thread._bootstrap (threading.py)",
        "Thread.run (threading.py)",
        "<module> (app.py)",
    } <= set(everything)


def test_report_header_explains_errors(tmp_path):
    out = " ".join(run_cli("report", _deep_profile(tmp_path, errors=7)).stdout.split())
    assert "7 errors" in out
    assert "errors 7 samples the sampler failed to read" in out and "left out of every share" in out
