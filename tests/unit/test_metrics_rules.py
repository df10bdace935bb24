"""The shipped Prometheus rules (recipes/prometheus/): written from the budgets `gate` reads,
valid (`promtool check rules`), and they fire on the unfixed example's series and stay quiet
on the fixed one (`promtool test rules`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gilprof.recipes import load_budget_file
from gilprof.renderers.alert_rules import rules_of_file

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
    assert budgets.max_wait
    for thread, percent in budgets.max_wait.items():
        assert f"max_wait {thread}={percent:g}" in text
        assert f"> {percent / 100:g}" in text


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
