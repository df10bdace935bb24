"""Rank 0 of the generation instance: two real jobs on one host, one per role.

Each job is started as TensorRT-LLM starts an instance, under `start_worker.sh <GEN|CTX> <id>`,
which runs `mpiexec -n 2 python app.py` (mpi4py collectives). Both jobs have a rank 0.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gilprof.profile import Profile

from .conftest import WORKLOADS, gilprof_ps, require_tool, run_gilprof, wait_for

pytestmark = pytest.mark.integration

START_WORKER = """#!/bin/bash
# start_worker.sh <CTX|GEN> <instance id>: one instance of a disaggregated deployment
role=$1
instance=$2
{mpiexec} -n 2 {python} {app} --seconds 30 --work 2000 --pause 0.1 --pidfile {folder}/$role.$instance
exit $?
"""


def _pids(folder: Path, names: list[str]) -> dict[str, int] | None:
    files = {name: folder / name for name in names}
    if all(f.exists() and f.read_text() for f in files.values()):
        return {name: int(f.read_text()) for name, f in files.items()}
    return None


def _attach(*args: str) -> subprocess.CompletedProcess[str]:
    return run_gilprof("attach", "-d", "0.5", "-q", *args)


def test_rank0_of_the_gen_instance_among_two_jobs(tmp_path, spawn):
    mpiexec = require_tool("mpiexec")
    app = tmp_path / "app.py"
    shutil.copy(WORKLOADS / "mpi_collectives.py", app)
    script = tmp_path / "start_worker.sh"
    script.write_text(
        START_WORKER.format(
            mpiexec=shlex.quote(mpiexec),
            app=shlex.quote(str(app)),
            python=shlex.quote(sys.executable),
            folder=shlex.quote(str(tmp_path)),
        )
    )
    for role in ("GEN", "CTX"):
        spawn(["bash", str(script), role, "0"], stdin=subprocess.DEVNULL)
    pids = wait_for(lambda: _pids(tmp_path, ["GEN.0.0", "GEN.0.1", "CTX.0.0", "CTX.0.1"]), 30)
    assert pids, "the two jobs did not start"
    only_these = ["--match", re.escape(str(app))]  # other jobs may run on a shared test machine

    rows = {r["pid"]: r for r in gilprof_ps()}
    for name, pid in pids.items():
        assert rows[pid]["role"] == name[:3].lower(), rows[pid]
        assert rows[pid]["role_source"].startswith("start_worker.sh argument (pid ")

    for role in ("gen", "ctx"):
        out = tmp_path / f"{role}.json"
        done = _attach("--rank", "0", "--role", role, "-o", str(out), *only_these)
        assert done.returncode == 0, done.stderr
        target = Profile.load(out).target
        assert target.pid == pids[f"{role.upper()}.0.0"]
        assert (target.rank, target.role) == (0, role)
        assert target.role_source.startswith("start_worker.sh argument (pid ")

    # --ranks honours the role too
    done = _attach("--ranks", "all", "--role", "GEN", "-o", str(tmp_path / "gen"), *only_these)
    assert done.returncode == 0, done.stderr
    sampled = sorted(Profile.load(p).target.pid for p in (tmp_path / "gen").iterdir())
    assert sampled == sorted([pids["GEN.0.0"], pids["GEN.0.1"]])

    done = _attach("--rank", "0", "-o", str(tmp_path / "any.json"), *only_these)
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("gilprof: error: 2 Python processes qualify")
    for role in ("gen", "ctx"):
        assert f"pid {pids[role.upper() + '.0.0']} rank 0 role {role} " in done.stderr
    assert "--role" in done.stderr and not (tmp_path / "any.json").exists()
