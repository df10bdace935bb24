from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from gilprof.errors import TargetError
from gilprof.redact import REDACTED, redact_cmdline
from gilprof.sampling.discover import (
    KEPT_VARIABLES,
    RANK_VARIABLES,
    Selection,
    own_pids,
    resolve_target,
)
from gilprof.sampling.discover.identify import _first_int
from gilprof.sampling.processes import child_process


def test_mpi_rank_variable_wins_over_inherited_slurm_procid():
    env = {"SLURM_PROCID": "0", "PMI_RANK": "3"}
    assert _first_int(env, RANK_VARIABLES) == (3, "PMI_RANK")
    assert _first_int({"RANK": "5"}, RANK_VARIABLES) == (5, "RANK")
    assert _first_int({"RANK": "x"}, RANK_VARIABLES) == (None, None)


def test_redaction_keeps_names_and_drops_values():
    args = [
        "python",
        "serve.py",
        "--api-key",
        "sk-123",
        "--token=abc",
        "HF_TOKEN=hf_x",
        "MY_KEY=v",
        "--model",
        "llama",
        "--port",
        "8000",
    ]
    assert redact_cmdline(args) == (
        "python",
        "serve.py",
        "--api-key",
        REDACTED,
        f"--token={REDACTED}",
        f"HF_TOKEN={REDACTED}",
        f"MY_KEY={REDACTED}",
        "--model",
        "llama",
        "--port",
        "8000",
    )


def test_resolve_missing_pid():
    with pytest.raises(TargetError, match="no process with PID"):
        resolve_target(pid=2**22 + 12345)


def test_resolve_never_selects_this_process():
    with pytest.raises(TargetError, match="is this gilprof process"):
        resolve_target(pid=os.getpid())


def _wait_for_command_line(pid: int) -> None:
    """Popen returns once exec has closed the child's CLOEXEC pipe, which the kernel does
    before it sets up the new argument area: for a moment /proc/PID/cmdline reads empty, and
    resolve_target then rightly says "cannot be read yet" (seen once in a CI run)."""
    deadline = time.monotonic() + 10
    while not psutil.Process(pid).cmdline() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_resolve_a_python_child_and_keep_only_rank_and_role_variables():
    env = {**os.environ, "PMI_RANK": "3", "GILPROF_ROLE": "Generation", "SECRET_TOKEN": "x"}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        _wait_for_command_line(child.pid)
        info = resolve_target(pid=child.pid, selection=Selection(role="gen"))
        assert (info.pid, info.rank, info.rank_source) == (child.pid, 3, "PMI_RANK")
        assert (info.role, info.role_source) == ("gen", "GILPROF_ROLE")
        assert info.rank_env == {"PMI_RANK": "3", "GILPROF_ROLE": "Generation"}
        assert set(info.rank_env) <= KEPT_VARIABLES
        with pytest.raises(TargetError, match=r"no Python process of role ctx .*roles seen: gen"):
            resolve_target(pid=child.pid, selection=Selection(role="ctx"))
    finally:
        child.kill()
        child.wait()


def test_own_pids_are_this_process_its_ancestors_and_its_children():
    with child_process([sys.executable, "-c", "import time; time.sleep(30)"]) as child:
        own = own_pids()
        assert {os.getpid(), os.getppid(), child.pid} <= own
        assert all(p.pid in own for p in psutil.Process().parents())
    assert child.pid not in own_pids()
