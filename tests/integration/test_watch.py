"""`gilprof watch` against a real step loop: signal and threshold triggers, --max-captures,
SIGKILL, failing writes, an unwritable -o."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gilprof.profile import Profile

from .conftest import WORKLOADS, gilprof_cmd, read_pid, report_json, wait_for

pytestmark = pytest.mark.integration

STEP_LOOP = str(WORKLOADS / "step_log_workload.py")


class Job:
    """The step loop and `gilprof watch` on it, stderr in a file to read while it runs."""

    def __init__(self, spawn, tmp: Path, *watch_args: str) -> None:
        self.log, self.flag, self.out = tmp / "steps.log", tmp / "slow.flag", tmp / "caps"
        pidfile = tmp / "pid"
        self.loop = spawn([sys.executable, STEP_LOOP, str(self.log), str(self.flag), str(pidfile)])
        self.pid = wait_for(lambda: read_pid(pidfile), 20)
        assert self.pid, "the step loop did not start"
        self.err = tmp / "watch.err"
        cmd = ["watch", "--pid", str(self.pid), "-o", str(self.out), "--window", "0.5", "-q"]
        self.watch = spawn(gilprof_cmd(*cmd, *watch_args), stderr=open(self.err, "wb"))  # noqa: SIM115 - the child owns it
        assert wait_for(lambda: "recording pid" in self.stderr(), 30), self.stderr()

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def captures(self) -> list[Path]:
        return sorted(self.out.glob("capture-*.json"))

    def wait_captures(self, n: int, timeout: float = 30) -> list[Path]:
        assert wait_for(lambda: len(self.captures()) >= n, timeout), self.stderr()
        return self.captures()


def messages(path: Path) -> list[str]:
    return list(Profile.load(path).sampling.messages)


def test_sigusr1_writes_a_capture_and_sigkill_leaves_it_readable(spawn, tmp_path):
    job = Job(spawn, tmp_path, "--keep", "30s", "--after", "1s")
    wait_for(lambda: False, 1.5)  # a few windows kept
    job.watch.send_signal(signal.SIGUSR1)
    (capture,) = job.wait_captures(1)
    assert capture.name.startswith("capture-1-signal-")
    samplers = [p.pid for p in psutil.Process(job.watch.pid).children(recursive=True)]
    job.watch.send_signal(signal.SIGKILL)
    job.watch.wait(10)
    profile = Profile.load(capture)  # whole: written atomically before the kill
    # The loop sleeps ~99% of each step: its idle time is kept as spans (state runs), and a
    # window may hold no on-CPU sample at all, so the capture's content is read from both.
    assert profile.windows and all(w.counts or w.spans for w in profile.windows)
    assert any("trigger signal" in m and "SIGUSR1" in m for m in messages(capture))
    assert not [f for f in job.out.iterdir() if not f.name.startswith("capture-")]
    # its py-spy processes die with it (PR_SET_PDEATHSIG)
    assert wait_for(lambda: not any(psutil.pid_exists(p) for p in samplers), 10)
    shown = report_json(capture)
    assert any("trigger signal" in m for m in shown["sampling"]["messages"])


def test_threshold_fires_on_the_slow_phase_only_and_max_captures_exits(spawn, tmp_path):
    log = tmp_path / "steps.log"
    job = Job(
        spawn,
        tmp_path,
        *("--steps-log", str(log), "--trigger", "p50>50", "--over", "5"),
        *("--keep", "20s", "--after", "1s", "--max-captures", "1"),
    )
    # steady steps (10 ms) for a few windows: nothing written
    assert wait_for(lambda: job.watch.poll() is not None, 3) is None
    assert job.captures() == []
    job.flag.touch()
    assert job.watch.wait(30) == 0, job.stderr()
    (capture,) = job.captures()
    assert capture.name.startswith("capture-1-steps-")
    notes = messages(capture)
    assert any("p50 over the last 5 iterations 100.0 ms > 50.0 ms" in m for m in notes)
    assert any(m.startswith("log before trigger: iter =") and "100.00ms" in m for m in notes)
    profile = Profile.load(capture)
    names = {f.name for f in profile.frames}
    assert "slow_phase" in names  # sampled after the trigger
    assert "1 captures written (--max-captures)" in job.stderr()


def test_a_failed_write_is_one_line_and_the_recorder_goes_on(spawn, tmp_path):
    job = Job(spawn, tmp_path, "--keep", "10s", "--after", "0.5s", "--min-gap", "0")
    job.out.rmdir()
    job.out.write_text("in the way")
    job.watch.send_signal(signal.SIGUSR1)
    assert wait_for(lambda: "capture 1 not written" in job.stderr(), 20), job.stderr()
    assert job.watch.poll() is None
    job.out.unlink()
    job.out.mkdir()
    job.watch.send_signal(signal.SIGUSR1)
    (capture,) = job.wait_captures(1)
    assert capture.name.startswith("capture-2-signal-")
    job.watch.send_signal(signal.SIGTERM)
    assert job.watch.wait(20) == 143
    assert "Traceback" not in job.stderr()
    final = [p for p in job.captures() if "-terminate-" in p.name]
    assert final and Profile.load(final[0]).sampling.partial


def test_unwritable_output_folder_is_exit_2_before_sampling(spawn, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = subprocess.run(
        gilprof_cmd("watch", "--pid", str(os.getpid()), "-o", str(blocker / "caps"), "-q"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot write" in lines[0], done.stderr  # no traceback


def test_ctrl_c_pressed_again_while_watch_writes_still_exits_130(spawn, tmp_path):
    """SIGINT ends the recording with a capture of what is kept; more Ctrl-C while that capture
    is written must not turn the exit into Python's -2 or a traceback."""
    job = Job(spawn, tmp_path, "--keep", "30s")
    time.sleep(1.5)  # a few windows kept
    for _ in range(3):
        if job.watch.poll() is not None:
            break
        job.watch.send_signal(signal.SIGINT)
        time.sleep(0.05)
    assert job.watch.wait(timeout=30) == 130, job.stderr()
    assert "Traceback" not in job.stderr()
    (capture,) = job.captures()
    assert "-interrupt-" in capture.name
    assert Profile.load(capture).windows
