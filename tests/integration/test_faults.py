"""Faults, for real: a rank killed mid-run, Ctrl-C in attach and in launch mode, no ptrace
permission, bad -o, a full disk, gilprof itself SIGKILLed."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gilprof.errors import InputError
from gilprof.profile import Profile
from gilprof.sampling.discover import RANK_VARIABLES

from .conftest import (
    GIL_WORKLOAD,
    assert_exits,
    attach,
    gilprof_cmd,
    launch,
    light_workload,
    no_rank_env,
    pyspy_children,
    read_pidfiles,
    require_tool,
    run_cli,
    run_gilprof,
    sample_count,
    samplers_of,
    start_ranks,
    start_target,
    still_running,
    wait_for,
)

pytestmark = pytest.mark.integration
IS_ROOT = os.geteuid() == 0


def _loaded(path: Path) -> Profile | None:
    """The profile as `report` would read it now, None while there is none (or only a header)."""
    try:
        return Profile.load(path)
    except InputError:
        return None


def _finished(path: Path) -> bool:
    profile = _loaded(path)
    return profile is not None and "without its footer" not in (
        profile.sampling.partial_reason or ""
    )


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith("gilprof: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def test_rank_killed_mid_run_gives_partial_profile_and_exit_6(tmp_path, spawn):
    out = tmp_path / "rank0.json"
    job, pids = start_ranks(spawn, 4, *light_workload(30), prefix=tmp_path / "pid")
    run = spawn(
        gilprof_cmd(
            *("attach", "--job", str(job.pid), "--rank", "0", "-d", "20", "--lines"),
            *("-q", "-o", str(out)),
        )
    )  # --lines: py-spy samples each window, the child that must not outlive gilprof
    assert wait_for(lambda: pyspy_children(run.pid), timeout=30), run.stderr.read().decode()
    time.sleep(2.5)  # at least one complete window
    os.kill(pids[0], signal.SIGKILL)
    assert_exits(run, 6, timeout=30)
    stderr = run.stderr.read().decode()
    assert "PARTIAL: target exited after" in stderr, stderr
    profile = Profile.load(out).to_dict()
    assert profile["target"]["pid"] == pids[0]
    sampling = profile["sampling"]
    assert sampling["partial"] is True
    assert sampling["partial_reason"].startswith("target exited after")
    assert sampling["partial_reason"].endswith("of 20 s")
    assert 0.0 < sampling["duration_s"] < 15.0
    assert sample_count(profile) > 0


@pytest.mark.parametrize("first_s", [0.3, 0.5, 0.8, 1.5])  # after the interpreter starts
def test_ctrl_c_pressed_three_times_early_still_exits_130(tmp_path, spawn, first_s):
    """Ctrl-C while gilprof starts (before or as sampling begins), pressed again while it
    unwinds: one exit status, 130, never Python's -2 nor a traceback."""
    target = start_target(spawn, [sys.executable, GIL_WORKLOAD, "--duration", "30"])
    run = attach(spawn, target.pid, tmp_path / "p.json", "-d", "10")
    time.sleep(first_s)
    for _ in range(3):
        if run.poll() is not None:
            break
        run.send_signal(signal.SIGINT)
        time.sleep(0.05)
    assert_exits(run, 130, timeout=30)
    assert "Traceback" not in run.stderr.read().decode()


def test_sigint_writes_partial_profile_and_leaves_no_sampler(tmp_path, spawn):
    target = start_target(spawn, [sys.executable, GIL_WORKLOAD, "--duration", "30"])
    out = tmp_path / "p.json"
    run = attach(spawn, target.pid, out, "--lines")  # a py-spy child each window
    # let at least one window complete, then interrupt mid-window
    time.sleep(3.0)
    samplers = samplers_of(run)
    run.send_signal(signal.SIGINT)
    assert_exits(run, 130, timeout=30)
    profile = Profile.load(out).to_dict()
    assert profile["sampling"]["partial"] is True
    assert "interrupted" in profile["sampling"]["partial_reason"]
    assert sample_count(profile) > 50
    assert not still_running(samplers)
    assert target.poll() is None  # the target itself is left alone


