"""Child-process hygiene: nothing gilprof starts may outlive it."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import re
import signal

import psutil

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """preexec_fn: the kernel sends SIGTERM to the child if gilprof dies, even by SIGKILL."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def python_version_of(pid: int) -> str:
    """The target's Python version from its executable or mapped libpython; "" if unknown."""
    try:
        proc = psutil.Process(pid)
        candidates = [proc.exe()]
    except (psutil.Error, OSError):
        return ""
    with contextlib.suppress(psutil.Error, OSError):
        candidates += [m.path for m in proc.memory_maps(grouped=True) if "python" in m.path]
    for path in candidates:
        found = re.search(r"versions/(\d+\.\d+\.\d+)", path)
        if found:
            return found.group(1)
    for path in candidates:
        found = re.search(r"python(\d+\.\d+)", os.path.basename(path))
        if found:
            return found.group(1)
    return ""
