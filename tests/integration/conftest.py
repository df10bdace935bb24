"""Helpers for tests that run real processes: interpreters, mpiexec, gilprof as a subprocess."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = Path(__file__).resolve().parent / "workloads"
MPI_SCRIPTS = Path(__file__).resolve().parent / "mpi_scripts"
GIL_WORKLOAD = str(WORKLOADS / "gil_workload.py")
# gil_workload.py with less work per round: light enough for several ranks on 2 cores
LIGHT = ["--broadcast-work", "4000", "--route-work", "2000", "--ingress-work", "2000"]
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


def require_mpi() -> str:
    """mpiexec, for jobs whose ranks import mpi4py."""
    mpiexec = require_tool("mpiexec")
    pytest.importorskip("mpi4py")
    return mpiexec


def accuracy_runner() -> ModuleType:
    """benchmarks/accuracy/run.py, loaded once as `gilprof_accuracy_run` (which puts its
    folder on sys.path, so its sibling modules import by name after it)."""
    name = "gilprof_accuracy_run"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, ROOT / "benchmarks" / "accuracy" / "run.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# Tolerance of an absolute share, in points of wall time: Z binomial standard errors of the
# truth p at n ticks (py-spy draws its ticks at random intervals, so ticks are independent
# draws of the state), plus the residual bias each test documents. Z = 4: a test file asserts
# ~20 shares, and at 4 SE the chance that sampling noise alone fails one is ~1e-3.
SHARE_Z = 4.0
# contention mode: py-spy cannot name some frames, so part of a GIL wait comes out
# "unclassified", and the target's clock reads come out "native"; gilprof reports both per
# thread, and a thread's held and wait shares may each miss by what it reported there. On top,
# 2 points: pausing the target at every tick stretches the state it paused (docs/accuracy.md).
CONTENTION_MARGIN = 0.02
# ...and contention-mode ticks are not independent draws: pausing the target at every tick
# ties a tick's state to the last one's, so shares spread more than a binomial error from run
# to run. `python benchmarks/accuracy/spread.py` (12 runs of 4 s at 100 Hz, two spinners,
# quiet, 2026-12-03): held share minus the middle of its truth band, SD 3.6 points against a
# binomial 2.4 (mean -2.2, worst 7.5). The standard error is scaled by that ratio. (Beside
# 2 CPU hogs, `--hogs 2`: SD 5.0 around the middle, but the bands there are 20-35 points wide
# and the errors are distances to the band.)
CONTENTION_SPREAD = 1.5


def share_tolerance(truth: float, ticks: float, margin: float, spread: float = 1.0) -> float:
    return SHARE_Z * spread * math.sqrt(truth * (1 - truth) / ticks) + margin


def accuracy_module(name: str) -> ModuleType:
    """A sibling module of benchmarks/accuracy/run.py (accuracy_sample, accuracy_compare, ...),
    imported by name once accuracy_runner() has put their folder on sys.path."""
    accuracy_runner()
    return importlib.import_module(name)


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


def end_running(proc: subprocess.Popen, what: str = "") -> None:
    """A target whose capture is done: it must still be running (or have ended cleanly), and
    is then killed with its children, rather than waited for to the end of its --duration
    (what each test would spend idle; CI has 15 minutes in all)."""
    code = proc.poll()
    assert code in (None, 0), f"the target exited {code} during the capture {what}"[:4000]
    kill_tree(proc)


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


# ---------------------------------------------------------------------------------------
# Targets: workloads, MPI jobs, PID files

# Spins in the main thread for 30 s after writing its PID to argv[1]: py-spy sees it hold the
# GIL, and it has no other thread that would keep it alive after a KeyboardInterrupt.
SPINNER = (
    "import os, sys, time\n"
    "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
    "end = time.monotonic() + 30\n"
    "while time.monotonic() < end:\n"
    "    sum(i * i for i in range(2000))\n"
)


def light_workload(seconds: float, *args: str) -> list[str]:
    """The argv of gil_workload.py with LIGHT work for `seconds`."""
    return [sys.executable, GIL_WORKLOAD, "--duration", str(seconds), *args, *LIGHT]


def start_target(spawn, argv: list[str], settle: float = 0.5) -> subprocess.Popen:
    """Start a target and give its interpreter `settle` seconds to start its threads."""
    target = spawn(argv)
    time.sleep(settle)
    return target


def read_pid(path: Path) -> int | None:
    """The PID a target wrote to `path`, None until it has."""
    return int(path.read_text()) if path.exists() and path.read_text() else None


def read_pidfiles(prefix: Path, n: int) -> dict[int, int] | None:
    """{rank: pid} once each of n ranks wrote `<prefix>.<rank>`, else None."""
    files = {r: Path(f"{prefix}.{r}") for r in range(n)}
    if all(f.exists() and f.read_text() for f in files.values()):
        return {r: int(f.read_text()) for r, f in files.items()}
    return None


def start_ranks(
    spawn, n: int, *command: str, prefix: Path
) -> tuple[subprocess.Popen, dict[int, int]]:
    """`mpiexec -n N COMMAND --pidfile PREFIX`, once every rank wrote its PID: (job, {rank: pid})."""
    mpiexec = require_tool("mpiexec")
    job = spawn(
        [mpiexec, "-n", str(n), *command, "--pidfile", str(prefix)], stdin=subprocess.DEVNULL
    )
    pids = wait_for(lambda: read_pidfiles(prefix, n), timeout=30)
    # the job's stderr only once it has ended: reading a running job's pipe would block
    assert pids, f"the {n} ranks did not start: " + (
        "no PID files after 30 s" if job.poll() is None else job.stderr.read().decode()[-2000:]
    )
    return job, pids


def pyspy_children(pid: int) -> list[int]:
    """The py-spy processes below `pid` (gilprof's samplers)."""
    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True) if c.name() == "py-spy"]
    except psutil.NoSuchProcess:
        return []