def test_sigint_in_launch_mode_reaches_the_job_and_leaves_nothing_behind(tmp_path, spawn):
    prefix, out = tmp_path / "pid", tmp_path / "launched.json"
    run = launch(spawn, out, 2, *light_workload(30, "--pidfile", str(prefix)), options=["--lines"])
    pids = wait_for(lambda: read_pidfiles(prefix, 2), timeout=30)
    assert pids, "the job's ranks did not start"
    assert wait_for(lambda: pyspy_children(run.pid), timeout=30)
    time.sleep(2.5)
    samplers = samplers_of(run)
    run.send_signal(signal.SIGINT)
    # sampling stops at once and the profile is finished (its footer written) while the job
    # shuts down
    assert wait_for(lambda: _finished(out), timeout=15), "no finished profile after SIGINT"
    # mpiexec passed the Ctrl-C on to the ranks; these ignore it (their threads keep running),
    # and as with mpiexec itself a second Ctrl-C aborts the job
    time.sleep(0.5)
    assert run.poll() is None
    run.send_signal(signal.SIGINT)
    code = run.wait(timeout=30)
    stderr, stdout = run.stderr.read().decode(), run.stdout.read().decode()
    assert code != 0, stderr  # the job's exit status: it was aborted
    assert "Sending Ctrl-C to processes" in stdout, stdout  # mpiexec got the first SIGINT
    # and a rank got it (the abort may cut off the other's traceback on a loaded machine)
    assert "KeyboardInterrupt" in stderr, stderr
    assert wait_for(lambda: not still_running(pids.values()), timeout=15), (
        f"ranks survived gilprof: {pids}"
    )
    assert not still_running(samplers), samplers
    profile = Profile.load(out).to_dict()
    assert profile["target"]["pid"] == pids[0]
    assert profile["sampling"]["partial"] is True
    assert profile["sampling"]["partial_reason"].startswith("interrupted")


