"""`gilprof exec` under a real mpiexec and as a single process: who samples, who execs, exit codes."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gilprof.profile import Profile
from gilprof.sampling.discover import RANK_VARIABLES

from .conftest import (
    GIL_WORKLOAD,
    ROOT,
    SPINNER,
    WORKLOADS,
    gilprof_cmd,
    light_workload,
    no_rank_env,
    read_pid,
    read_pidfiles,
    require_tool,
    run_gilprof,
    start_ranks,
    wait_for,
)

pytestmark = pytest.mark.integration


def _exec_rank0(out: Path, *command: str) -> list[str]:
    """`gilprof exec --ranks 0 -o OUT -- COMMAND`: rank 0 sampled, the others exec'd."""
    return gilprof_cmd("exec", "--ranks", "0", "-o", str(out), "--", *command)


def test_rank0_sampled_as_child_other_ranks_exec_directly(tmp_path, spawn):
    out = tmp_path / "prof"
    workload = light_workload(4, "--exit-code", "3")
    job, pids = start_ranks(spawn, 4, *_exec_rank0(out, *workload), prefix=tmp_path / "pid")
    parents = {r: psutil.Process(pid).parent() for r, pid in pids.items()}
    for rank in (1, 2, 3):
        # the process mpiexec's proxy started is the workload itself: gilprof exec'd it
        assert parents[rank].name() == "hydra_pmi_proxy", (rank, parents[rank].cmdline())
        assert psutil.Process(pids[rank]).cmdline()[1] == GIL_WORKLOAD
    rank0_parent = parents[0].cmdline()
    assert "gilprof" in rank0_parent and "exec" in rank0_parent, rank0_parent
    assert parents[0].parent().name() == "hydra_pmi_proxy"

    assert job.wait(timeout=60) == 3, job.stderr.read().decode()[-2000:]
    stderr = job.stderr.read().decode()
    assert "no rank variable" not in stderr  # every rank found PMI_RANK
    files = sorted(p.name for p in out.iterdir())
    assert files == [f"rank0-{pids[0]}.json"], files
    profile = Profile.load(out / files[0])
    assert profile.target.pid == pids[0]
    assert (profile.target.rank, profile.target.rank_source) == (0, "PMI_RANK")
    assert profile.sampling.partial is False  # sampled until the command exited
    assert sum(profile.total_counts().values()) > 0


def test_sigterm_is_forwarded_and_exit_status_passes_through(tmp_path, spawn):
    sig, status = signal.SIGTERM, 143
    pidfile, out = tmp_path / "child.pid", tmp_path / "prof"
    # stdin not a terminal: as under a launcher, the child gets its own process group
    run = spawn(
        gilprof_cmd("exec", "-o", str(out), "--", sys.executable, "-c", SPINNER, str(pidfile)),
        env=no_rank_env(),
        stdin=subprocess.DEVNULL,
    )
    child = wait_for(lambda: read_pid(pidfile), timeout=30)
    assert child, run.stderr.read().decode()
    assert psutil.Process(child).ppid() == run.pid
    assert os.getpgid(child) != os.getpgid(run.pid)  # so the signal reaches it once, from gilprof
    profile_path = out / f"rank0-{child}.json"
    # sample for a while: the profile is on disk from its first window's start (the default
    # mode runs no py-spy whose start could be waited for)
    assert wait_for(profile_path.exists, 20), run.stderr.read().decode()
    time.sleep(2.5)
    run.send_signal(sig)
    assert run.wait(timeout=30) == status, run.stderr.read().decode()
    stderr = run.stderr.read().decode()
    assert "no rank variable set" in stderr and "running as rank 0" in stderr
    assert f"killed by {sig.name}" in stderr
    assert not psutil.pid_exists(child)
    profile = Profile.load(profile_path)
    assert profile.target.pid == child
    assert profile.sampling.partial is True
    assert profile.sampling.partial_reason.startswith("interrupted")
    assert sum(profile.total_counts().values()) > 20


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_gilprof(*args, env=no_rank_env(), stdin=subprocess.DEVNULL)


def _error_line(result: subprocess.CompletedProcess[str]) -> str:
    errors = [ln for ln in result.stderr.splitlines() if "error" in ln]
    assert "Traceback" not in result.stderr
    assert len(errors) == 1, result.stderr
    return errors[0]