def running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def still_running(pids: Iterable[int]) -> list[int]:
    """Those of `pids` that are still running."""
    return [p for p in pids if running(p)]


def samplers_of(proc: subprocess.Popen, timeout: float = 10.0) -> list[int]:
    """gilprof's py-spy processes (`proc` is gilprof); the test fails when none runs within
    `timeout`. Waited for: between two windows one py-spy has exited and the next not yet
    started."""
    samplers = wait_for(lambda: pyspy_children(proc.pid), timeout)
    assert samplers, "py-spy was not running as gilprof's child"
    return samplers


# ---------------------------------------------------------------------------------------
# gilprof: as a subprocess, in-process, and its results


def attach(spawn, pid: int, out: Path, *args: str) -> subprocess.Popen:
    """`gilprof attach --pid PID ARGS -q -o OUT`, running."""
    return spawn(gilprof_cmd("attach", "--pid", str(pid), *args, "-q", "-o", str(out)))


def launch(
    spawn, out: Path, ranks: int, *argv: str, options: Sequence[str] = ()
) -> subprocess.Popen:
    """`gilprof attach --rank 0 OPTIONS -q -o OUT -- mpiexec -n RANKS ARGV` (launch mode), running."""
    mpiexec = require_tool("mpiexec")
    return spawn(
        gilprof_cmd(
            *("attach", "--rank", "0", *options, "-q", "-o", str(out)),
            *("--", mpiexec, "-n", str(ranks), *argv),
        )
    )


def assert_exits(proc: subprocess.Popen, code: int = 0, timeout: float = 60) -> None:
    """`proc` exits with `code` within `timeout` s, else its stderr fails the test."""
    assert proc.wait(timeout=timeout) == code, proc.stderr.read().decode()


def output_of(proc: subprocess.Popen, timeout: float = 60) -> bytes:
    """What a spawned process printed, once it exited 0 (else its stderr fails the test)."""
    stdout, stderr = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, stderr.decode(errors="replace")
    return stdout


def gilprof_stdout(spawn, *args: str, timeout: float = 60) -> str:
    """What `gilprof ARGS` printed, once it exited 0."""
    return output_of(spawn(gilprof_cmd(*args)), timeout).decode()


def run_gilprof(
    *args: str, prefix: Sequence[str] = (), timeout: float = 60, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """`[PREFIX] gilprof ARGS` to completion from the repository root, its output as text."""
    return subprocess.run(
        [*prefix, *gilprof_cmd(*args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(ROOT),
        **kwargs,
    )


def no_rank_env() -> dict[str, str]:
    """This environment without any rank variable (PMI_RANK, ...): a process of no job."""
    from gilprof.sampling.discover import RANK_VARIABLES

    return {k: v for k, v in os.environ.items() if k not in RANK_VARIABLES}


def gilprof_ps() -> list[dict]:
    """`gilprof ps --format json`: one row per Python process on this host."""
    return json.loads(run_gilprof("ps", "--format", "json", timeout=30, check=True).stdout)


def run_cli(*args: str | Path, **kwargs: Any):
    """gilprof in-process (click's runner): quicker, and the same code path."""
    from click.testing import CliRunner

    from gilprof.cli.main import cli

    return CliRunner().invoke(cli, [str(a) for a in args], **kwargs)


def sample_count(profile: dict) -> int:
    """The samples of a profile as a dict (`Profile.to_dict()`): every window's counts."""
    return sum(c for w in profile["windows"] for _, c in w["counts"])


def report_json(profile: Path) -> dict:
    """`gilprof report PROFILE --format json`, in-process."""
    result = run_cli("report", profile, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # a warning goes to stderr, beside the document


def run_in_session(
    argv: list[str], *, timeout: float, what: str, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """Run `argv` to completion in a session of its own, whose every process is killed if
    it outlives `timeout` (which fails the test)."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} did not finish within {timeout:g} s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def repo_pythonpath() -> dict[str, str]:
    """This environment with the repository first on PYTHONPATH (for scripts run elsewhere)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


CHECK_LINE = re.compile(r"^rank=(\d+) check=(\w+) (ok|FAIL)(.*)$", re.MULTILINE)


def assert_every_rank_passes(script: str, checks: Sequence[str], ranks: int, timeout: float):
    """Run mpi_scripts/SCRIPT under `mpiexec -n RANKS`: each rank must report each check ok."""
    argv = [require_mpi(), "-n", str(ranks), sys.executable, str(MPI_SCRIPTS / script)]
    result = run_in_session(
        argv, timeout=timeout, what=f"mpiexec -n {ranks} {script}", env=repo_pythonpath()
    )
    seen = {(int(m[1]), m[2]): (m[3], m[4]) for m in CHECK_LINE.finditer(result.stdout)}
    failed = {key: detail for key, (status, detail) in seen.items() if status != "ok"}
    assert not failed, failed
    assert set(seen) == {(rank, check) for rank in range(ranks) for check in checks}, (
        result.stdout + result.stderr
    )
    for rank in range(ranks):
        assert f"rank={rank} size={ranks} done failures=0" in result.stdout
    assert result.returncode == 0, result.stderr
