"""The thread-state reader against real interpreters built in different ways: pyenv's
3.10-3.13 (shared libpython) and Debian's python3.11 (static: `_PyRuntime` in the binary),
through `gilprof attach` in its default mode; and its refusals, each one line with the
fallback to gil mode."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gilprof.sampling.threadstate import layout as lay
from gilprof.sampling.threadstate import target as target_mod
from gilprof.sampling.threadstate.namespaces import MappedFile
from gilprof.sampling.threadstate.reader import StateReader
from gilprof.sampling.threadstate.target import StatesUnavailable, open_interpreter

from .conftest import IN_CI, read_pid, require_interpreter, run_gilprof, wait_for

WORKLOAD = str(Path(__file__).parent / "workloads" / "gil_states.py")
DEBIAN_PYTHON = "/usr/bin/python3.11"
MUSL = "/lib/ld-musl-x86_64.so.1"


def debian_python() -> str:
    if not Path(DEBIAN_PYTHON).exists():
        if IN_CI:
            pytest.fail(f"{DEBIAN_PYTHON} (Debian's python3) is expected on these machines")
        pytest.skip("Debian's python3.11 is not installed")
    return DEBIAN_PYTHON


def start_states(spawn, tmp_path: Path, python: str) -> int:
    pidfile = tmp_path / "pid"
    spawn([python, WORKLOAD, str(pidfile)])
    pid = wait_for(lambda: read_pid(pidfile), 20)
    assert pid, "the workload did not start"
    return pid


def contention_of(tmp_path: Path, pid: int, *args: str) -> tuple[dict, str]:
    out = tmp_path / "states.json"
    result = run_gilprof("attach", "--pid", str(pid), "-d", "3", "-q", "-o", str(out), *args)
    assert result.returncode == 0, result.stderr
    report = run_gilprof("report", str(out), "--format", "json", check=True)
    return json.loads(report.stdout), result.stderr


@pytest.mark.parametrize("minor", ["10", "11", "12", "13", "debian"])
def test_each_interpreter_reads_who_holds_who_waits_and_who_idles(spawn, tmp_path, minor):
    python = debian_python() if minor == "debian" else require_interpreter(minor)
    pid = start_states(spawn, tmp_path, python)
    data, _ = contention_of(tmp_path, pid)
    assert data["sampling"]["mode"] == "states"
    threads = {t["name"]: t for t in data["gil"]["threads"]}
    # 3 s at ~100 Hz: ~300 ticks; a stable state reads at ~100% (the margin covers the
    # start of the first window, before `holder` had taken the GIL)
    assert threads["holder"]["held_share"] > 0.9, threads
    assert threads["spinner"]["wait_share"] > 0.9, threads
    assert threads["sleeper"]["idle_share"] > 0.95, threads
    blame = {(b["waiter"], b["holder"], b["holder_function"]): b["share"] for b in data["blame"]}
    assert blame.get(("spinner", "holder", "hold"), 0) > 0.9, blame
    sites = {(w["thread"], w["function"]) for w in data["wait_sites"]}
    assert ("spinner", "spinner") in sites
    assert any("thread-state reader" in m for m in data["sampling"]["messages"])


def test_a_version_without_a_verified_layout_falls_back_to_gil_mode_in_one_line(spawn, tmp_path):
    python = require_interpreter("9")
    pid = start_states(spawn, tmp_path, python)
    data, stderr = contention_of(tmp_path, pid)
    lines = [line for line in stderr.splitlines() if "thread states unavailable" in line]
    assert len(lines) == 1 and "no verified layout for CPython 3.9" in lines[0], stderr
    assert "Traceback" not in stderr
    assert data["sampling"]["mode"] == "gil"
    assert "blame" not in data and "contention_unavailable" in data
    holders = {t["name"] for t in data["gil"]["threads"]}
    assert "holder" in holders  # py-spy's gil mode still answers who held it


def test_a_layout_that_does_not_match_the_process_is_refused(spawn, tmp_path, monkeypatch):
    pid = start_states(spawn, tmp_path, require_interpreter("11"))
    good = lay.table_layout(11)
    from dataclasses import replace

    wrong = replace(good, threads_head=good.threads_head + 8)
    monkeypatch.setattr(target_mod, "table_layout", lambda minor: wrong)
    with pytest.raises(StatesUnavailable, match="does not match"):
        open_interpreter(pid)
    monkeypatch.setattr(target_mod, "table_layout", lambda minor: good)
    reader = StateReader(open_interpreter(pid), 100)  # the right one passes the same check
    reader.close()


def test_condition_variable_counts_that_disagree_with_the_kernel_are_refused(
    spawn, tmp_path, monkeypatch
):
    # The workload's spinner waits for the GIL: /proc shows it blocked on the GIL's
    # condition variable. Read the waiter count from a field that stays 0 (__g_size) and
    # the count and the kernel disagree at every look: the check must refuse.
    pid = start_states(spawn, tmp_path, require_interpreter("12"))
    monkeypatch.setattr(target_mod, "cond_wrefs", lambda pid, files: 24)
    with pytest.raises(StatesUnavailable, match="condition variables count other waiters"):
        open_interpreter(pid)
    monkeypatch.undo()
    open_interpreter(pid).memory.close()  # the real offset passes the same check


def test_a_free_threaded_build_is_refused_with_what_to_use(spawn, tmp_path, monkeypatch):
    pid = start_states(spawn, tmp_path, require_interpreter("13"))
    real = lay.debug_offsets_layout

    def free_threaded(raw: bytes):
        from dataclasses import replace

        layout, gil = real(raw)
        return replace(layout, free_threaded=True), gil

    monkeypatch.setattr(target_mod, "debug_offsets_layout", free_threaded)
    with pytest.raises(StatesUnavailable, match=r"free-threaded build.*--mode wall"):
        open_interpreter(pid)


def test_musl_is_refused(spawn, tmp_path, monkeypatch):
    pid = start_states(spawn, tmp_path, sys.executable)
    real = target_mod._mapped_files
    monkeypatch.setattr(
        target_mod,
        "_mapped_files",
        lambda p: {**real(p), MUSL: MappedFile(MUSL, 0x7F0000000000, 0x7F0000001000, (0, 0), 1)},
    )
    with pytest.raises(StatesUnavailable, match="musl"):
        open_interpreter(pid)


def test_a_binary_gilprof_cannot_open_is_named_as_the_cause(spawn, tmp_path, monkeypatch):
    # what a container whose files no path reaches looked like before its paths were
    # resolved: the process runs, so the refusal names the file and why, at once (waiting
    # out the attach would not make it readable), never "no such process"
    pid = start_states(spawn, tmp_path, sys.executable)
    monkeypatch.setattr(target_mod, "readable_path", lambda p, mapped: "/gone" + mapped.path)
    with pytest.raises(StatesUnavailable, match=r"no CPython runtime found.*cannot read") as exc:
        open_interpreter(pid)
    assert "no such process" not in str(exc.value)
    assert not isinstance(exc.value, target_mod.NotReadyYet)


def test_contention_mode_is_still_there_on_request(spawn, tmp_path):
    pid = start_states(spawn, tmp_path, sys.executable)
    data, _stderr = contention_of(tmp_path, pid, "--native")
    assert data["sampling"]["mode"] == "contention"
    assert any("pauses the target" in m for m in data["sampling"]["messages"])
