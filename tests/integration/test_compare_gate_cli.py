"""`gilprof compare` and `gilprof gate` through the real click group: exit codes, files, formats.

In-process (CliRunner) on profiles and logs written to disk, so every path from argument
parsing to rendering and exit code runs as a user would hit it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from click.testing import CliRunner, Result

from gilprof.cli.main import cli
from gilprof.model import Mode
from gilprof.profile import Profile

from ..unit.builders import hot_and_serve, make_profile, noisy_windows, sample

pytestmark = pytest.mark.integration


def run(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], env=env)


def _fixed(mode: Mode = Mode.GIL) -> Profile:
    """Exact shares: safe_broadcast 30%, serve 20%, utilization 50%."""
    return hot_and_serve(("executor-loop", "loop", "safe_broadcast"), 30, 20, mode=mode)


def _noisy(seed: int, hot_share: float) -> Profile:
    hot = ("executor-loop", "loop", "fetch", "safe_broadcast")
    return make_profile(noisy_windows(random.Random(seed), hot_share, hot))


def _save(profile: Profile, path: Path) -> Path:
    profile.save(path)
    return path


@pytest.fixture
def fixed_profile(tmp_path) -> Path:
    return _save(_fixed(), tmp_path / "fixed.json")


def _steps_log(path: Path, host_ms: float, device_ms: float, n: int = 30) -> Path:
    lines = ["launching workers...", "[TRT-LLM] [I] model loaded"]
    for i in range(n):
        device = "N/A" if i == 0 else f"{device_ms + (i % 3):.2f}ms"
        lines.append(
            f"[TRT-LLM] [I] [_torch][RANK 0] iter = {i}, global_rank = 0, rank = 0, "
            f"currank_total_requests = 4/16, host_step_time = {host_ms + (i % 5):.2f}ms, "
            f"prev_device_step_time = {device}, timestamp = 2026-08-04 19:08:13, "
            f"num_scheduled_requests: 4, states = {{'num_ctx_requests': 0}}"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


# ---------------------------------------------------------------------------------------
# gate: exit codes and messages


def test_gate_passes_with_exit_0(fixed_profile):
    result = run(
        "gate", fixed_profile, "--max-share", "safe_broadcast=35", "--max-utilization", "60"
    )
    assert result.exit_code == 0, result.output
    assert "PASS  max-share:safe_broadcast" in result.stdout
    assert "PASS  max-utilization" in result.stdout
    assert "gate passed" in result.stdout and "FAIL" not in result.stdout


# On _fixed(): safe_broadcast 30% fails, serve 20% passes, utilization 50% fails.
TWO_OF_THREE_FAIL = (
    *("--max-share", "safe_broadcast=5"),
    *("--max-share", "serve=50%"),
    *("--max-utilization", "40"),
)


def test_gate_prints_every_failed_budget_with_measured_value_and_limit(fixed_profile):
    result = run("gate", fixed_profile, *TWO_OF_THREE_FAIL)
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
    log = _steps_log(tmp_path / "rank0.log", host_ms=100, device_ms=99)
    # 27 iterations after the 3 warm-up ones, host 100..104 ms -> p50 102
    ok = run("gate", fixed_profile, "--steps", log, "--max-host-step-p50", "110")
    assert ok.exit_code == 0, ok.output
    assert "= 102.00ms, limit 110ms" in ok.stdout and "27 iterations" in ok.stdout
    slow = run("gate", fixed_profile, "--steps", log, "--max-host-step-p50", "90")
    assert slow.exit_code == 1 and "FAIL  max-host-step-p50" in slow.stdout


def _truncated(tmp_path: Path) -> Path:
    full = _save(_fixed(), tmp_path / "full.json").read_text()
    path = tmp_path / "truncated.json"
    path.write_text(full[: len(full) // 2])
    return path


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
        "truncated": str(_truncated(tmp_path)),
        "profile": str(fixed_profile),
    }
    result = run("gate", *(a.format(**paths) for a in args))
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
    result = run("gate", fixed_profile, "--budget", budget)
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
    from_file = run("gate", fixed_profile, "--budget", budget)
    assert from_file.exit_code == 1, from_file.output
    assert "FAIL  max-share:safe_broadcast" in from_file.stdout and "limit 5%" in from_file.stdout
    assert (
        "FAIL  max-utilization" in from_file.stdout and "PASS  max-share:serve" in from_file.stdout
    )
    overridden = run(
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
    result = run("gate", fixed_profile, "--budget", recipe)
    assert result.exit_code == 0, result.output
    assert "= 50.00%, limit 55%" in result.stdout


def test_gate_junit_is_well_formed_with_one_testcase_per_budget(tmp_path, fixed_profile):
    junit = tmp_path / "out" / "gate.xml"
    junit.parent.mkdir()
    result = run("gate", fixed_profile, *TWO_OF_THREE_FAIL, "--junit", junit)
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
    ok = run("gate", fixed_profile, "--max-share", "serve=50", "--junit", junit)
    assert ok.exit_code == 0
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "0" and root.get("tests") == "1"
    assert [c.get("name") for c in root.iter("testcase")] == ["max-share:serve"]
    assert not list(root.iter("failure"))


def test_gate_appends_a_markdown_summary_to_github_step_summary(tmp_path, fixed_profile):
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    failed = run("gate", fixed_profile, "--max-share", "safe_broadcast=5", env=env)
    assert failed.exit_code == 1
    passed = run("gate", fixed_profile, "--max-share", "safe_broadcast=50", env=env)
    assert passed.exit_code == 0
    text = summary.read_text()
    assert text.startswith("# earlier step\n")
    assert "### ❌ gilprof gate failed (1 of 1)" in text and "### ✅ gilprof gate passed" in text
    assert text.index("failed (1 of 1)") < text.index("gate passed")
    assert "| budget | measured | limit | result | detail |" in text
    assert "| `max-share:safe_broadcast` | 30.00% | 5% | **FAIL** |" in text
    # Without the variable nothing is written anywhere else.
    assert (
        run(
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
    result = run("gate", fixed_profile, "--max-share", "safe_broadcast=5", "--format", "json")
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
    baseline = _save(_noisy(1, 0.20), tmp_path / "baseline.json")
    current = _save(_noisy(2, 0.30), tmp_path / "current.json")
    result = run("gate", current, "--baseline", baseline, "--max-regression", "20")
    assert result.exit_code == 1, result.output
    assert "FAIL  max-regression" in result.stdout
    assert "safe_broadcast" in result.stdout and "limit 20%" in result.stdout


@pytest.mark.parametrize("seeds", [(3, 4), (5, 6), (7, 8)])
def test_gate_max_regression_passes_noise_level_differences(tmp_path, seeds):
    baseline = _save(_noisy(seeds[0], 0.25), tmp_path / "baseline.json")
    current = _save(_noisy(seeds[1], 0.25), tmp_path / "current.json")
    result = run("gate", current, "--baseline", baseline, "--max-regression", "10")
    assert result.exit_code == 0, result.output
    assert "PASS  max-regression" in result.stdout


def test_gate_budget_file_regression_without_a_baseline_exits_2_as_the_flag_does(tmp_path):
    baseline = _save(_noisy(1, 0.20), tmp_path / "baseline.json")
    current = _save(_noisy(2, 0.30), tmp_path / "current.json")
    budget = tmp_path / "budgets.toml"
    budget.write_text("[gate]\nmax_regression = 20\nmax_utilization = 99\n")
    for args in (("--budget", budget), ("--max-regression", "20")):
        without = run("gate", current, *args)
        assert without.exit_code == 2, without.output
        assert "needs a baseline profile (--baseline PROFILE)" in without.output
    with_baseline = run("gate", current, "--budget", budget, "--baseline", baseline)
    assert with_baseline.exit_code == 1 and "FAIL  max-regression" in with_baseline.stdout


def test_gate_recipe_regression_without_a_baseline_is_skipped_and_said(tmp_path):
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        'name = "mine"\ndescription = "my server"\n'
        "[gate]\nmax_regression = 10\nmax_utilization = 99\n"
    )
    result = run("gate", _save(_fixed(), tmp_path / "p.json"), "--recipe", recipe)
    assert result.exit_code == 0, result.output
    assert "max_regression (10%) is not checked without --baseline" in result.stderr


def test_gate_budget_on_a_function_never_seen_fails_unless_allowed(fixed_profile):
    result = run("gate", fixed_profile, "--max-share", "safe_braodcast=5")
    assert result.exit_code == 1, result.output
    assert "FAIL  max-share:safe_braodcast" in result.stdout and "never seen" in result.stdout
    allowed = run("gate", fixed_profile, "--max-share", "safe_braodcast=5", "--allow-missing")
    assert allowed.exit_code == 0, allowed.output


def test_compare_and_gate_refuse_an_empty_profile_with_exit_2(tmp_path, fixed_profile):
    """0 samples (an idle target, a launcher's PID): 0/0 shares, not [+-inf, +-inf] rows."""
    empty = _save(make_profile([(100, [])] * 4), tmp_path / "empty.json")
    for args in (
        ("compare", empty, fixed_profile),
        ("compare", fixed_profile, empty),
        ("gate", empty, "--max-utilization", "50"),
        ("gate", fixed_profile, "--baseline", empty, "--max-regression", "10"),
    ):
        result = run(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "has no samples" in result.output and "inf" not in result.output
        assert "idle" in result.output and "gilprof ps" in result.output


def test_report_warns_about_an_empty_profile_and_says_why(tmp_path):
    empty = _save(make_profile([(100, [])] * 4), tmp_path / "empty.json")
    result = run("report", empty)
    assert result.exit_code == 0, result.output
    assert "warning" in result.stderr and "0 samples" in result.stderr
    assert "WARNING  0 samples" in result.stdout and "idle" in result.stdout
    data = json.loads(run("report", empty, "--format", "json").stdout)
    assert data["warnings"] and "PID" in data["warnings"][0]


# ---------------------------------------------------------------------------------------
# compare CLI


@pytest.fixture
def pair(tmp_path) -> tuple[Path, Path]:
    return (
        _save(_noisy(1, 0.30), tmp_path / "before.json"),
        _save(_noisy(2, 0.15), tmp_path / "after.json"),
    )


def test_compare_json_has_the_documented_keys(pair):
    result = run("compare", *pair, "--format", "json")
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
    before_log = _steps_log(tmp_path / "before.log", host_ms=100, device_ms=99)
    after_log = _steps_log(tmp_path / "after.log", host_ms=70, device_ms=50)
    result = run(
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
    result = run("compare", *pair, "--format", "markdown", "-o", out)
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
    result = run("compare", *pair)
    assert result.exit_code == 0, result.output
    assert "Watched functions" in result.stdout and "safe_broadcast" in result.stdout
    assert "improved" in result.stdout


@pytest.mark.parametrize("flag", ["--steps-before", "--steps-after"])
def test_compare_needs_both_step_logs(pair, tmp_path, flag):
    log = _steps_log(tmp_path / "one.log", host_ms=100, device_ms=99)
    result = run("compare", *pair, flag, log)
    assert result.exit_code == 2
    assert "give both --steps-before and --steps-after" in result.stderr


def test_compare_bad_inputs_exit_2(pair, tmp_path):
    wall = _save(_fixed(mode=Mode.WALL), tmp_path / "wall.json")
    cases = [
        (["compare", pair[0], tmp_path / "nope.json"], "no such file"),
        (["compare", pair[0], _truncated(tmp_path)], "truncated profile"),
        (["compare", pair[0], wall], "cannot compare a gil-mode profile with a wall-mode one"),
        (["compare", *pair, "--format", "yaml"], "unknown format 'yaml'"),
    ]
    for args, message in cases:
        result = run(*args)
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
    return _save(profile, tmp_path / "deep.json")


def _function_rows(out: str) -> list[str]:
    rows = out.split("Functions by self share", 1)[1].split("Watched functions", 1)[0].splitlines()
    return [r.split("│")[1].strip() for r in rows if r.startswith("│")]


def test_report_lists_top_20_by_self_share_without_wrapper_frames(tmp_path):
    result = run("report", _deep_profile(tmp_path))
    assert result.exit_code == 0, result.output
    rows = _function_rows(result.stdout)
    assert len(rows) == 20 and rows[0].startswith("leaf29") and rows[19].startswith("leaf10")
    assert not any(r.startswith(("Thread.", "<module>")) for r in rows)
    assert "bootstrap and <module> frames hidden (--all-frames)" in result.stdout
    everything = _function_rows(
        run("report", _deep_profile(tmp_path), "--all-frames", "--top", "100").stdout
    )
    assert {
        "Thread._bootstrap (threading.py)",
        "Thread.run (threading.py)",
        "<module> (app.py)",
    } <= set(everything)


def test_report_header_explains_errors(tmp_path):
    out = " ".join(run("report", _deep_profile(tmp_path, errors=7)).stdout.split())
    assert "7 errors" in out
    assert "errors 7 samples the sampler failed to read" in out and "left out of every share" in out
