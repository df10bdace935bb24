"""`gilprof demo` end to end on a short window: real mpiexec, real py-spy, the bundled server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from gilprof.cli.main import cli
from gilprof.steps import summarize_logs

from .conftest import ROOT, gilprof_cmd, kill_tree, require_tool

pytestmark = pytest.mark.integration

WATCHED = ("safe_broadcast", "_balance_requests_across_ranks")
DEMO_TIMEOUT_S = 180


def _watch(profile: Path) -> dict[str, dict]:
    result = CliRunner().invoke(cli, ["report", str(profile), "--format", "json"])
    assert result.exit_code == 0, result.output
    return {w["function"]: w for w in json.loads(result.stdout)["watch"]}


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> tuple[Path, str, str]:
    """One demo run shared by the tests below: it is the slowest thing in the suite."""
    require_tool("mpiexec")
    out = tmp_path_factory.mktemp("demo") / "out"
    proc = subprocess.Popen(gilprof_cmd("demo", "-o", str(out), "--window", "4", "--warmup", "2"),
                            cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=DEMO_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        pytest.fail(f"gilprof demo did not finish within {DEMO_TIMEOUT_S} s")
    finally:
        if proc.poll() is None:
            kill_tree(proc)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    return out, stdout, stderr


def test_demo_leaves_profiles_logs_and_report(demo_run):
    out, stdout, stderr = demo_run
    for name in ("before.json", "after.json", "before.log", "after.log", "report.md"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert "sampling rank 0" in stderr
    assert str(out / "report.md") in stdout


def test_demo_report_and_stdout_show_the_watched_function_and_host_step(demo_run):
    out, stdout, _ = demo_run
    report = (out / "report.md").read_text()
    for text in (stdout, report):
        assert "safe_broadcast" in text
        assert "host step p50" in text
        assert "host-bound" in text or "device-bound" in text
    assert report.startswith("### gilprof compare")


def test_demo_logs_have_rank_0_iterations(demo_run):
    out, _, _ = demo_run
    for side in ("before", "after"):
        steps = summarize_logs([out / f"{side}.log"], rank=0, skip_warmup=3).rank(0)
        assert steps is not None and steps.iterations >= 5, side
        assert steps.device_iterations > 0


def test_demo_before_profile_finds_the_watched_functions(demo_run):
    out, _, _ = demo_run
    watch = _watch(out / "before.json")
    for name in WATCHED:
        assert watch[name]["found"], (name, watch[name])
        assert watch[name]["total_share"] > 0


def test_demo_after_spends_less_gil_time_in_safe_broadcast(demo_run):
    out, _, _ = demo_run
    before = _watch(out / "before.json")["safe_broadcast"]["total_share"]
    after = _watch(out / "after.json")["safe_broadcast"]["total_share"]
    assert after < before, (before, after)
