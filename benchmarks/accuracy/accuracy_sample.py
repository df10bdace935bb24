"""One accuracy measurement's processes: the target, `gilprof attach`, the CPU hogs of the
loaded scenario, and the lifetimes of the `py-spy record` processes that bound the truth.

`run.py` puts this folder and benchmarks/ on sys.path before importing this module.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _common
import psutil
import uprobe_truth
import workloads
from _common import BenchmarkError

from gilprof.profile import Profile

HERE = Path(__file__).resolve().parent
POLL_S = 0.02
HOG = "while True: pass"


@dataclass(frozen=True)
class Config:
    workload: str
    mode: str  # gil | contention | states
    rate: int
    seconds: float
    hogs: int = 0  # CPU-bound processes beside the target (the loaded scenario)
    realtime: bool = True  # False: gilprof without CAP_SYS_NICE, as a non-root user runs it

    @property
    def scenario(self) -> str:
        load = f"loaded ({self.hogs} hogs)" if self.hogs else "quiet"
        return load if self.realtime else f"{load}, sampler not RT"


def without_realtime(cmd: list[str]) -> list[str]:
    """`cmd` run without CAP_SYS_NICE: gilprof asks for SCHED_FIFO, the kernel refuses, and
    the sampler falls back to normal priority through the same path as for a non-root user
    (the profile then says "normal (SCHED_FIFO refused by the kernel)")."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise BenchmarkError("a sampler at normal priority needs setpriv (util-linux)")
    return [setpriv, "--bounding-set=-sys_nice", "--inh-caps=-sys_nice", *cmd]