# Without ptrace permission. As root: drop CAP_SYS_PTRACE from gilprof's bounding set (a
# container without SYS_PTRACE) and sample a root process that still holds every capability;
# the kernel refuses since the target has capabilities gilprof lacks. (Running as uid 65534
# is no option here: the interpreters live under /root, which that user cannot enter.) Not
# root: make the target non-dumpable, which refuses ptrace to anyone without CAP_SYS_PTRACE.
NOT_DUMPABLE = (
    "import ctypes, runpy, sys; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def _without(*capabilities: str) -> list[str]:
    """A command prefix that runs gilprof without these capabilities (root only)."""
    if not IS_ROOT:
        return []
    setpriv = require_tool("setpriv")
    drop = ",".join(f"-{c}" for c in capabilities)
    return [setpriv, "--bounding-set", drop, "--inh-caps", drop, "--"]


def test_no_ptrace_permission_exit_4_says_what_to_do_and_exec_still_works(tmp_path, spawn):
    prefix = _without("sys_ptrace")
    workload = light_workload(20)
    target = start_target(
        spawn, workload if IS_ROOT else [sys.executable, "-c", NOT_DUMPABLE, *workload[1:]], 0.7
    )
    out = tmp_path / "never.json"
    refused = run_gilprof(
        "attach", "--pid", str(target.pid), "-d", "2", "-q", "-o", str(out), prefix=prefix
    )
    assert refused.returncode == 4, refused.stderr
    message = _one_error_line(refused.stderr)
    for advice in ("as root", "SYS_PTRACE", "kernel.yama.ptrace_scope", "gilprof exec"):
        assert advice in message, (advice, message)
    assert not out.exists()

    # the same restrictions do not stop gilprof from sampling its own child
    folder = tmp_path / "exec"
    child = run_gilprof(
        *("exec", "-d", "1", "-q", "-o", str(folder), "--", *light_workload(2.5)),
        prefix=prefix,
        env=no_rank_env(),
        stdin=subprocess.DEVNULL,
    )
    assert child.returncode == 0, child.stderr
    [written] = list(folder.glob("rank0-*.json"))
    assert sample_count(Profile.load(written).to_dict()) > 0


def test_unusable_output_is_refused_before_anything_starts(tmp_path, monkeypatch):
    marker = tmp_path / "job-started"
    job = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    for name in RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def gilprof(*args: str, prefix: tuple[str, ...] = ()) -> tuple[int, str]:
        if not prefix:  # in-process: quicker, and the same code path
            result = run_cli(*args)
            return result.exit_code, _one_error_line(result.stderr)
        done = run_gilprof(*args, prefix=prefix, stdin=subprocess.DEVNULL)
        return done.returncode, _one_error_line(done.stderr)

    code, line = gilprof("attach", "-o", str(tmp_path / "missing" / "p.json"), "--", *job)
    assert code == 2 and "does not exist" in line, line

    fifo = tmp_path / "p.fifo"
    os.mkfifo(fifo)
    code, line = gilprof("attach", "-o", str(fifo), "--", *job)
    assert code == 2 and "not a regular file" in line, line
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # a rename would have replaced it

    read_only = tmp_path / "read-only"
    read_only.mkdir()
    read_only.chmod(0o555)
    # root writes anywhere unless it lacks CAP_DAC_OVERRIDE
    drop = tuple(_without("dac_override", "dac_read_search"))
    code, line = gilprof("attach", "-o", str(read_only / "p.json"), "--", *job, prefix=drop)
    assert code == 2 and "not writable" in line, line
    code, line = gilprof("exec", "-o", str(read_only), "--", *job, prefix=drop)
    assert code == 2 and "not writable" in line, line
    code, line = gilprof("exec", "-o", str(fifo), "--", *job)
    assert code == 2 and "a file is in the way" in line, line
    assert not marker.exists(), "a job was started although its profile could not be written"


def _fill(folder: Path, leave: int) -> None:
    """Write into `folder` until at most `leave` bytes are free."""
    vfs = os.statvfs(folder)
    with open(folder / f"fill-{time.monotonic_ns()}", "wb") as handle:
        try:
            handle.write(b"\0" * max(0, vfs.f_bavail * vfs.f_frsize - leave))
            handle.flush()
        except OSError:
            pass  # full: that was the point


def test_full_disk_is_refused_before_sampling_and_filling_up_later_keeps_a_partial_profile(
    tmp_path, spawn
):
    small = tmp_path / "small"
    small.mkdir()
    mounted = (
        IS_ROOT
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(small)], capture_output=True
        ).returncode
        == 0
    )
    if not mounted:
        pytest.skip("needs root that may mount a tmpfs (a small file system to fill)")
    try:
        target = start_target(spawn, light_workload(40))
        out = small / "p.json"
        _fill(small, leave=256 * 1024)
        early = run_gilprof("attach", "--pid", str(target.pid), "-d", "1", "-q", "-o", str(out))
        assert early.returncode == 2, early.stderr
        assert "is (nearly) full" in _one_error_line(early.stderr)

        for filler in small.glob("fill-*"):
            filler.unlink()
        # contention mode at 500 Hz: records of a few KiB, so the next one needs a new page of
        # the tmpfs (the last page of the file has room for a few bytes more)
        streaming = ("--mode", "contention", "--rate", "500", "--window", "1", "-d", "20")
        late = attach(spawn, target.pid, out, *streaming)
        # the profile is streamed: wait for a window on disk, then fill the disk
        assert wait_for(lambda: (p := _loaded(out)) is not None and p.windows, timeout=30), (
            late.stderr.read().decode()
        )
        _fill(small, leave=0)  # the disk fills up while gilprof samples
        assert late.wait(timeout=30) == 2
        line = _one_error_line(late.stderr.read().decode())
        assert "cannot write" in line and "No space left on device" in line, line
        assert not pyspy_children(late.pid) and not list(small.glob(".gilprof-*"))
        # what was written before the disk filled up is kept, and reads as a partial profile
        for filler in small.glob("fill-*"):
            filler.unlink()
        kept = Profile.load(out)
        assert kept.sampling.partial and "without its footer" in kept.sampling.partial_reason
        assert kept.windows and sum(kept.total_counts().values()) > 0
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)


def test_sigkill_of_attach_mid_run_leaves_a_partial_profile_and_no_sampler(tmp_path, spawn):
    """An OOM kill or a scheduler's hard stop: no signal handler runs, no footer is written."""
    target = start_target(spawn, light_workload(30))
    out = tmp_path / "p.json"
    run = attach(
        spawn, target.pid, out, "--mode", "contention", "--rate", "200", "--window", "1", "-d", "20"
    )
    assert wait_for(lambda: (p := _loaded(out)) is not None and len(p.windows) >= 2, timeout=40), (
        run.stderr.read().decode()
    )
    samplers = samplers_of(run)
    os.kill(run.pid, signal.SIGKILL)
    assert run.wait(timeout=10) == -signal.SIGKILL
    assert wait_for(lambda: not still_running(samplers), timeout=10), samplers
    profile = Profile.load(out)
    assert profile.target.pid == target.pid
    assert profile.sampling.partial
    assert "without its footer" in profile.sampling.partial_reason
    assert len(profile.windows) >= 2 and sum(profile.total_counts().values()) > 0
    assert all(w.spans for w in profile.windows)  # contention states survived too
    report = run_gilprof("report", str(out))
    assert report.returncode == 0, report.stderr
    assert "PARTIAL" in report.stdout and "without its footer" in report.stdout
