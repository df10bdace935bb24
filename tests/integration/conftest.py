"""Helpers for tests that run real processes: interpreters, mpiexec, gilprof as a subprocess."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = Path(__file__).resolve().parent / "workloads"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# Target interpreters: pyenv's on these machines; any other python3.X on PATH elsewhere.
PYENV_VERSIONS = Path(os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))) / "versions"


def interpreter(minor: str) -> str | None:
    """A python3.<minor> executable, or None."""
    if PYENV_VERSIONS.is_dir():
        for version in sorted(PYENV_VERSIONS.iterdir(), reverse=True):
            if version.name.startswith(f"3.{minor}."):
                exe = version / "bin" / "python3"
                if exe.exists():
                    return str(exe)
    return shutil.which(f"python3.{minor}")


def require_interpreter(minor: str) -> str:
    exe = interpreter(minor)
    if exe is None:
        if IN_CI:
            pytest.fail(f"python3.{minor} is required in CI on these machines but was not found")
        pytest.skip(f"python3.{minor} not installed here")
    return exe


def require_tool(name: str) -> str:
    from gilprof.sampling.processes import find_binary

    try:
        path = find_binary("mpiexec") if name == "mpiexec" else shutil.which(name)
    except Exception:
        path = None
    if not path:
        if IN_CI:
            pytest.fail(f"{name} is required in CI but was not found")
        pytest.skip(f"{name} not available")
    return path


def gilprof_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "gilprof", *args]


def kill_tree(proc: subprocess.Popen) -> None:
    try:
        parent = psutil.Process(proc.pid)
        procs = [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        procs = []
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


@pytest.fixture
def spawn() -> Iterator:
    """Start processes that are killed, with all their descendants, when the test ends."""
    started: list[subprocess.Popen] = []

    def start(cmd: list[str], **kwargs) -> subprocess.Popen:
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        kwargs.setdefault("cwd", str(ROOT))
        proc = subprocess.Popen(cmd, **kwargs)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            kill_tree(proc)


def wait_for(predicate, timeout: float, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return None
