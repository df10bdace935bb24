"""Locating the MPI launcher that ships with the `mpich` wheel."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

from gilprof.errors import UsageError


def find_mpiexec() -> str:
    """Path of `mpiexec`: next to this interpreter first (the mpich wheel's), then PATH."""
    candidates = [
        os.path.join(sysconfig.get_path("scripts"), "mpiexec"),
        os.path.join(os.path.dirname(sys.executable), "mpiexec"),
    ]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which("mpiexec")
    if found:
        return found
    raise UsageError("mpiexec not found: install the MPI extra with `pip install 'gilprof[mpi]'`")
