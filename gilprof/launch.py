"""Launch mode: start the job, wait for the wanted rank, and never leave the job orphaned."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence

from gilprof.discover import ProcessInfo, resolve_target
from gilprof.errors import TargetError, UsageError
from gilprof.procs import die_with_parent


class LaunchedJob:
    def __init__(self, argv: Sequence[str], stdout: int | None = None,
                 stderr: int | None = None) -> None:
        if not argv:
            raise UsageError("no command to launch after `--`")
        try:
            # Own session: a terminal Ctrl-C reaches gilprof, which forwards it to the
            # launcher as mpiexec forwards it to its ranks.
            self.proc = subprocess.Popen(list(argv), start_new_session=True, stdin=subprocess.DEVNULL,
                                         stdout=stdout, stderr=stderr, preexec_fn=die_with_parent)
        except FileNotFoundError:
            raise UsageError(f"cannot launch {argv[0]!r}: command not found") from None
        except PermissionError:
            raise UsageError(f"cannot launch {argv[0]!r}: permission denied") from None
        self.argv = tuple(argv)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_for_rank(self, rank: int | None, match: str | None, timeout: float,
                      stop: threading.Event, parent_match: str | None = None) -> ProcessInfo:
        deadline = time.monotonic() + timeout
        last_error = "no Python process started yet"
        while time.monotonic() < deadline:
            if stop.is_set():
                raise TargetError("interrupted while waiting for the job's ranks")
            if self.proc.poll() is not None:
                raise TargetError(f"the job exited with code {self.proc.returncode} before "
                                  f"rank {rank if rank is not None else 0} could be sampled")
            try:
                return resolve_target(pid=self.pid, rank=rank, match=match,
                                      parent_match=parent_match)
            except TargetError as exc:
                last_error = str(exc)
            stop.wait(0.1)
        raise TargetError(f"timed out after {timeout:g} s waiting for the rank to start: {last_error}")

    def forward(self, sig: int) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def shutdown(self, grace: float = 10.0) -> int:
        """SIGTERM to the launcher, then SIGKILL to its whole process group."""
        if self.proc.poll() is None:
            self.forward(signal.SIGTERM)
            if self.wait(grace) is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode

    @property
    def exit_code(self) -> int:
        code = self.proc.returncode
        if code is None:
            return 0
        return 128 - code if code < 0 else code
