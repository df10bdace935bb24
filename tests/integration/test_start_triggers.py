"""Start triggers with real processes (a plain Python job, no torch): --start-on in launch
mode (`attach` and `exec`), --start-on-log on a running process, --start-after, Ctrl-C during
the wait, and a trigger that never fires."""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import psutil

from .conftest import (
    WORKLOADS,
    gilprof_cmd,
    read_pid,
    report_json,
    run_cli,
    running,
    wait_for,
)

JOB = str(WORKLOADS / "trigger_job.py")
WINDOW = 1.0


def job(*args: str) -> list[str]:
    return [sys.executable, JOB, *args]


def functions(profile: Path) -> set[str]:
    return {f["function"] for f in report_json(profile)["functions"]}


def trigger_of(profile: Path) -> dict:
    trigger = report_json(profile)["sampling"]["start_trigger"]
    assert trigger is not None, "the profile does not record its start trigger"
    return trigger


def ready_time(text: str) -> float:
    """The wall clock the job printed on its ready line."""
    line = next(line for line in text.splitlines() if line.startswith("ready t="))
    return float(line.split("t=")[1])


def fired_time(trigger: dict) -> float:
    return datetime.fromisoformat(trigger["fired_at"]).timestamp()


def test_start_on_skips_the_warm_up_and_passes_the_output_through(spawn, tmp_path: Path) -> None:
    out, copy = tmp_path / "p.json", tmp_path / "copy.bin"
    gilprof = spawn(
        gilprof_cmd(
            *("attach", "--start-on", "^ready t=", "-d", "1.5", "--window", str(WINDOW)),
            *("-q", "-o", str(out), "--", *job("--copy", str(copy), "--hot", "2.5")),
        )
    )
    stdout, stderr = gilprof.communicate(timeout=60)
    assert gilprof.returncode == 0, stderr.decode()
    assert stdout == copy.read_bytes()  # byte for byte, CRLF and non-UTF-8 bytes included
    assert b"\r\n" in stdout and b"\xff\xfe" in stdout
    assert b"stderr: starting\n" in stderr  # the job's stderr went to gilprof's stderr
    seen = functions(out)
    assert "hot_loop" in seen and "warm_up" not in seen, seen
    trigger = trigger_of(out)
    assert trigger["kind"] == "output" and trigger["source"] == "stdout"
    assert trigger["line"].startswith("ready t=")
    # both clocks are printed to the millisecond: the job rounds (up to 0.5 ms late) and
    # isoformat truncates (up to 1 ms early), so the line can read 1.5 ms after the trigger
    assert ready_time(stdout.decode(errors="replace")) <= fired_time(trigger) + 0.002
    assert 0 <= trigger["first_window_after_s"] <= WINDOW
    header = run_cli("report", out).output
    assert "started  by a line of the job's output matching '^ready t='" in header


def test_exec_start_on_reads_the_command_output(spawn, tmp_path: Path) -> None:
    folder, copy = tmp_path / "prof", tmp_path / "copy.bin"
    gilprof = spawn(
        gilprof_cmd(
            *("exec", "--start-on", "^ready", "-d", "1", "-q", "-o", str(folder)),
            *("--", *job("--copy", str(copy), "--hot", "2")),
        ),
        stdin=subprocess.DEVNULL,
    )
    stdout, stderr = gilprof.communicate(timeout=60)
    assert gilprof.returncode == 0, stderr.decode()
    assert stdout == copy.read_bytes()
    [profile] = folder.glob("rank0-*.json")
    assert "warm_up" not in functions(profile)
    assert trigger_of(profile)["kind"] == "output"


