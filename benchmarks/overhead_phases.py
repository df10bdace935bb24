"""The measured side of overhead.py: the example job, rank 0's iteration log, and one
phase (unsampled, or one `gilprof attach` run timed by the life of its `py-spy record`
children). overhead.py schedules the phases and summarizes them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import _common
from _common import BenchmarkError

_common.ensure_gilprof_importable()

import psutil  # noqa: E402

from gilprof.errors import GilprofError  # noqa: E402
from gilprof.profile import Profile  # noqa: E402
from gilprof.sampling.discover import resolve_target  # noqa: E402
from gilprof.sampling.processes import die_with_parent, find_binary  # noqa: E402
from gilprof.steps import StepParser  # noqa: E402

SERVER = _common.REPO_ROOT / "examples" / "disagg_gen" / "server.py"
POLL_S = 0.02


@dataclass(frozen=True)
class Config:
    key: str
    label: str
    rate_hz: int | None  # None: no sampler
    blocking: bool = False
    mode: str = "gil"  # gilprof's --mode


CONFIGS = (
    Config("none", "no sampler", None),
    Config("100st", "100 Hz states (default)", 100, mode="states"),
    Config("100nb", "100 Hz gil non-blocking", 100),
    Config("100b", "100 Hz gil blocking", 100, True),
    Config("1000nb", "1000 Hz gil non-blocking", 1000),
    Config("1000b", "1000 Hz gil blocking", 1000, True),
)


@dataclass(frozen=True)
class TimedStep:
    seen_at: float  # time.monotonic() when the line was read
    iteration: int
    host_ms: float

    @property
    def started_at(self) -> float:
        return self.seen_at - self.host_ms / 1e3


class StepLogTail:
    """Follows rank 0's iteration log and stamps each line with the time it was read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._records: list[TimedStep] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._parser = StepParser()
        self._thread = threading.Thread(target=self._run, name="log-tail", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def records(self) -> list[TimedStep]:
        with self._lock:
            return list(self._records)

    def _run(self) -> None:
        while not self.path.exists():
            if self._stop.wait(POLL_S):
                return
        buffer = b""
        with open(self.path, "rb") as handle:
            while not self._stop.is_set():
                chunk = handle.read()
                if not chunk:
                    self._stop.wait(POLL_S)
                    continue
                now = time.monotonic()
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for raw in lines:
                    record = self._parser.parse_line(raw.decode("utf-8", "replace"))
                    if record is not None:
                        with self._lock:
                            self._records.append(
                                TimedStep(now, record.iteration, record.host_step_ms)
                            )


class ExampleJob:
    """The example job under mpiexec, in its own session so that it can be stopped whole."""

    def __init__(self, ranks: int, impl: str, loop_seconds: float, workdir: Path) -> None:
        if not SERVER.is_file():
            raise BenchmarkError(f"example job {SERVER} not found")
        self.log_path = workdir / "rank0-iterations.log"
        self.output_path = workdir / "job-output.txt"
        argv = [
            find_binary("mpiexec"),
            "-n",
            str(ranks),
            sys.executable,
            str(SERVER),
            "--impl",
            impl,
            "--duration",
            f"{loop_seconds:g}",
            "--log-file",
            str(self.log_path),
        ]
        self.display = (
            f"mpiexec -n {ranks} python examples/disagg_gen/server.py --impl {impl} "
            f"--duration {loop_seconds:g} --log-file LOG"
        )
        with open(self.output_path, "wb") as output:
            self.proc = _common.start_in_session(
                argv,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=_common.child_env(),
                preexec_fn=die_with_parent,
            )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rank0_pid(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        last = "no rank started yet"
        while time.monotonic() < deadline:
            if not self.alive():
                raise BenchmarkError(
                    f"the job exited (code {self.proc.returncode}) before rank 0 "
                    f"started: {self.output_tail()}"
                )
            try:
                return resolve_target(pid=self.proc.pid, rank=0).pid
            except GilprofError as exc:
                last = str(exc)
            time.sleep(0.1)
        raise BenchmarkError(f"rank 0 did not start within {timeout:g} s: {last}")

    def output_tail(self) -> str:
        try:
            lines = self.output_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no output"
        return " | ".join(lines[-3:]) or "no output"

    def stop(self) -> None:
        try:
            members = [
                psutil.Process(self.proc.pid),
                *psutil.Process(self.proc.pid).children(recursive=True),
            ]
        except psutil.NoSuchProcess:
            members = []
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        _, alive = psutil.wait_procs(members, timeout=5)
        for member in alive:
            with suppress(psutil.NoSuchProcess):
                member.kill()
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


def rotated_schedule(unsampled: Config, sampled: list[Config], rounds: int) -> list[Config]:
    """Each round: unsampled, then the sampled configurations rotated one place per round so
    that no configuration always follows the same one; one more unsampled phase at the end."""
    order: list[Config] = []
    for r in range(rounds):
        shift = r % len(sampled)
        order += [unsampled, *sampled[shift:], *sampled[:shift]]
    return [*order, unsampled]


class SamplerWatch:
    """When the `py-spy record` children of one gilprof process ran, and their CPU time.

    Each recorder's CPU time is read from /proc at every poll; what it spends after the
    last poll (at most one poll interval) is missed.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.first: float | None = None
        self.last: float | None = None
        self._recorders: set[int] = set()
        self._cpu_ticks: dict[int, int] = {}

    @property
    def cpu_seconds(self) -> float:
        return sum(self._cpu_ticks.values()) / os.sysconf("SC_CLK_TCK")

    def poll(self) -> None:
        now = time.monotonic()
        running = [child for child in self._children() if self._recorder(child)]
        for child in running:
            ticks = _cpu_ticks(child)
            if ticks is not None:
                self._cpu_ticks[child] = ticks
        if running:
            self.first = now if self.first is None else self.first
            self.last = now

    def _children(self) -> list[int]:
        # The kernel's per-thread list costs one small read; psutil would scan all of /proc.
        try:
            text = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text()
            return [int(x) for x in text.split()]
        except FileNotFoundError:
            with suppress(psutil.NoSuchProcess):
                return [c.pid for c in psutil.Process(self.pid).children()]
            return []
        except OSError:
            return []

    def _recorder(self, pid: int) -> bool:
        # Only positive answers are kept: a child read between fork and exec still shows
        # gilprof's own command line.
        if pid in self._recorders:
            return True
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        if b"record" in argv and any(a.endswith(b"py-spy") for a in argv):
            self._recorders.add(pid)
            return True
        return False


def _cpu_ticks(pid: int) -> int | None:
    """utime + stime of a process, in clock ticks (fields 14 and 15 of /proc/PID/stat)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


@dataclass
class Phase:
    config: Config
    start: float
    end: float
    samples: int | None = None
    windows: int | None = None
    errors: int | None = None
    attach_cpu_s: float | None = None  # gilprof attach and its py-spy runs
    pyspy_cpu_s: float | None = None
    reader_cost: str = ""  # states mode: the profile's "thread-state reader: ..." message
    steps: list[TimedStep] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def host_ms(self) -> list[float]:
        return [s.host_ms for s in self.steps]


def attach_command(config: Config, pid: int, seconds: float, output: Path) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "gilprof",
        "attach",
        "--pid",
        str(pid),
        "-d",
        f"{seconds:g}",
        "-q",
        "-o",
        str(output),
        "--rate",
        str(config.rate_hz),
        "--mode",
        config.mode,
    ]
    return [*cmd, "--blocking"] if config.blocking else cmd


def run_phase(config: Config, rank0: int, seconds: float, workdir: Path) -> Phase:
    if config.rate_hz is None:
        start = time.monotonic()
        time.sleep(seconds)
        return Phase(config, start, time.monotonic())
    output = workdir / f"{config.key}.json"
    errors = workdir / f"{config.key}.stderr"
    with open(errors, "wb") as stderr:
        proc = subprocess.Popen(
            attach_command(config, rank0, seconds, output),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=_common.child_env(),
            preexec_fn=die_with_parent,
        )
    watch = SamplerWatch(proc.pid)
    try:
        code, usage = _common.wait_with_rusage(
            proc, timeout=seconds * 3 + 60, poll=POLL_S, on_poll=watch.poll
        )
    finally:
        if proc.returncode is None:  # interrupted: gilprof stops its py-spy on SIGTERM
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    profile = Profile.load(output) if code == 0 else None
    origin = profile.sampling.origin_monotonic if profile is not None else None
    if profile is not None and origin is not None and profile.windows:
        # the profile's windows on CLOCK_MONOTONIC (the default mode starts no py-spy)
        watch.first = origin + profile.windows[0].t0
        watch.last = origin + profile.windows[-1].t1
    if profile is None or watch.first is None or watch.last is None:
        message = errors.read_text(errors="replace").strip().splitlines()
        raise BenchmarkError(
            f"`gilprof attach` ({config.label}) failed with exit code {code}: "
            f"{message[-1] if message else 'no output'}"
        )
    return Phase(
        config,
        watch.first,
        watch.last,
        samples=profile.sampling.samples,
        windows=len(profile.windows),
        errors=profile.sampling.errors,
        attach_cpu_s=usage.ru_utime + usage.ru_stime,
        pyspy_cpu_s=watch.cpu_seconds,
        reader_cost=next(
            (m for m in profile.sampling.messages if m.startswith("thread-state reader")), ""
        ),
    )