class SamplerWatch(threading.Thread):
    """Lifetimes of the `py-spy record` processes started by one gilprof process."""

    def __init__(self, pid: int, nice: int | None) -> None:
        super().__init__(name="sampler-watch", daemon=True)
        self.pid = pid
        self.nice = nice
        self.windows: dict[int, list[float]] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            now = time.monotonic()
            try:
                children = psutil.Process(self.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                return
            for child in children:
                try:
                    if child.pid not in self.windows and "record" not in child.cmdline():
                        continue
                except psutil.Error:
                    continue
                if child.pid not in self.windows and self.nice is not None:
                    boost(child.pid, self.nice)  # py-spy runs in a session of its own
                self.windows.setdefault(child.pid, [now, now])[1] = now
            self.done.wait(POLL_S)

    def intervals(self) -> list[tuple[float, float]]:
        return sorted((a, b) for a, b in self.windows.values() if b > a)


def _gilprof(*args: str) -> list[str]:
    return [sys.executable, "-m", "gilprof", *args]


def _read_ready(proc: subprocess.Popen[bytes], timeout: float) -> None:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline().decode() if ready else ""
    if not line.startswith("ready"):
        raise BenchmarkError(f"target did not start: {line.strip() or 'no output'}")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


def boost(pid: int, nice: int) -> bool:
    """Raise the priority of the target's session (autogroup) over every other session.

    Linux schedules sessions fairly against each other (autogroup), so a plain `nice` does
    nothing against other users' jobs; the autogroup's own nice does. Root only.
    """
    try:
        with open(f"/proc/{pid}/autogroup", "w") as handle:
            handle.write(str(nice))
        return True
    except OSError:
        return False


@dataclass
class Sampled:
    report: dict[str, Any]  # `gilprof report --format json`
    record: dict[str, Any]  # what the target recorded
    sampled: list[tuple[float, float]]  # the sampled windows (CLOCK_MONOTONIC)
    unsampled: list[tuple[float, float]]  # target running, no gilprof process
    load_before: float
    load_after: float
    priority: str = ""  # the sampler's scheduling, as the profile records it
    messages: tuple[str, ...] = ()  # the profile's accuracy messages
    # states mode: take_gil/drop_gil events of the target over the whole attach (the exact
    # truth, uprobe_truth.py), or None with the reason bpftrace could not run
    gil_trace: uprobe_truth.GilTrace | None = None
    gil_trace_note: str = ""


def sample(
    config: Config, python: str, workdir: Path, nice: int | None, baseline_s: float
) -> Sampled:
    """Run one target and one `gilprof attach`, then `gilprof report` on the profile."""
    with hogs(config.hogs):
        return _sample(config, python, workdir, nice, baseline_s)


@contextlib.contextmanager
def hogs(count: int) -> Iterator[None]:
    """`count` CPU-bound processes, each in a session of its own (another user's job: Linux
    autogroups share the CPU between sessions), for the duration of the block."""
    started = [
        _common.start_in_session([sys.executable, "-c", HOG], stdout=None, stderr=None)
        for _ in range(count)
    ]
    try:
        if started:
            time.sleep(0.5)  # let the scheduler see them busy
        yield
    finally:
        for proc in started:
            _kill(proc)


def _sample(
    config: Config, python: str, workdir: Path, nice: int | None, baseline_s: float
) -> Sampled:
    target = _common.start_in_session(
        [
            python,
            str(HERE / "workloads.py"),
            config.workload,
            "--max-seconds",
            str(config.seconds + 300),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    attach: subprocess.Popen[bytes] | None = None
    trace: uprobe_truth.GilTrace | None = None
    trace_note = ""
    try:
        if nice is not None and not boost(target.pid, nice):
            raise BenchmarkError("--boost needs root and kernel.sched_autogroup_enabled=1")
        _read_ready(target, 30)
        ready = time.monotonic()
        time.sleep(baseline_s)
        load_before = os.getloadavg()[0]
        output = workdir / (
            f"{config.workload}-{config.mode}-{config.rate}-{config.seconds:g}-{config.hogs}.json"
        )
        if config.mode == "states":
            try:
                trace = uprobe_truth.start_trace(target.pid)
            except uprobe_truth.TruthError as exc:
                trace, trace_note = None, str(exc)
        launched = time.monotonic()
        attach_cmd = _gilprof(
            "attach",
            "--pid",
            str(target.pid),
            "-d",
            f"{config.seconds:g}",
            "-r",
            str(config.rate),
            "--mode",
            config.mode,
            "-q",
            "-o",
            str(output),
        )
        attach = subprocess.Popen(
            attach_cmd if config.realtime else without_realtime(attach_cmd),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=_common.child_env(),
        )
        watch = SamplerWatch(attach.pid, nice)
        watch.start()
        _, err = attach.communicate(timeout=config.seconds + 120)
        watch.done.set()
        watch.join()
        finished = time.monotonic()
        if trace is not None:
            trace.stop()
        load_after = os.getloadavg()[0]
        if attach.returncode != 0:
            raise BenchmarkError(f"gilprof attach failed: {err.decode().strip()[-300:]}")
        time.sleep(baseline_s)
        stopped = time.monotonic()
        out, err = target.communicate(timeout=60)  # closes stdin: the target stops and reports
        record = json.loads(out.decode().strip().splitlines()[-1])
    finally:
        if trace is not None:
            trace.stop()
        for proc in (attach, target):
            if proc is not None:
                _kill(proc)
    report_args = ["report", str(output), "--format", "json", "--no-default-watch"]
    for function in workloads.WATCHED:
        report_args += ["--watch", function]
    if config.mode in ("contention", "states"):
        report_args.append("--contention")
    report = subprocess.run(
        _gilprof(*report_args), capture_output=True, env=_common.child_env(), timeout=120
    )
    if report.returncode != 0:
        raise BenchmarkError(f"gilprof report failed: {report.stderr.decode().strip()[-300:]}")
    loaded = Profile.load(output)
    sampling = loaded.sampling
    origin = sampling.origin_monotonic
    # the profile's windows on CLOCK_MONOTONIC where it records them (the default mode runs
    # no py-spy record process); else the py-spy processes' lifetimes
    sampled = (
        [(origin + w.t0, origin + w.t1) for w in loaded.windows]
        if origin is not None
        else watch.intervals()
    )
    if not sampled:
        raise BenchmarkError("no sampled window: no window clock in the profile, no py-spy seen")
    unsampled = [(ready + 0.2, launched), (finished + 0.1, stopped)]
    return Sampled(
        json.loads(report.stdout),
        record,
        sampled,
        unsampled,
        load_before,
        load_after,
        sampling.priority,
        sampling.messages,
        trace,
        trace_note,
    )
