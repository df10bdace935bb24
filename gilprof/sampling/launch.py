"""Launch mode: start the job, wait for the wanted rank, and never leave the job orphaned."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Mapping, Sequence

from gilprof.errors import TargetError, UsageError, WaitInterrupted
from gilprof.sampling.discover import ProcessInfo, Selection, resolve_target
from gilprof.sampling.processes import Child


class LaunchedJob:
    """The job's launcher (mpiexec, srun, torchrun, a script) as gilprof's child.

    Own session: a terminal Ctrl-C reaches gilprof, which forwards it to the launcher as
    mpiexec forwards it to its ranks.
    """

    def __init__(
        self,
        argv: Sequence[str],
        stdout: int | None = None,
        stderr: int | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not argv:
            raise UsageError("no command to launch after `--`")
        try:
            self.child = Child(
                argv,
                group="session",
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                env=env,
            )
        except FileNotFoundError:
            raise UsageError(f"cannot launch {argv[0]!r}: command not found") from None
        except PermissionError:
            raise UsageError(f"cannot launch {argv[0]!r}: permission denied") from None
        self.argv = tuple(argv)
        self.proc = self.child.proc

    @property
    def pid(self) -> int:
        return self.child.pid

    def wait_for_rank(
        self,
        rank: int | None,
        selection: Selection,
        timeout: float,
        stop: threading.Event,
    ) -> ProcessInfo:
        deadline = time.monotonic() + timeout
        last_error = "no Python process started yet"
        candidate: ProcessInfo | None = None
        while time.monotonic() < deadline:
            if stop.is_set():
                raise WaitInterrupted(
                    "interrupted while waiting for the job's ranks: nothing sampled, no profile written"
                )
            if self.proc.poll() is not None:
                raise TargetError(
                    f"the job exited with code {self.proc.returncode} before "
                    f"rank {rank if rank is not None else 0} could be sampled"
                )
            try:
                found = resolve_target(pid=self.pid, rank=rank, selection=selection)
            except TargetError as exc:
                last_error, candidate = str(exc), None
            else:
                # The same answer twice, 0.1 s apart: a process caught mid-exec (its command
                # line unreadable for an instant, or a launcher before it renames itself)
                # can look like a plain Python process for one look, never for two.
                if candidate is not None and candidate.pid == found.pid:
                    return found
                candidate = found
            stop.wait(0.1)
        raise TargetError(
            f"timed out after {timeout:g} s waiting for the rank to start: {last_error}"
        )

    def forward(self, sig: int) -> None:
        self.child.forward(sig)

    def wait(self, timeout: float | None = None) -> int | None:
        return self.child.wait(timeout)

    def shutdown(self, grace: float = 10.0) -> int:
        """SIGTERM to the launcher, then SIGKILL to its whole process group."""
        return self.child.reap(grace)

    @property
    def exit_code(self) -> int:
        return self.child.exit_status
