"""Test code is skipped in directory scans unless asked for, then reported at level note."""

from __future__ import annotations

import json
from pathlib import Path, PurePath

import pytest
from click.testing import CliRunner

from gilprof.cli.main import cli
from gilprof.lint import is_test_path, lint_paths

ROUND_TRIP = "import pickle\ndef f(o):\n    b = pickle.dumps(o)\n    return pickle.loads(b)\n"


@pytest.mark.parametrize(
    ("path", "test"),
    [
        ("tests/helpers.py", True),
        ("pkg/test/unit/x.py", True),
        ("test_copy.py", True),
        ("pkg/copy_test.py", True),
        ("conftest.py", True),
        ("pkg/testing.py", False),
        ("pkg/contest.py", False),
        ("latest/x.py", False),
    ],
)
def test_what_counts_as_test_code(path: str, test: bool) -> None:
    assert is_test_path(PurePath(path)) is test


def tree(root: Path) -> None:
    for relative in ("pkg/send.py", "pkg/tests/test_send.py", "pkg/conftest.py"):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(ROUND_TRIP)


def test_test_files_are_skipped_by_default_and_noted_when_included(tmp_path: Path) -> None:
    tree(tmp_path)
    result = lint_paths([tmp_path])
    assert [Path(f.path).name for f in result.findings] == ["send.py"]
    assert (result.files_scanned, result.tests_skipped) == (1, 2)
    included = lint_paths([tmp_path], include_tests=True)
    levels = {Path(f.path).name: f.level for f in included.findings}
    assert levels == {"send.py": "warning", "conftest.py": "note", "test_send.py": "note"}


def test_a_test_file_named_explicitly_is_linted(tmp_path: Path) -> None:
    tree(tmp_path)
    named = tmp_path / "pkg" / "tests" / "test_send.py"
    assert [f.level for f in lint_paths([named]).findings] == ["warning"]


def test_cli_include_tests_in_json_sarif_and_text(tmp_path: Path) -> None:
    tree(tmp_path)
    runner = CliRunner()
    text = runner.invoke(cli, ["lint", str(tmp_path)]).stdout
    assert "2 test files skipped (--include-tests)" in text
    out = runner.invoke(cli, ["lint", str(tmp_path), "--include-tests", "--format", "json"])
    document = json.loads(out.stdout)
    assert sorted(f["level"] for f in document["findings"]) == ["note", "note", "warning"]
    assert document["tests_skipped"] == 0
    sarif = json.loads(
        runner.invoke(cli, ["lint", str(tmp_path), "--include-tests", "--format", "sarif"]).stdout
    )
    assert sorted(r["level"] for r in sarif["runs"][0]["results"]) == ["note", "note", "warning"]
    text = runner.invoke(cli, ["lint", str(tmp_path), "--include-tests"]).stdout
    assert text.count("GP001 (test code)") == 2
