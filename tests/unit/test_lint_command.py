"""`gilprof lint` on files and directories (walking, broken files), and the command: exit
codes, getter options, json and sarif output. Rules and fixtures: test_lint.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from gilprof.cli.main import cli
from gilprof.lint import (
    RULES,
    SCHEMA,
    iter_python_files,
    lint_paths,
)
from gilprof.renderers import render

# ---- Files, directories, errors ------------------------------------------------------------

ROUND_TRIP = "import pickle\ndef f(o):\n    b = pickle.dumps(o)\n    return pickle.loads(b)\n"


def test_directories_are_walked_for_python_files_skipping_caches_and_venvs(tmp_path: Path) -> None:
    for relative in (
        "pkg/a.py",
        "pkg/sub/b.py",
        "pkg/notes.txt",
        ".git/hook.py",
        "pkg/__pycache__/a.py",
        "node_modules/x.py",
        ".venv/lib/site.py",
        "myenv/lib/site.py",
        "conda/lib/site.py",
        "pkg/env/c.py",
    ):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("x = 1\n")
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "conda" / "conda-meta").mkdir()
    found = [p.relative_to(tmp_path).as_posix() for p in iter_python_files(tmp_path)]
    assert found == ["pkg/a.py", "pkg/env/c.py", "pkg/sub/b.py"]


def test_a_broken_file_is_reported_and_the_scan_goes_on(tmp_path: Path) -> None:
    (tmp_path / "a_broken.py").write_text("def f(:\n    pass\n")
    (tmp_path / "b_latin.py").write_bytes(b"x = '\xff\xfe'\n")
    (tmp_path / "c_flagged.py").write_text(ROUND_TRIP)
    script = tmp_path / "tool"  # named explicitly: scanned whatever its suffix
    script.write_text(ROUND_TRIP)
    os.mkfifo(tmp_path / "d_pipe.py")  # reading it would block forever
    result = lint_paths([tmp_path, script, tmp_path / "c_flagged.py", tmp_path / "missing.py"])
    assert result.files_scanned == 2  # c_flagged.py once, though named twice
    assert [(Path(f.path).name, f.line) for f in result.findings] == [
        ("c_flagged.py", 4),
        ("tool", 4),
    ]
    errors = {Path(e.path).name: e for e in result.errors}
    assert set(errors) == {"a_broken.py", "b_latin.py", "d_pipe.py", "missing.py"}
    assert errors["d_pipe.py"].message == "not a regular file"
    assert errors["a_broken.py"].line == 1 and "syntax error" in errors["a_broken.py"].message
    assert "no such file" in errors["missing.py"].message
    assert result.exit_code == 1


# ---- The command: exit codes and formats ---------------------------------------------------


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["lint", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result.exit_code, result.stdout, result.stderr


def test_exit_0_when_clean_1_with_findings(tmp_path: Path) -> None:
    clean = tmp_path / "clean.py"
    clean.write_text("x = 1\n")
    flagged = tmp_path / "flagged.py"
    flagged.write_text(ROUND_TRIP)
    code, out, _ = run(str(clean))
    assert (code, out.strip()) == (0, "no findings in 1 file scanned")
    code, out, _ = run(str(tmp_path))
    lines = out.strip().split("\n")
    assert code == 1
    assert lines[0].startswith(f"{flagged}:4:12: GP001 `pickle.loads(b)`")
    assert lines[0].endswith(f"(fix: {RULES['GP001'].fix})")
    assert lines[1] == "1 finding (GP001: 1) in 2 files scanned"


def test_exit_2_when_nothing_is_flagged_but_input_was_unreadable(tmp_path: Path) -> None:
    code, _, err = run(str(tmp_path / "missing.py"))
    assert code == 2 and f"{tmp_path / 'missing.py'}: error: no such file" in err
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1\ndef f(:\n")
    code, out, err = run(str(broken))
    assert code == 2
    assert f"{broken}:2: error: syntax error" in err
    assert "1 path could not be read or parsed" in out
    flagged = tmp_path / "flagged.py"
    flagged.write_text(ROUND_TRIP)
    code, _, err = run(str(broken), str(flagged))
    assert code == 1 and "syntax error" in err


def test_getter_options(tmp_path: Path) -> None:
    source = tmp_path / "route.py"
    source.write_text(
        "def f(rs):\n"
        "    s = sorted(rs, key=lambda r: len(r.input_token_ids) + len(r.tokens()))\n"
        "    return [(r.input_token_ids, r.tokens()) for r in s]\n"
    )
    code, out, _ = run(str(source), "--format", "json", "--getter", "tokens")
    assert code == 1
    assert {f["message"].split("`")[1] for f in json.loads(out)["findings"]} == {
        "input_token_ids",
        "tokens",
    }
    code, out, _ = run(
        str(source), "--format", "json", "--getter", "tokens", "--no-default-getters"
    )
    assert [f["message"].split("`")[1] for f in json.loads(out)["findings"]] == ["tokens"]
    assert run(str(source), "--no-default-getters")[0] == 0
    code, _, err = run(str(source), "--getter", "not a name")
    assert code == 2 and "--getter expects an attribute name" in err


def test_json_output(tmp_path: Path) -> None:
    (tmp_path / "flagged.py").write_text(ROUND_TRIP)
    (tmp_path / "broken.py").write_text("def f(:\n")
    code, out, _ = run(str(tmp_path), "--format", "json")
    document = json.loads(out)
    assert code == 1
    assert set(document) == {"schema", "findings", "files_scanned", "tests_skipped", "errors"}
    assert document["schema"] == SCHEMA == "gilprof.lint/1"
    assert document["files_scanned"] == 1
    (finding,) = document["findings"]
    assert finding == {
        "path": str(tmp_path / "flagged.py"),
        "line": 4,
        "col": 12,
        "rule": "GP001",
        "message": finding["message"],
        "fix": RULES["GP001"].fix,
        "level": "warning",
    }
    assert document["errors"] == [
        {
            "path": str(tmp_path / "broken.py"),
            "line": 1,
            "message": document["errors"][0]["message"],
        }
    ]


def assert_valid_sarif(document: dict) -> None:
    """The parts of SARIF 2.1.0 that code-scanning consumers require."""
    assert document["version"] == "2.1.0"
    assert document["$schema"].endswith("sarif-2.1.0.json")
    (run_,) = document["runs"]
    driver = run_["tool"]["driver"]
    assert driver["name"] == "gilprof"
    rule_ids = [rule["id"] for rule in driver["rules"]]
    assert rule_ids == sorted(RULES)
    for rule in driver["rules"]:
        assert (
            isinstance(rule["shortDescription"]["text"], str) and rule["shortDescription"]["text"]
        )
    for result in run_["results"]:
        assert result["ruleId"] in rule_ids
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] in ("none", "note", "warning", "error")
        assert result["message"]["text"]
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"]
        region = location["region"]
        assert isinstance(region["startLine"], int) and region["startLine"] >= 1
        assert isinstance(region["startColumn"], int) and region["startColumn"] >= 1


def test_sarif_output_is_valid_and_located(tmp_path: Path) -> None:
    (tmp_path / "flagged file.py").write_text(ROUND_TRIP)
    code, out, _ = run(str(tmp_path), "--format", "sarif")
    document = json.loads(out)
    assert code == 1
    assert_valid_sarif(document)
    (result,) = document["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"].startswith("file://")
    assert location["artifactLocation"]["uri"].endswith("/flagged%20file.py")
    assert location["region"] == {"startLine": 4, "startColumn": 12}


def test_sarif_relative_paths_stay_relative_and_errors_become_notifications(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("src").mkdir()
    Path("src/flagged.py").write_text(ROUND_TRIP)
    result = lint_paths(["./src", "gone.py"])
    document = json.loads(render("lint", "sarif", result))
    assert_valid_sarif(document)
    run_ = document["runs"][0]
    uri = run_["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "src/flagged.py"
    (notification,) = run_["invocations"][0]["toolExecutionNotifications"]
    assert notification["level"] == "error" and "no such file" in notification["message"]["text"]
    clean = json.loads(render("lint", "sarif", lint_paths([])))
    assert_valid_sarif(clean)
    assert clean["runs"][0]["results"] == []
