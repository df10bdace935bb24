"""`gilprof lint` as a user runs it: a real process, a project tree with its own pyproject table,
test code, the TensorRT-LLM before/after excerpts, and the documented exit codes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "unit" / "data" / "lint"


def gilprof_lint(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "gilprof", "lint", *map(str, args)]
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_project_tree_end_to_end(tmp_path: Path) -> None:
    project = tmp_path / "engine"
    (project / "engine" / "tests").mkdir(parents=True)
    for name in ("trtllm_communicator_before.py", "trtllm_bcast_before.py"):
        shutil.copy(DATA / name, project / "engine" / name)
    shutil.copy(DATA / "trtllm_communicator_before.py", project / "engine" / "tests" / "test_x.py")
    (project / "engine" / "router.py").write_text(
        "def route(rs):\n"
        "    s = sorted(rs, key=lambda r: len(r.beams))\n"
        "    return [r.beams for r in s]\n"
    )
    (project / "pyproject.toml").write_text('[tool.gilprof.lint]\ngetters = ["beams"]\n')
    done = gilprof_lint("engine", "--format", "json", cwd=project)
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    found = sorted((Path(f["path"]).name, f["rule"]) for f in document["findings"])
    assert found == [
        ("router.py", "GP002"),
        ("trtllm_bcast_before.py", "GP004"),
        ("trtllm_communicator_before.py", "GP001"),
        ("trtllm_communicator_before.py", "GP003"),
    ]
    assert document["tests_skipped"] == 1
    with_tests = json.loads(gilprof_lint("engine", "--include-tests", "--format", "json",
                                         cwd=project).stdout)  # fmt: skip
    notes = {(Path(f["path"]).name, f["level"]) for f in with_tests["findings"]}
    assert ("test_x.py", "note") in notes


def test_after_excerpts_are_clean_and_bad_input_is_one_line(tmp_path: Path) -> None:
    afters = sorted(DATA.glob("trtllm_*_after.py"))
    assert len(afters) == 3
    done = gilprof_lint(*afters, cwd=tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, "no findings in 3 files scanned")
    done = gilprof_lint(tmp_path / "missing", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("gilprof: error:")
    (tmp_path / "pyproject.toml").write_text("[tool.gilprof.lint]\ngetters = [1]\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    done = gilprof_lint(tmp_path, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"gilprof: error: {tmp_path / 'pyproject.toml'}: [tool.gilprof.lint] getters must be a "
        'list of attribute names, e.g. getters = ["input_token_ids"]'
    ]
