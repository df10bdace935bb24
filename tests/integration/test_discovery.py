"""Ranks are found wherever they run, and gilprof never selects itself (by PID, not by name)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from gilprof.profile import Profile

from .conftest import SPINNER, WORKLOADS, gilprof_cmd, gilprof_ps, run_gilprof, start_ranks

pytestmark = pytest.mark.integration
# mpi_collectives.py: rounds of collectives for 30 s, light work and a pause in each
APP_ARGS = ("--seconds", "30", "--work", "2000", "--pause", "0.1")


def _app_in_a_folder_named_gilprof(tmp_path: Path) -> str:
    # Before, any process with "gilprof" in its first arguments was taken for gilprof itself.
    folder = tmp_path / "gilprof work"
    folder.mkdir()
    app = folder / "app.py"
    shutil.copy(WORKLOADS / "mpi_collectives.py", app)
    return str(app)


def test_ranks_of_an_app_under_a_path_named_gilprof(tmp_path, spawn):
    app = _app_in_a_folder_named_gilprof(tmp_path)
    job, pids = start_ranks(spawn, 4, sys.executable, app, *APP_ARGS, prefix=tmp_path / "pid")
    rows = {r["pid"]: r for r in gilprof_ps() if r["pid"] in pids.values()}
    assert {pid: rows[pid]["rank"] for pid in rows} == {pid: r for r, pid in pids.items()}

    out = tmp_path / "rank2.json"
    # --job: other jobs may run on a shared test machine
    done = run_gilprof(
        "attach", "--job", str(job.pid), "--rank", "2", "-d", "1", "-q", "-o", str(out)
    )
    assert done.returncode == 0, done.stderr
    target = Profile.load(out).target
    assert (target.pid, target.rank) == (pids[2], 2)


def test_rank_under_gilprof_exec_is_the_child_not_gilprof(tmp_path, spawn):
    app = _app_in_a_folder_named_gilprof(tmp_path)
    exec_rank0 = gilprof_cmd("exec", "--ranks", "0", "-q", "-o", str(tmp_path / "prof"), "--")
    _, pids = start_ranks(
        spawn, 2, *exec_rank0, sys.executable, app, *APP_ARGS, prefix=tmp_path / "pid"
    )
    exec_pid = psutil.Process(pids[0]).ppid()  # gilprof exec, sampling rank 0
    listed = gilprof_ps()
    launcher = next(r["launcher_pid"] for r in listed if r["pid"] == pids[1])
    rows = [r for r in listed if r["launcher_pid"] == launcher]  # this job's, on a shared host
    assert sorted((r["rank"], r["pid"]) for r in rows) == [(0, pids[0]), (1, pids[1])]
    assert exec_pid not in {r["pid"] for r in rows}


def _attach_to_own_shell(tmp_path: Path, before: str) -> subprocess.CompletedProcess[str]:
    """`gilprof attach --pid $$` from a shell (not its last command, so bash does not exec it)."""
    attach = shlex.join(
        gilprof_cmd("attach", "--pid", "SHELL", "-d", "1", "-q", "-o", str(tmp_path / "out.json"))
    ).replace("SHELL", "$$")
    script = f"{before}{attach}; code=$?; kill %1 2>/dev/null; exit $code"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


def test_attach_to_own_shell_with_no_other_python_is_an_error(tmp_path):
    done = _attach_to_own_shell(tmp_path, "")
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("gilprof: error: ") and "Traceback" not in done.stderr
    assert "no Python descendants other than gilprof itself" in done.stderr
    assert not (tmp_path / "out.json").exists()


def test_attach_to_own_shell_selects_the_other_python(tmp_path):
    spin, pidfile = tmp_path / "spin.py", tmp_path / "spin.pid"
    spin.write_text(SPINNER)
    before = (
        f"{shlex.quote(sys.executable)} {shlex.quote(str(spin))} {shlex.quote(str(pidfile))} & "
        f"while [ ! -s {shlex.quote(str(pidfile))} ]; do sleep 0.05; done; "
    )
    done = _attach_to_own_shell(tmp_path, before)
    assert done.returncode == 0, done.stderr
    assert Profile.load(tmp_path / "out.json").target.pid == int(pidfile.read_text())
