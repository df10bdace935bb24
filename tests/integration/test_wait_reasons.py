"""Why a loop blocks, from evidence, on real CPU-only processes (no GPU on the machine).

Each job's loop does ~3 ms of Python per step and then blocks for ~20-25 ms; it is sampled by
`gilprof attach` in the default mode and judged by `gilprof report --steps`. None of these is
device-bound by the built-in rules: the reader's evidence (the native caller at the saved
stack pointer, the descriptors waited on and who holds their other end, and who ended the
last wait at the same place) names what each waits for.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .browser import dump_dom
from .conftest import (
    WORKLOADS,
    assert_exits,
    end_running,
    gilprof_cmd,
    gilprof_stdout,
    require_tool,
    wait_for,
)
from .test_torchrun import torchrun

pytestmark = pytest.mark.integration

SAMPLE_S = 4.0
LOOPS = str(WORKLOADS / "blocked_loops.py")
NO_PERF = str(WORKLOADS / "native" / "no_perf.py")
DEVICE_RECIPE = """
name = "blocking-device"
description = "the stand-in driver library is a device"
[native]
device = ["libblockdev*.so"]
"""


@pytest.fixture(scope="module")
def blocking_device(tmp_path_factory) -> Path:
    """The stand-in driver with a blocking sync, compiled for this machine."""
    out = tmp_path_factory.mktemp("native") / "libblockdev.so"
    source = WORKLOADS / "native" / "blocking_device.c"
    subprocess.run(
        [require_tool("cc"), "-O2", "-shared", "-fPIC", "-pthread", "-o", str(out), str(source)],
        check=True,
        timeout=120,
    )
    return out


def _judge(
    spawn, tmp_path: Path, pid: int, log: Path, *attach_args: str, prefix=(), name="loop", loop=True
):
    """Attach for SAMPLE_S, then the verdict of `report --steps`, and attach's stderr."""
    out = tmp_path / f"{name}.json"
    run = spawn(
        [
            *prefix,
            *gilprof_cmd("attach", "--pid", str(pid), "-d", str(SAMPLE_S), "--window", "1"),
            *("-o", str(out), *attach_args),
        ]
    )
    assert_exits(run, timeout=SAMPLE_S + 60)
    err = run.stderr.read().decode(errors="replace")
    thread = ("--loop-thread", "executor") if loop else ()
    report = gilprof_stdout(
        spawn, "report", str(out), "--steps", str(log), "--format", "json", *thread
    )
    (tmp_path / f"{name}.report.json").write_text(report)
    verdict = json.loads(report)["verdict"]
    print(name, verdict["bound"], verdict["reason"])
    return verdict, err


def _loop(spawn, tmp_path: Path, shape: str, *args: str, seconds: float = SAMPLE_S + 6):
    log, err = tmp_path / f"{shape}.log", tmp_path / f"{shape}.err"
    with open(err, "wb") as handle:
        cmd = [sys.executable, LOOPS, "--shape", shape, *args, "--log", str(log)]
        target = spawn([*cmd, "--duration", str(seconds)], stderr=handle)
    match = wait_for(lambda: re.search(r"pid=(\d+)", err.read_text()), 30)
    assert match, err.read_text()
    assert wait_for(lambda: log.exists() and log.read_text().count("iter = ") >= 10, 30)
    return target, int(match.group(1)), log


def test_a_loop_starved_for_requests_waits_for_input_from_the_thread_that_feeds_it(spawn, tmp_path):
    target, pid, log = _loop(spawn, tmp_path, "queue")
    verdict, _err = _judge(spawn, tmp_path, pid, log)
    end_running(target)
    assert verdict["bound"] == "input", verdict["reason"]
    assert "a queue fed by thread 'ingress'" in verdict["reason"]
    report = json.loads((tmp_path / "loop.report.json").read_text())
    # the loop's split and "Where threads block" agree with the verdict, in ms per step
    split = {p["part"]: p for p in report["step_split"]}
    assert split["input"]["share"] > 0.5 and split["input"]["share"] + verdict["busy_share"] <= 1.01
    step_ms = verdict["host_step_p50_ms"]
    assert split["input"]["ms_per_step"] == pytest.approx(split["input"]["share"] * step_ms, 0.01)
    rows = [r for r in report["wait_reasons"] if r["thread"] == "executor"]
    assert rows and rows[0]["class"] == "input", rows
    assert "ingress" in rows[0]["evidence"]
    assert rows[0]["ms_per_step"] == pytest.approx(split["input"]["ms_per_step"], rel=0.25)
    assert any(r["thread"] == "ingress" and r["class"] == "sleep" for r in report["wait_reasons"])
    # the page's blocked-time flame graph, drawn by a real browser: thread, class, then code
    page = tmp_path / "loop.html"
    gilprof_stdout(
        spawn, "report", str(tmp_path / "loop.json"), "--format", "html", "-o", str(page)
    )
    dom = dump_dom(page.as_uri(), tmp_path)
    assert re.search(r'id="flame-blocked".*data-name="waiting for input"', dom, re.S), dom[-2000:]
    assert 'id="blocking-section"' in dom


