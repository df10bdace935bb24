"""The pytest plugin on the example server, in a real pytest run (pytester, a subprocess):
a test within its GIL budget passes, one over it fails naming the function and the excess,
and its profile and report.html are kept."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from .conftest import ROOT

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.integration

SERVER = ROOT / "examples" / "disagg_gen" / "server.py"

BUDGET_TESTS = f"""
import sys

import pytest

JOB = [sys.executable, {str(SERVER)!r}, "--duration", "4", "--concurrency", "256"]


@pytest.mark.gil_budget(max_share={{"safe_broadcast": 95}}, host_p50_ms=100000)
def test_within_budget(gil_profile):
    run = gil_profile.launch(JOB)
    assert run.exit_code == 0


@pytest.mark.gil_budget(max_share={{"safe_broadcast": 0.1}})
def test_over_budget(gil_profile):
    gil_profile.launch(JOB)


def test_without_the_plugin():
    assert True
"""


def plugin_args() -> list[str]:
    """`-p gilprof.pytest_plugin` where the pytest11 entry point is not installed (an
    editable install older than it); with it, pytest loads the plugin itself."""
    installed = any(ep.value == "gilprof.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "gilprof.pytest_plugin"]


def test_budgets_pass_and_fail_with_the_excess_and_files_kept(pytester, tmp_path):
    pytester.makepyfile(test_budgets=BUDGET_TESTS)
    keep = tmp_path / "kept"
    result = pytester.runpytest_subprocess(
        *plugin_args(), "--gilprof-keep", str(keep), "-p", "no:cacheprovider", timeout=240
    )
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    assert "GIL budget exceeded: 1 of 1 budgets" in out
    line = next(s for s in out.splitlines() if "max-share:safe_broadcast:" in s)
    assert "> 0.1% (over by " in line and " points" in line
    (folder,) = (p for p in keep.rglob("run1") if "over_budget" in str(p))
    assert (folder / "profile.json").stat().st_size > 0
    assert (folder / "report.html").stat().st_size > 0
    assert f"profile: {folder / 'profile.json'}" in out
    assert not [p for p in keep.rglob("*") if "within_budget" in str(p)]


def test_the_marker_is_registered_and_a_marked_test_must_run_a_workload(pytester):
    pytester.makepyfile(
        test_marker="""
import pytest

@pytest.mark.gil_budget(max_share={"f": 5})
def test_forgot_the_workload():
    pass
"""
    )
    result = pytester.runpytest_subprocess(
        *plugin_args(), "--strict-markers", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, errors=1)
    assert "the test ran no workload with gil_profile" in result.stdout.str()
