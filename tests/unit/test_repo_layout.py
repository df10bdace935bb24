"""The README's set-up commands and .ci/run must not drift apart."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_commands() -> list[str]:
    lines = (ROOT / "README.md").read_text().splitlines()
    return [line.strip() for line in lines[:12] if line.startswith("    ")]


def test_readme_starts_with_demo_and_test_commands():
    demo, tests = _readme_commands()[:2]
    assert demo.endswith("gilprof demo")
    assert "pytest" in tests


def test_ci_runs_exactly_the_readme_test_command():
    ci_lines = [
        line.strip()
        for line in (ROOT / ".ci/run").read_text().splitlines()
        if line.strip()
        and not line.lstrip().startswith(
            (
                "#",
                "set ",
                "cd ",
                "export ",
                # system tools: chromium, tmux
                "command -v ",
                "(apt-get ",
            )
        )
    ]
    assert ci_lines == [_readme_commands()[1]]


def test_required_top_level_entries_exist():
    for name in ("gilprof", "recipes", "examples", "tests", "setup.cfg", "pyproject.toml"):
        assert (ROOT / name).exists(), name
