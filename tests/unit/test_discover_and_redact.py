from __future__ import annotations

import os

import psutil
import pytest

from gilprof.errors import TargetError
from gilprof.redact import REDACTED, redact_cmdline
from gilprof.sampling.discover import RANK_VARIABLES, _first_int, resolve_target


def test_mpi_rank_variable_wins_over_inherited_slurm_procid():
    env = {"SLURM_PROCID": "0", "PMI_RANK": "3"}
    assert _first_int(env, RANK_VARIABLES) == (3, "PMI_RANK")
    assert _first_int({"RANK": "5"}, RANK_VARIABLES) == (5, "RANK")
    assert _first_int({"RANK": "x"}, RANK_VARIABLES) == (None, None)


def test_redaction_keeps_names_and_drops_values():
    args = ["python", "serve.py", "--api-key", "sk-123", "--token=abc", "HF_TOKEN=hf_x",
            "MY_KEY=v", "--model", "llama", "--port", "8000"]
    assert redact_cmdline(args) == ("python", "serve.py", "--api-key", REDACTED,
                                    f"--token={REDACTED}", f"HF_TOKEN={REDACTED}",
                                    f"MY_KEY={REDACTED}", "--model", "llama", "--port", "8000")


def test_resolve_missing_pid():
    with pytest.raises(TargetError, match="no process with PID"):
        resolve_target(pid=2**22 + 12345)


def test_resolve_own_python_process():
    info = resolve_target(pid=os.getpid())
    assert info.pid == os.getpid() and info.is_python
    assert set(info.rank_env) <= set(psutil.Process().environ())
