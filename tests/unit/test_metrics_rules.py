"""The shipped Prometheus rules (recipes/prometheus/): written from the budgets `gate` reads,
valid (`promtool check rules`), and they fire on the series recorded from the unfixed
example and stay quiet on the fixed one's (`promtool test rules`)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from gilprof.recipes import load_budget_file
from gilprof.renderers.alert_rules import humanize_duration, rules_of_file, rules_tests_text

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "recipes" / "prometheus"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian: prometheus)")


def test_the_shipped_rules_are_what_the_budgets_give() -> None:
    expected = rules_of_file(str(HERE / "budgets.toml"), "recipes/prometheus/budgets.toml")
    assert (HERE / "gilprof-rules.yml").read_text() == expected, (
        "run: python recipes/prometheus/generate.py"
    )


def test_the_rules_carry_gates_budgets() -> None:
    budgets = load_budget_file(str(HERE / "budgets.toml"))  # as `gate --budget` reads it
    text = (HERE / "gilprof-rules.yml").read_text()
    assert budgets.max_wait and budgets.max_ms_per_step
    for thread, percent in budgets.max_wait.items():
        assert f"max_wait {thread}={percent:g}" in text
        assert f"> {percent / 100:g}" in text
    for function, ms in budgets.max_ms_per_step.items():
        assert f'gilprof_function_step_seconds{{function=\\"{function}\\"}} > {ms / 1e3:g}' in text


def test_the_rules_tests_run_on_the_recorded_series() -> None:
    recording = json.loads((HERE / "recorded.json").read_text())
    budgets = load_budget_file(str(HERE / "budgets.toml"))
    text = rules_tests_text(recording, budgets, "recipes/prometheus/recorded.json")
    assert (HERE / "gilprof-rules.test.yml").read_text() == text, (
        "run: python recipes/prometheus/record.py --from-recording"
    )
    for case in ("unfixed", "fixed"):
        series = recording["cases"][case]["series"]
        costs = [v for k, v in series.items() if 'function="safe_broadcast"' in k]
        (values,) = costs
        assert len(values) >= 6 and len(set(values)) > 1  # readings, not one figure repeated
        for values in series.values():
            assert f"values: {json.dumps(' '.join(_text(v) for v in values))[:-1]}" in text


def _text(v: float | None) -> str:
    return "_" if v is None else f"{v:.6g}"


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.0225, "22.5ms"), (0.0103, "10.3ms"), (0.0004, "400us"), (2.5, "2.5s")]
)
def test_humanize_duration_writes_what_prometheus_does(seconds: float, text: str) -> None:
    assert humanize_duration(seconds) == text


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    result = subprocess.run(
        [str(PROMTOOL), "check", "rules", str(HERE / "gilprof-rules.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 7 rules found" in result.stdout


@needs_promtool
def test_promtool_unit_tests_of_the_rules() -> None:
    result = subprocess.run(
        [str(PROMTOOL), "test", "rules", "gilprof-rules.test.yml"],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
