"""Processes gilprof starts or inspects: finding binaries, starting children, reaping them.

One rule for every child (a sampler, a launched job, the command of `gilprof exec`, the
demo's server): the kernel signals it when gilprof dies, even by SIGKILL
(PR_SET_PDEATHSIG), and gilprof kills whatever is still running of it on the way out, so no
process gilprof started outlives it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

import psutil

from gilprof.errors import SamplerError

_PR_SET_PDEATHSIG = 1

# How to install each binary gilprof runs, for the error that says it is missing.
INSTALL_HINTS = {
    "py-spy": "install it with `pip install py-spy`",
    "austin": "install austin 3.x with `pip install austin-dist==3.7.0`",
    "mpiexec": "install the MPI extra with `pip install 'gilprof[mpi]'`",
}


def find_binary(name: str) -> str:
    """Path of an executable: this interpreter's scripts folder first, then PATH.

    The interpreter's own folder first: that is where pip put the wheel's binary (py-spy,
    austin-dist, mpich's mpiexec), and pyenv's shim on PATH would put a bash process between
    gilprof and the binary.
    """
    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which(name)
    if not found:
        hint = INSTALL_HINTS.get(name, "install it or put it on PATH")
        raise SamplerError(f"{name} not found: {hint}")
    return found


def die_with_parent() -> None:
    """preexec_fn: the kernel sends SIGTERM to the child if gilprof dies, even by SIGKILL."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def exit_status(returncode: int | None) -> int:
    """A child's return code as a shell reports it: killed by signal N gives 128 + N."""
    if returncode is None:
        return 0
    return 128 - returncode if returncode < 0 else returncode


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


def _open_descriptors() -> dict[int, tuple[int, int]]:
    """Open descriptors above stderr that a child could inherit, by (device, inode)."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:  # no /proc: nothing is known to have been inherited
        return {}
    found = {}
    for name in names:
        fd = int(name)
        if fd <= 2:
            continue
        try:
            # Python opens its own descriptors non-inheritable (PEP 446): one without
            # FD_CLOEXEC came through exec from whoever started gilprof.
            if not os.get_inheritable(fd):
                continue
            info = os.fstat(fd)
        except OSError:  # the listing's own descriptor, already closed
            continue
        found[fd] = (info.st_dev, info.st_ino)
    return found


# Recorded when gilprof starts, before it opens anything of its own.
_INHERITED_AT_START = _open_descriptors()


def inherited_fds() -> tuple[int, ...]:
    """Descriptors the launcher handed gilprof that are still open and still the same file,
    e.g. mpich hydra's PMI connection (PMI_FD): a rank's command must inherit them."""
    now = _open_descriptors()
    return tuple(sorted(fd for fd, ident in _INHERITED_AT_START.items() if now.get(fd) == ident))


_live: set[Child] = set()
_live_lock = threading.Lock()


def started_pids() -> frozenset[int]:
    """PIDs of the children gilprof started and has not reaped: never targets themselves."""
    with _live_lock:
        return frozenset(child.pid for child in _live)


class Child:
    """A process gilprof started, registered until reaped.

    `group`: "same" keeps gilprof's process group; "new" gives the child a group of its own
    (a terminal's Ctrl-C then reaches gilprof only, which forwards it); "session" also
    detaches it from the terminal. `pass_fds` keeps descriptors the child must inherit
    (mpich hydra hands each rank its PMI connection as one, named by PMI_FD).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        group: str = "same",
        stdin: int | IO[Any] | None = None,
        stdout: int | IO[Any] | None = None,
        stderr: int | IO[Any] | None = None,
        pass_fds: Sequence[int] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> None:
        if group not in ("same", "new", "session"):
            raise ValueError(f"unknown process group choice {group!r}")
        self.argv = tuple(argv)
        self.group = group

        def in_child() -> None:
            if group == "new":
                os.setpgid(0, 0)
            die_with_parent()

        self.proc: subprocess.Popen[bytes] = subprocess.Popen(
            list(argv),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            pass_fds=tuple(pass_fds),
            start_new_session=group == "session",
            preexec_fn=in_child,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
        with _live_lock:
            _live.add(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    @property
    def exit_status(self) -> int:
        return exit_status(self.proc.returncode)

    def forward(self, sig: int) -> None:
        """Pass a signal gilprof received on to the child, if it still runs."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def wait(self, timeout: float | None = None) -> int | None:
        """The return code, or None if the child still runs after `timeout` seconds."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._forget()
        return code

    def reap(self, grace: float = 0.0, first: int = signal.SIGTERM) -> int:
        """Stop the child: `first` (unless grace is 0), then SIGKILL to its whole group."""
        if self.proc.poll() is None and grace > 0:
            self.forward(first)
            self.wait(grace)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if self.group == "same":
                    self.proc.kill()
                else:
                    os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        self._forget()
        return self.exit_status

    def _forget(self) -> None:
        with _live_lock:
            _live.discard(self)


@contextlib.contextmanager
def child_process(argv: Sequence[str], **kwargs: Any) -> Iterator[Child]:
    """A Child that is killed (with its group) when the block ends, however it ends."""
    child = Child(argv, **kwargs)
    try:
        yield child
    finally:
        child.reap()
