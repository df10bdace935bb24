"""The package's structure, as CI enforces it: import contracts, module sizes (of the package,
examples, benchmarks and tests), one style.

The contracts live in pyproject.toml ([tool.importlinter]); `lint-imports` checks them. The
crossing test proves they can fail: it plants an upward import in a copy of the package.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gilprof"
LINT_IMPORTS = [
    sys.executable,
    "-c",
    "from importlinter.cli import lint_imports_command; lint_imports_command()",
]

# Every module and folder directly under gilprof/ and the layer contract that places it.
LAYERED = {
    "pytest_plugin",
    "cli",
    "renderers",
    "recipes",
    "analysis",
    "reference",
    "sampling",
    "steps",
    "lint",
    "profile",
    "model",
    "native_classes",
    "wait_classes",
    "stats",
    "redact",
    "errors",
}
UNLAYERED = {"__init__", "__main__", "py", "recipes_data", "examples_data", "__pycache__"}

COMMAND_MAX_LINES = 150
MODULE_MAX_LINES = 450
# Folders whose Python files must stay under MODULE_MAX_LINES, but for the NOT_SIZED ones:
# tests/unit/data holds upstream excerpts (lint fixtures), kept as upstream wrote them.
SIZED = ("gilprof", "examples", "benchmarks", "tests")
NOT_SIZED = ("tests/unit/data/",)


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LINT_IMPORTS, "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"},
    )


def test_import_contracts_are_kept() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def _lint_a_copy_with(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on a copy of the package where gilprof/MODULE ends with LINE."""
    shutil.copytree(
        PACKAGE, tmp_path / "gilprof", symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    changed = tmp_path / "gilprof" / module
    changed.write_text(changed.read_text() + f"\n{line}  # noqa: E402,F401\n")
    return _lint_imports(tmp_path)


def test_a_crossed_layer_fails_the_contracts(tmp_path: Path) -> None:
    # A copy of the package where the profile layer imports the CLI: the contracts must break.
    result = _lint_a_copy_with(tmp_path, "profile/files.py", "import gilprof.cli.main")
    assert result.returncode != 0
    assert "Layers" in result.stdout and "BROKEN" in result.stdout
    assert "gilprof.profile.files -> gilprof.cli.main" in result.stdout


def test_click_outside_the_cli_fails_the_contracts(tmp_path: Path) -> None:
    result = _lint_a_copy_with(tmp_path, "sampling/session.py", "import click")
    assert result.returncode != 0
    assert "Nothing outside gilprof.cli imports click BROKEN" in result.stdout


def test_every_top_level_module_sits_in_a_layer() -> None:
    names = {path.stem if path.is_file() else path.name for path in PACKAGE.iterdir()}
    assert names - UNLAYERED <= LAYERED, f"not in any layer contract: {names - UNLAYERED - LAYERED}"
    contracts = (ROOT / "pyproject.toml").read_text()
    for name in LAYERED:
        assert f'"gilprof.{name}' in contracts or f"gilprof.{name} " in contracts, name


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_command_modules_are_thin() -> None:
    commands = [
        p
        for p in (PACKAGE / "cli").glob("*.py")
        if not p.name.startswith("_") and p.name not in ("main.py", "demo_run.py")
    ]
    assert len(commands) >= 12
    fat = {p.name: _lines(p) for p in commands if _lines(p) > COMMAND_MAX_LINES}
    assert not fat, f"command modules over {COMMAND_MAX_LINES} lines: {fat}"


def _too_big(root: Path) -> dict[str, int]:
    """The Python files under root's SIZED folders longer than MODULE_MAX_LINES lines."""
    sources = [path for folder in SIZED for path in sorted((root / folder).rglob("*.py"))]
    return {
        name: lines
        for path in sources
        if not (name := path.relative_to(root).as_posix()).startswith(NOT_SIZED)
        and (lines := _lines(path)) > MODULE_MAX_LINES
    }


def test_no_module_is_too_big_to_hold_in_the_head() -> None:
    assert {"gilprof/model.py", "benchmarks/overhead.py", "tests/unit/test_lint.py"} <= {
        p.relative_to(ROOT).as_posix() for folder in SIZED for p in (ROOT / folder).rglob("*.py")
    }  # every sized folder is really read
    big = _too_big(ROOT)
    assert not big, f"modules over {MODULE_MAX_LINES} lines: {big}"


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize(
    "check",
    [
        ("ruff", "format", "--check", "."),
        ("ruff", "check", "."),
    ],
    ids=["ruff-format", "ruff-check"],
)
def test_style_is_one_style(check: tuple[str, ...]) -> None:
    result = _tool(*check)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]


def test_types_check_over_package_tests_and_benchmarks() -> None:
    result = _tool("mypy")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
