"""Shared fixtures. The autouse guard fails any test that leaves a sampler process behind."""

from __future__ import annotations

import contextlib
import os
import signal
import time

import psutil
import pytest

SAMPLER_NAMES = ("py-spy", "austin")


def _ours(proc: psutil.Process) -> bool:
    """Started by this test run: a descendant of pytest, or an orphan (its gilprof died)."""
    try:
        if proc.ppid() == 1:
            return True
        return any(p.pid == os.getpid() for p in proc.parents())
    except psutil.Error:
        return False


def _sampler_pids() -> set[int]:
    found = set()
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            name = proc.info["name"] or ""
            cmd = proc.info["cmdline"] or []
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        first = os.path.basename(cmd[0]) if cmd else ""
        if (name in SAMPLER_NAMES or first in SAMPLER_NAMES) and _ours(proc):
            found.add(proc.pid)
    return found


@pytest.fixture(autouse=True)
def no_leftover_samplers():
    before = _sampler_pids()
    yield
    deadline = time.monotonic() + 3.0
    leftovers = _sampler_pids() - before
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.1)
        leftovers = _sampler_pids() - before
    for pid in leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not leftovers, f"test left sampler processes behind: {sorted(leftovers)}"