def test_start_on_log_follows_a_running_jobs_log(spawn, tmp_path: Path) -> None:
    log, pidfile, out = tmp_path / "gen.log", tmp_path / "pid", tmp_path / "p.json"
    go = tmp_path / "go"
    log.write_text("ready t=0 (a line from before gilprof started: not new)\n")
    target = spawn(
        job(*("--log", str(log), "--pidfile", str(pidfile), "--go-file", str(go), "--hot", "3"))
    )
    pid = wait_for(lambda: read_pid(pidfile), timeout=20)
    assert pid, target.stderr.read().decode() if target.poll() is not None else "no PID file"
    gilprof = spawn(
        gilprof_cmd(
            *("attach", "--pid", str(pid), "--start-on-log", f"{log}:^ready"),
            *("-d", "1", "--window", str(WINDOW), "-q", "-o", str(out)),
        )
    )
    # The job says "ready" once gilprof follows the log (has it open): no race with its start.
    assert wait_for(lambda: following(gilprof.pid, log), timeout=30), "gilprof never opened the log"
    go.touch()
    _, stderr = gilprof.communicate(timeout=60)
    assert gilprof.returncode == 0, stderr.decode()
    trigger = trigger_of(out)
    assert trigger["kind"] == "log" and trigger["source"] == str(log)
    assert trigger["line"].startswith("ready t=") and "before gilprof" not in trigger["line"]
    assert 0 <= trigger["first_window_after_s"] <= WINDOW
    assert "warm_up" not in functions(out)


def following(pid: int, log: Path) -> bool:
    try:
        return any(f.path == str(log) for f in psutil.Process(pid).open_files())
    except psutil.Error:
        return False


def test_start_after_waits_that_many_seconds(spawn, tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    gilprof = spawn(
        gilprof_cmd(
            *("attach", "--start-after", "2.5", "-d", "1", "-q", "-o", str(out)),
            *("--", *job("--warm", "1.5", "--hot", "4")),
        )
    )
    _, stderr = gilprof.communicate(timeout=60)
    assert gilprof.returncode == 0, stderr.decode()
    trigger = trigger_of(out)
    assert trigger["kind"] == "after" and trigger["line"] is None
    assert trigger["waited_s"] >= 2.5
    assert "warm_up" not in functions(out)


def test_ctrl_c_during_the_wait_writes_nothing_and_stops_the_job(spawn, tmp_path: Path) -> None:
    out, pidfile = tmp_path / "p.json", tmp_path / "pid"
    gilprof = spawn(
        gilprof_cmd(
            *("attach", "--start-on", "never printed", "-q", "-o", str(out), "--"),
            *job("--pidfile", str(pidfile), "--warm", "60"),
        )
    )
    job_pid = wait_for(lambda: read_pid(pidfile), timeout=30)
    assert job_pid, "the job did not start"
    children = psutil.Process(gilprof.pid).children(recursive=True)
    gilprof.send_signal(signal.SIGINT)
    _, stderr = gilprof.communicate(timeout=30)
    assert gilprof.returncode == 130, stderr.decode()
    assert not out.exists() and list(tmp_path.iterdir()) == [pidfile]
    assert not running(job_pid)
    assert not [c.pid for c in children if running(c.pid)]
    errors = [line for line in stderr.decode().splitlines() if line.startswith("gilprof:")]
    assert len(errors) == 1 and "interrupted" in errors[0] and "no profile" in errors[0], errors


def test_a_trigger_that_never_fires_names_the_jobs_status(spawn, tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    gilprof = spawn(
        gilprof_cmd(
            *("attach", "--start-on", "iter =", "-q", "-o", str(out), "--"),
            *job("--warm", "0.3", "--hot", "0.2", "--exit", "1"),
        )
    )
    stdout, stderr = gilprof.communicate(timeout=60)
    assert gilprof.returncode not in (0, None)
    assert b"done\n" in stdout  # the job's output up to its end was passed on
    lines = [line for line in stderr.decode().splitlines() if line.startswith("gilprof:")]
    assert lines == [
        "gilprof: error: the job exited (status 1) before its output matched 'iter ='"
    ], stderr.decode()
    assert not out.exists()


def test_start_on_without_a_launched_job_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("attach", "--pid", "1", "--start-on", "iter =", "-o", tmp_path / "p.json")
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--start-on reads the output of a job gilprof launches" in lines[0]
    assert "Traceback" not in result.output
    assert not (tmp_path / "p.json").exists()
