"""mpi4py lowercase bcast before/after (gilprof.reference.bcast) under real `mpiexec`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gilprof.reference.bcast import bcast_after

from .conftest import require_tool

SCRIPT = Path(__file__).parent / "mpi_scripts" / "bcast_check.py"
REPO_ROOT = Path(__file__).resolve().parents[2]
CHECKS = ("single_rank_and_impls", "shapes", "root_failure", "receiver_failure", "equivalent")
LINE = re.compile(r"^rank=(\d+) check=(\w+) (ok|FAIL)(.*)$", re.MULTILINE)


def _run(ranks: int, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mpi4py")
    mpiexec = require_tool("mpiexec")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    argv = [mpiexec, "-n", str(ranks), sys.executable, str(SCRIPT)]
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"mpiexec -n {ranks} did not finish within {timeout:.0f}s")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


@pytest.mark.integration
@pytest.mark.parametrize("ranks", [2, 4])
def test_bcast_variants_agree_off_the_root_on_every_rank(ranks: int) -> None:
    result = _run(ranks)
    seen = {(int(m[1]), m[2]): (m[3], m[4]) for m in LINE.finditer(result.stdout)}
    failed = {key: detail for key, (status, detail) in seen.items() if status != "ok"}
    assert not failed, failed
    assert set(seen) == {(rank, check) for rank in range(ranks) for check in CHECKS}, (
        result.stdout + result.stderr
    )
    for rank in range(ranks):
        assert f"rank={rank} size={ranks} done failures=0" in result.stdout
    assert result.returncode == 0, result.stderr


def test_bcast_after_needs_no_mpi_without_a_communicator() -> None:
    payload = {"tokens": [1, 2, 3]}
    assert bcast_after(None, payload) is payload