def test_a_loop_that_sleeps_as_its_back_off_is_sleeping(spawn, tmp_path):
    target, pid, log = _loop(spawn, tmp_path, "sleep")
    verdict, _err = _judge(spawn, tmp_path, pid, log)
    end_running(target)
    assert verdict["bound"] == "sleep", verdict["reason"]


def test_a_loop_reading_a_clients_socket_waits_for_input(spawn, tmp_path):
    target, pid, log = _loop(spawn, tmp_path, "socket")
    verdict, _err = _judge(spawn, tmp_path, pid, log)
    end_running(target)
    assert verdict["bound"] == "input", verdict["reason"]
    assert "TCP from process" in verdict["reason"]


def test_a_native_condition_wait_is_named_and_device_bound_only_where_declared(
    spawn, tmp_path, blocking_device
):
    """One job, sampled twice: without a recipe the loop's wait in the library's
    pthread_cond_wait is not host-bound and names the library and function; with a recipe
    that declares the library a device, device-bound."""
    target, pid, log = _loop(
        spawn, tmp_path, "native", "--lib", str(blocking_device), seconds=2 * SAMPLE_S + 8
    )
    plain, _err = _judge(spawn, tmp_path, pid, log, name="plain")
    recipe = tmp_path / "device.toml"
    recipe.write_text(DEVICE_RECIPE)
    declared, _err = _judge(
        spawn, tmp_path, pid, log, "--recipe", str(recipe),
        name="declared",
    )  # fmt: skip
    end_running(target)
    assert plain["bound"] not in ("host", "device", "mixed"), plain["reason"]
    assert "libblockdev.so bd_sync" in plain["reason"]
    assert declared["bound"] == "device", declared["reason"]


def test_where_the_kernel_refuses_wake_ups_one_line_says_so_and_no_input_is_claimed(
    spawn, tmp_path
):
    """perf_event_open refused (Docker's default seccomp profile): who woke the loop is not
    seen, so its queue wait is not called waiting for input."""
    target, pid, log = _loop(spawn, tmp_path, "queue")
    verdict, err = _judge(spawn, tmp_path, pid, log, prefix=(sys.executable, NO_PERF))
    end_running(target)
    said = [line for line in err.splitlines() if "who woke a thread is not read" in line]
    assert len(said) == 1, err
    assert verdict["bound"] == "undetermined", verdict["reason"]
    assert "who ended the wait was not seen" in verdict["reason"]


@pytest.mark.parametrize("op", ["all_reduce", "broadcast_object"])
def test_a_torchrun_rank_waiting_in_gloo_for_a_slow_peer_waits_for_peers(spawn, tmp_path, op):
    log, pidfile = tmp_path / "steps.log", tmp_path / "rank0.pid"
    job = spawn(
        [
            *torchrun(), "--standalone", "--nproc-per-node", "2",
            str(WORKLOADS / "torch_slow_peer.py"), "--op", op, "--duration", str(SAMPLE_S + 10),
            "--steps-log", str(log), "--pidfile", str(pidfile),
        ]
    )  # fmt: skip
    assert wait_for(lambda: log.exists() and log.read_text().count("iter = ") >= 20, 90)
    verdict, _err = _judge(spawn, tmp_path, int(pidfile.read_text()), log, name=op, loop=False)
    end_running(job)
    assert verdict["bound"] == "peers", verdict["reason"]
