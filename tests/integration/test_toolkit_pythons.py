"""gilprof itself on the oldest and newest supported interpreters (3.10 and 3.13).

The rest of the suite runs gilprof on the CI interpreter; here its runtime dependencies are
installed into a scratch folder for another interpreter, and the file-based commands run there.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import IN_CI, ROOT, require_interpreter

pytestmark = pytest.mark.integration
RUNTIME_DEPS = ["click>=8.1", "psutil>=5.9", "rich>=13", "tomli>=2.0"]


@pytest.mark.parametrize("minor", ["10", "13"])
def test_file_commands_run_on_other_interpreters(tmp_path, minor):
    python = require_interpreter(minor)
    deps = tmp_path / "deps"
    install = subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--target",
            str(deps),
            *RUNTIME_DEPS,
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    if install.returncode != 0:
        message = f"cannot install gilprof's dependencies for 3.{minor}: {install.stderr[-300:]}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    env = {"PYTHONPATH": f"{ROOT}:{deps}", "PATH": "/usr/bin:/bin"}

    sys.path.insert(0, str(ROOT))
    from tests.unit.builders import make_profile, sample

    profile = tmp_path / "p.json"
    make_profile(
        [(100, [sample("executor-loop", "loop", "safe_broadcast", count=25, tid=1)])] * 3
    ).save(profile)
    log = tmp_path / "steps.log"
    log.write_text(
        "".join(
            f"iter = {i}, global_rank = 0, rank = 0, host_step_time = {100 + i % 3}.0ms, "
            f"prev_device_step_time = {'N/A' if i == 0 else f'{99 + i % 3}.0ms'}, "
            "num_scheduled_requests: 8, states = {}\n"
            for i in range(20)
        )
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [python, "-m", "gilprof", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )

    report = run("report", str(profile), "--format", "json")
    assert report.returncode == 0, report.stderr
    watch = {w["function"]: w for w in json.loads(report.stdout)["watch"]}
    assert watch["safe_broadcast"]["total_share"] == pytest.approx(0.25)

    steps = run("steps", str(log), "--format", "json")
    assert steps.returncode == 0, steps.stderr
    assert json.loads(steps.stdout)["ranks"][0]["reading"] == "device~host"

    compare = run("compare", str(profile), str(profile), "--format", "json")
    assert compare.returncode == 0, compare.stderr

    lint = run("lint", str(ROOT / "gilprof" / "reference"), "--format", "json")
    assert lint.returncode == 1, lint.stderr
    rules = {f["rule"] for f in json.loads(lint.stdout)["findings"]}
    assert rules == {"GP001", "GP002", "GP003"}

    recipes = run("recipes", "--json")
    assert recipes.returncode == 0, recipes.stderr
    assert sys.version_info  # the CI interpreter is untouched by this test
