"""`gilprof gate` through the real click group: exit codes, messages, budget files, JUnit,
the GitHub step summary, regression against a baseline. `compare` and `report`:
test_compare_report_cli.py.

In-process (CliRunner) on profiles and logs written to disk, so every path from argument
parsing to rendering and exit code runs as a user would hit it.
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from ..unit.builders import (
    fixed_shares,
    make_profile,
    noisy_profile,
    saved,
    steps_log,
    truncated_profile,
)
from .conftest import run_cli

pytestmark = pytest.mark.integration


@pytest.fixture
def fixed_profile(tmp_path) -> Path:
    return saved(fixed_shares(), tmp_path / "fixed.json")


# ---------------------------------------------------------------------------------------
# gate: exit codes and messages


def test_gate_passes_with_exit_0(fixed_profile):
    result = run_cli(
        "gate", fixed_profile, "--max-share", "safe_broadcast=35", "--max-utilization", "60"
    )
    assert result.exit_code == 0, result.output
    assert "PASS  max-share:safe_broadcast" in result.stdout
    assert "PASS  max-utilization" in result.stdout
    assert "gate passed" in result.stdout and "FAIL" not in result.stdout


# On fixed_shares(): safe_broadcast 30% fails, serve 20% passes, utilization 50% fails.
TWO_OF_THREE_FAIL = (
    *("--max-share", "safe_broadcast=5"),
    *("--max-share", "serve=50%"),
    *("--max-utilization", "40"),
)


def test_gate_prints_every_failed_budget_with_measured_value_and_limit(fixed_profile):
    result = run_cli("gate", fixed_profile, *TWO_OF_THREE_FAIL)
    assert result.exit_code == 1, result.output
    out = result.stdout
    assert (
        "FAIL  max-share:safe_broadcast: total GIL share of safe_broadcast = 30.00%, limit 5%"
        in out
    )
    assert "FAIL  max-utilization: GIL utilization = 50.00%, limit 40%" in out
    assert "PASS  max-share:serve" in out and "= 20.00%, limit 50%" in out
    assert "FAILED (2 of 3 budgets)" in out
    assert (
        "gilprof: error: 2 of 3 budgets failed: max-share:safe_broadcast, max-utilization"
        in result.stderr
    )
    assert "Traceback" not in result.output


def test_gate_host_step_budget_from_an_iteration_log(fixed_profile, tmp_path):
    log = steps_log(tmp_path / "rank0.log", host_ms=100, device_ms=99)
    # 27 iterations after the 3 warm-up ones, host 100..104 ms -> p50 102
    ok = run_cli("gate", fixed_profile, "--steps", log, "--max-host-step-p50", "110")
    assert ok.exit_code == 0, ok.output
    assert "= 102.00ms, limit 110ms" in ok.stdout and "27 iterations" in ok.stdout
    slow = run_cli("gate", fixed_profile, "--steps", log, "--max-host-step-p50", "90")
    assert slow.exit_code == 1 and "FAIL  max-host-step-p50" in slow.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["{missing}", "--max-share", "safe_broadcast=5"], "no such file"),
        (["{truncated}", "--max-share", "safe_broadcast=5"], "truncated profile"),
        (["{profile}", "--max-share", "safe_broadcast"], "--max-share expects FUNC=PERCENT"),
        (["{profile}", "--max-share", "safe_broadcast=lots"], "--max-share expects FUNC=PERCENT"),
        (["{profile}", "--max-share", "safe_broadcast=150"], "--max-share expects FUNC=PERCENT"),
        (["{profile}", "--max-share", "=5"], "--max-share expects FUNC=PERCENT"),
        (["{profile}"], "no budgets given"),
        (["{profile}", "--max-regression", "10"], "--max-regression needs a baseline"),
        (["{profile}", "--max-host-step-p50", "100"], "needs an iteration log"),
        (["{profile}", "--budget", "{missing}"], "no such file"),
        (["{profile}", "--baseline", "{missing}", "--max-regression", "10"], "no such file"),
        (["{profile}", "--steps", "{missing}", "--max-host-step-p50", "100"], "no such file"),
    ],
    ids=[
        "missing-profile",
        "truncated-profile",
        "share-no-equals",
        "share-not-a-number",
        "share-over-100",
        "share-no-name",
        "no-budgets",
        "regression-no-baseline",
        "host-step-no-log",
        "missing-budget-file",
        "missing-baseline",
        "missing-log",
    ],
)
def test_gate_bad_input_exits_2_with_one_line(tmp_path, fixed_profile, args, message):
    paths = {
        "missing": str(tmp_path / "nope.json"),
        "truncated": str(truncated_profile(tmp_path)),
        "profile": str(fixed_profile),
    }
    result = run_cli("gate", *(a.format(**paths) for a in args))
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stderr.startswith("gilprof: error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "toml,key",
    [
        ('[gate]\nmax_utilization = "lots"\n', "gate.max_utilization"),
        ("[gate]\nmax_utilization = 140\n", "gate.max_utilization"),
        ("[gate]\nmax_shares = 5\n", "gate.max_shares"),
        ("[gate.max_share]\nsafe_broadcast = -1\n", "gate.max_share.safe_broadcast"),
        ("[gate]\nmax_share = 5\n", "gate.max_share"),
        ("[gate]\nmax_regression = -3\n", "gate.max_regression"),
        ("[budgets]\nmax_utilization = 50\n", "gate"),
        ("[gate\nmax_utilization = 50\n", "not valid TOML"),
    ],
)
def test_gate_bad_budget_file_exits_2_naming_the_key(tmp_path, fixed_profile, toml, key):
    budget = tmp_path / "budgets.toml"
    budget.write_text(toml)
    result = run_cli("gate", fixed_profile, "--budget", budget)
    assert result.exit_code == 2, result.output
    assert f"{budget}: {key}" in result.stderr or (key == "not valid TOML" and key in result.stderr)
    assert "Traceback" not in result.output


# ---------------------------------------------------------------------------------------
# gate: budget files, JUnit, GitHub step summary


def test_gate_budget_file_is_used_and_flags_override_it(tmp_path, fixed_profile):
    budget = tmp_path / "budgets.toml"
    budget.write_text(
        "[gate]\nmax_utilization = 40\n[gate.max_share]\nsafe_broadcast = 5\nserve = 50\n"
    )
    from_file = run_cli("gate", fixed_profile, "--budget", budget)
    assert from_file.exit_code == 1, from_file.output
    assert "FAIL  max-share:safe_broadcast" in from_file.stdout and "limit 5%" in from_file.stdout
    assert (
        "FAIL  max-utilization" in from_file.stdout and "PASS  max-share:serve" in from_file.stdout
    )
    overridden = run_cli(
        "gate",
        fixed_profile,
        "--budget",
        budget,
        "--max-share",
        "safe_broadcast=35",
        "--max-utilization",
        "90",
    )
    assert overridden.exit_code == 0, overridden.output
    assert "limit 35%" in overridden.stdout and "limit 90%" in overridden.stdout
    # File budgets not named on the command line still apply.
    assert "PASS  max-share:serve" in overridden.stdout


def test_gate_budget_file_may_be_a_whole_recipe(tmp_path, fixed_profile):
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('name = "mine"\ndescription = "my server"\n[gate]\nmax_utilization = 55\n')
    result = run_cli("gate", fixed_profile, "--budget", recipe)
    assert result.exit_code == 0, result.output
    assert "= 50.00%, limit 55%" in result.stdout


def test_gate_junit_is_well_formed_with_one_testcase_per_budget(tmp_path, fixed_profile):
    junit = tmp_path / "out" / "gate.xml"
    junit.parent.mkdir()
    result = run_cli("gate", fixed_profile, *TWO_OF_THREE_FAIL, "--junit", junit)
    assert result.exit_code == 1
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "3" and root.get("failures") == "2"
    (suite,) = root.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "2", "0")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {"max-share:safe_broadcast", "max-share:serve", "max-utilization"}
    failure = cases["max-share:safe_broadcast"].find("failure")
    assert failure is not None
    message = failure.get("message", "")
    assert "30.00%" in message and "exceeds 5%" in message
    assert cases["max-utilization"].find("failure") is not None
    assert cases["max-share:serve"].find("failure") is None
    # A passing run writes zero failures.
    ok = run_cli("gate", fixed_profile, "--max-share", "serve=50", "--junit", junit)
    assert ok.exit_code == 0
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "0" and root.get("tests") == "1"
    assert [c.get("name") for c in root.iter("testcase")] == ["max-share:serve"]
    assert not list(root.iter("failure"))


def test_gate_appends_a_markdown_summary_to_github_step_summary(tmp_path, fixed_profile):
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    failed = run_cli("gate", fixed_profile, "--max-share", "safe_broadcast=5", env=env)
    assert failed.exit_code == 1
    passed = run_cli("gate", fixed_profile, "--max-share", "safe_broadcast=50", env=env)
    assert passed.exit_code == 0
    text = summary.read_text()
    assert text.startswith("# earlier step\n")
    assert "### ❌ gilprof gate failed (1 of 1)" in text and "### ✅ gilprof gate passed" in text
    assert text.index("failed (1 of 1)") < text.index("gate passed")
    assert "| budget | measured | limit | result | detail |" in text
    assert "| `max-share:safe_broadcast` | 30.00% | 5% | **FAIL** |" in text
    # Without the variable nothing is written anywhere else.
    assert (
        run_cli(
            "gate",
            fixed_profile,
            "--max-share",
            "safe_broadcast=50",
            env={"GITHUB_STEP_SUMMARY": ""},
        ).exit_code
        == 0
    )
    assert summary.read_text() == text


def test_gate_json_format(fixed_profile):
    result = run_cli("gate", fixed_profile, "--max-share", "safe_broadcast=5", "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["schema"] == "gilprof.analysis.gate/1" and data["passed"] is False
    (budget,) = data["budgets"]
    assert budget["name"] == "max-share:safe_broadcast"
    assert (
        budget["measured"] == pytest.approx(30.0) and budget["limit"] == 5 and not budget["passed"]
    )


# ---------------------------------------------------------------------------------------
# gate: regression against a baseline


def test_gate_max_regression_fails_on_a_significant_fifty_percent_increase(tmp_path):
    baseline = saved(noisy_profile(1, 0.20), tmp_path / "baseline.json")
    current = saved(noisy_profile(2, 0.30), tmp_path / "current.json")
    result = run_cli("gate", current, "--baseline", baseline, "--max-regression", "20")
    assert result.exit_code == 1, result.output
    assert "FAIL  max-regression" in result.stdout
    assert "safe_broadcast" in result.stdout and "limit 20%" in result.stdout


@pytest.mark.parametrize("seeds", [(3, 4), (5, 6), (7, 8)])
def test_gate_max_regression_passes_noise_level_differences(tmp_path, seeds):
    baseline = saved(noisy_profile(seeds[0], 0.25), tmp_path / "baseline.json")
    current = saved(noisy_profile(seeds[1], 0.25), tmp_path / "current.json")
    result = run_cli("gate", current, "--baseline", baseline, "--max-regression", "10")
    assert result.exit_code == 0, result.output
    assert "PASS  max-regression" in result.stdout


def test_gate_budget_file_regression_without_a_baseline_exits_2_as_the_flag_does(tmp_path):
    baseline = saved(noisy_profile(1, 0.20), tmp_path / "baseline.json")
    current = saved(noisy_profile(2, 0.30), tmp_path / "current.json")
    budget = tmp_path / "budgets.toml"
    budget.write_text("[gate]\nmax_regression = 20\nmax_utilization = 99\n")
    for args in (("--budget", budget), ("--max-regression", "20")):
        without = run_cli("gate", current, *args)
        assert without.exit_code == 2, without.output
        assert "needs a baseline profile (--baseline PROFILE)" in without.output
    with_baseline = run_cli("gate", current, "--budget", budget, "--baseline", baseline)
    assert with_baseline.exit_code == 1 and "FAIL  max-regression" in with_baseline.stdout


def test_gate_recipe_regression_without_a_baseline_is_skipped_and_said(tmp_path):
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        'name = "mine"\ndescription = "my server"\n'
        "[gate]\nmax_regression = 10\nmax_utilization = 99\n"
    )
    result = run_cli("gate", saved(fixed_shares(), tmp_path / "p.json"), "--recipe", recipe)
    assert result.exit_code == 0, result.output
    assert "max_regression (10%) is not checked without --baseline" in result.stderr


def test_gate_budget_on_a_function_never_seen_fails_unless_allowed(fixed_profile):
    result = run_cli("gate", fixed_profile, "--max-share", "safe_braodcast=5")
    assert result.exit_code == 1, result.output
    assert "FAIL  max-share:safe_braodcast" in result.stdout and "never seen" in result.stdout
    allowed = run_cli("gate", fixed_profile, "--max-share", "safe_braodcast=5", "--allow-missing")
    assert allowed.exit_code == 0, allowed.output


def test_compare_and_gate_refuse_an_empty_profile_with_exit_2(tmp_path, fixed_profile):
    """0 samples (an idle target, a launcher's PID): 0/0 shares, not [+-inf, +-inf] rows."""
    empty = saved(make_profile([(100, [])] * 4), tmp_path / "empty.json")
    for args in (
        ("compare", empty, fixed_profile),
        ("compare", fixed_profile, empty),
        ("gate", empty, "--max-utilization", "50"),
        ("gate", fixed_profile, "--baseline", empty, "--max-regression", "10"),
    ):
        result = run_cli(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "has no samples" in result.output and "inf" not in result.output
        assert "idle" in result.output and "gilprof ps" in result.output


def test_report_warns_about_an_empty_profile_and_says_why(tmp_path):
    empty = saved(make_profile([(100, [])] * 4), tmp_path / "empty.json")
    result = run_cli("report", empty)
    assert result.exit_code == 0, result.output
    assert "warning" in result.stderr and "0 samples" in result.stderr
    assert "WARNING  0 samples" in result.stdout and "idle" in result.stdout
    data = json.loads(run_cli("report", empty, "--format", "json").stdout)
    assert data["warnings"] and "PID" in data["warnings"][0]