def _run_here(monkeypatch, *args: str) -> subprocess.CompletedProcess[str]:
    """In-process, for errors raised before any command could replace this process."""
    from click.testing import CliRunner

    from gilprof.cli.main import cli

    for name in RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(cli, list(args))
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def test_command_errors_are_one_line_with_shell_codes(tmp_path, monkeypatch):
    missing = _run_here(monkeypatch, "exec", "-o", str(tmp_path))
    assert missing.returncode == 2
    assert "no command given" in _error_line(missing)

    not_found = _run("exec", "-o", str(tmp_path), "--", "no-such-command-gilprof")
    assert not_found.returncode == 127
    assert "'no-such-command-gilprof': command not found" in _error_line(not_found)

    # an unselected rank execs the command itself: the same error, the same code
    unselected = _run("exec", "--ranks", "1", "--", "no-such-command-gilprof")
    assert unselected.returncode == 127
    assert "command not found" in _error_line(unselected)

    not_executable = _run_here(monkeypatch, "exec", "-o", str(tmp_path), "--", str(tmp_path))
    assert not_executable.returncode == 126
    assert "permission denied" in _error_line(not_executable)

    bad_ranks = _run_here(monkeypatch, "exec", "--ranks", "zero", "--", "true")
    assert bad_ranks.returncode == 2
    assert "--ranks" in _error_line(bad_ranks)
    assert list(tmp_path.iterdir()) == []  # no profile for commands that never ran


# Counts the SIGINTs it gets, then exits 1.5 s after the first one (a server shutting down).
# Python runs a handler once for signals that arrive close together; the wakeup fd gets one
# byte per delivery.
COUNTS_SIGINT = (
    "import os, signal, sys, time\n"
    "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
    "got = []\n"
    "signal.signal(signal.SIGINT, lambda *_: got.append(time.monotonic()))\n"
    "r, w = os.pipe()\n"
    "os.set_blocking(w, False)\n"
    "signal.set_wakeup_fd(w)\n"
    "end = time.monotonic() + 30\n"
    "while time.monotonic() < end and not (got and time.monotonic() > got[0] + 1.5):\n"
    "    sum(i * i for i in range(2000))\n"
    "open(sys.argv[2], 'w').write(str(len(os.read(r, 100))))\n"
    "sys.exit(130)\n"
)


def _read_until_exit(fd: int, pid: int, seconds: float) -> tuple[bytes, int | None]:
    out, deadline, open_ = b"", time.monotonic() + seconds, True
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd] if open_ else [], [], [], 0.1)
        if ready:
            try:
                out += os.read(fd, 4096)
            except OSError:  # EIO: the terminal's last user has gone
                open_ = False
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return out, os.waitstatus_to_exitcode(status)
    return out, None


def test_ctrl_c_in_a_terminal_reaches_the_command_once(tmp_path):
    """Interactive: the command shares the terminal's foreground group, so the terminal's
    Ctrl-C reaches it directly; gilprof must not send a second SIGINT on top."""
    pidfile, out, counted = tmp_path / "child.pid", tmp_path / "prof", tmp_path / "sigints"
    argv = gilprof_cmd(
        "exec",
        "-o",
        str(out),
        "--",
        sys.executable,
        "-c",
        COUNTS_SIGINT,
        str(pidfile),
        str(counted),
    )
    pid, fd = pty.fork()
    if pid == 0:  # the child: become gilprof on the new terminal
        try:
            os.chdir(ROOT)
            os.execvpe(argv[0], argv, no_rank_env())
        finally:
            os._exit(127)
    try:
        child = wait_for(lambda: read_pid(pidfile), timeout=30)
        assert child
        assert os.getpgid(child) == os.getpgid(pid)  # in the terminal's foreground group
        time.sleep(2.5)
        os.write(fd, b"\x03")  # Ctrl-C typed at the terminal
        text, status = _read_until_exit(fd, pid, 30)
        assert status == 130, text.decode(errors="replace")
        assert counted.read_text() == "1"
        profile = Profile.load(out / f"rank0-{child}.json")
        assert profile.sampling.partial_reason.startswith("interrupted")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        os.close(fd)


def test_mpi_app_under_exec_initialises_mpi_and_the_job_completes(tmp_path, spawn):
    """The sampled rank's child inherits hydra's PMI_FD: before, PMI_Init failed and the job hung."""
    mpiexec = require_tool("mpiexec")
    prefix, out = tmp_path / "pid", tmp_path / "prof"
    app = str(WORKLOADS / "mpi_collectives.py")
    workload = (sys.executable, app, "--seconds", "2", "--pidfile", str(prefix), "--exit-code", "0")
    job = spawn([mpiexec, "-n", "4", *_exec_rank0(out, *workload)], stdin=subprocess.DEVNULL)
    try:
        code = job.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the MPI job hung under gilprof exec")
    stdout, stderr = job.stdout.read().decode(), job.stderr.read().decode()
    assert code == 0, stderr[-2000:]
    assert "rank 0:" in stdout and "on 4 ranks" in stdout, stdout
    pids = read_pidfiles(prefix, 4)
    assert pids, stderr[-2000:]
    files = sorted(p.name for p in out.iterdir())
    assert files == [f"rank0-{pids[0]}.json"], files
    profile = Profile.load(out / files[0])
    assert (profile.target.pid, profile.target.rank) == (pids[0], 0)
    assert sum(profile.total_counts().values()) > 0
