"""Native time placed without pausing, on real processes: a device wait, host compute in C,
a rank waiting for its peer, and the honest fallback where perf_event_open is refused.

The stand-in device library (workloads/native/fake_device.c, built here with the system's C
compiler) spin-waits with the GIL released until another thread signals, reading the clock
on every turn as CUDA's default synchronization does; declared as a device library by a
recipe, the loop waiting in it is device-bound. Its `fake_compute` is host work in C: the
same library doing compute, declared as nothing, reads host-bound.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import (
    WORKLOADS,
    assert_exits,
    end_running,
    gilprof_cmd,
    gilprof_stdout,
    require_mpi,
    require_tool,
    wait_for,
)

pytestmark = pytest.mark.integration

NATIVE = WORKLOADS / "native"
SAMPLE_S = 4.0
RECIPE = """
name = "fake-device"
description = "the stand-in device library is a device"
[native]
device = ["libfakedev*.so"]
"""


@pytest.fixture(scope="module")
def fake_device(tmp_path_factory) -> Path:
    """The stand-in library, compiled for this machine."""
    compiler = require_tool("cc")
    out = tmp_path_factory.mktemp("native") / "libfakedev.so"
    subprocess.run(
        [compiler, "-O2", "-shared", "-fPIC", "-o", str(out), str(NATIVE / "fake_device.c")],
        check=True,
        timeout=120,
    )
    return out


def _loop(spawn, tmp_path: Path, lib: Path, shape: str, *attach_args: str, prefix=()) -> tuple:
    """Run the loop, attach for SAMPLE_S, report --steps: (verdict, report JSON, stderr)."""
    log = tmp_path / "loop.log"
    err = tmp_path / "loop.err"
    cmd = [sys.executable, str(NATIVE / "native_loop.py"), "--lib", str(lib), "--shape", shape]
    with open(err, "wb") as handle:
        target = spawn([*cmd, "--duration", str(SAMPLE_S + 8), "--log", str(log)], stderr=handle)
    match = wait_for(lambda: re.search(r"pid=(\d+)", err.read_text()), 30)
    assert match, err.read_text()
    assert wait_for(lambda: log.exists() and log.read_text().count("iter = ") >= 5, 30)
    out = tmp_path / "loop.json"
    run = spawn(
        [
            *prefix,
            *gilprof_cmd("attach", "--pid", match.group(1), "-d", str(SAMPLE_S)),
            *("--window", "1", "-o", str(out), *attach_args),
        ]
    )
    assert_exits(run, timeout=SAMPLE_S + 60)
    attach_err = run.stderr.read().decode(errors="replace")
    end_running(target, err.read_text())
    report = gilprof_stdout(
        spawn,
        *("report", str(out), "--steps", str(log), "--loop-thread", "step-loop"),
        *("--format", "json"),
    )
    data = json.loads(report)
    return data["verdict"], data, attach_err


def _leaves(profile: Path) -> dict[str, float]:
    """Native leaf frames' names -> their share of the loop thread's state samples."""
    from gilprof.profile import Profile

    p = Profile.load(str(profile))
    loop = next(tid for tid, name in p.threads.items() if name == "step-loop")
    counts: dict[str, float] = {}
    total = 0.0
    for index, count in p.state_totals().items():
        if p.stacks[index].tid != loop:
            continue
        total += count
        frames = p.stack_frames(index)
        if frames and frames[-1].file.startswith("[native"):
            key = f"{frames[-1].name} {frames[-1].file}"
            counts[key] = counts.get(key, 0.0) + count
    return {key: value / total for key, value in counts.items()}


def test_a_loop_waiting_in_a_declared_device_library_is_device_bound(spawn, tmp_path, fake_device):
    recipe = tmp_path / "fake.toml"
    recipe.write_text(RECIPE)
    verdict, _report, _err = _loop(spawn, tmp_path, fake_device, "wait", "--recipe", str(recipe))
    leaves = _leaves(tmp_path / "loop.json")
    print(verdict["reason"], leaves)
    assert verdict["bound"] == "device", verdict["reason"]
    classes = verdict["native_by_class"]
    assert classes["device-wait"] > 0.5, classes
    # placed in the library and its function, clock reads given to their caller
    wait_leaf = "[native] libfakedev.so fake_device_wait [native:device-wait]"
    assert leaves.get(wait_leaf, 0.0) > 0.5, leaves
    assert verdict["unplaced_native_share"] < 0.15


def test_the_same_library_computing_undeclared_is_host_bound(spawn, tmp_path, fake_device):
    verdict, _report, _err = _loop(spawn, tmp_path, fake_device, "compute")
    leaves = _leaves(tmp_path / "loop.json")
    print(verdict["reason"], leaves)
    assert verdict["bound"] == "host", verdict["reason"]
    assert verdict["native_by_class"]["host"] > 0.5
    assert leaves.get("[native] libfakedev.so fake_compute [native:host]", 0.0) > 0.5, leaves


def test_perf_refused_says_so_and_never_calls_native_time_host_work(spawn, tmp_path, fake_device):
    """Docker's default seccomp profile refuses perf_event_open: one line says so, and a loop
    that spends its step in native code reads undetermined, not host-bound."""
    prefix = (sys.executable, str(NATIVE / "no_perf.py"))
    verdict, _report, err = _loop(spawn, tmp_path, fake_device, "compute", prefix=prefix)
    print(err, verdict["reason"])
    lines = [line for line in err.splitlines() if "native time not placed" in line]
    assert len(lines) == 1, err
    assert "perf_event_open refused" in lines[0] and "seccomp" in lines[0]
    assert verdict["bound"] == "undetermined", verdict["reason"]
    assert verdict["unplaced_native_share"] > 0.5
    assert "perf_event_open" in verdict["command"]


def test_a_rank_waiting_for_a_slow_peer_reads_waiting_for_peers(spawn, tmp_path):
    """Rank 0 does 2 ms of Python per step, rank 1 takes 15 ms (asleep, so that on 2 cores
    rank 0's spin keeps a core); both then allreduce, so rank 0 waits ~85% of its step in
    MPICH's progress loop, with the GIL released."""
    mpiexec = require_mpi()
    log, pidfile = tmp_path / "peer.log", tmp_path / "rank0.pid"
    job = spawn(
        [
            *(mpiexec, "-n", "2", sys.executable, str(WORKLOADS / "slow_peer.py")),
            *("--duration", str(SAMPLE_S + 8), "--log", str(log), "--pidfile", str(pidfile)),
            *("--slow-by", "sleep"),
        ]
    )
    assert wait_for(lambda: log.exists() and log.read_text().count("iter = ") >= 20, 60)
    out = tmp_path / "peer.json"
    run = spawn(
        [
            *gilprof_cmd("attach", "--pid", pidfile.read_text().strip(), "-d", str(SAMPLE_S)),
            "--window",
            "1",
            "-q",
            "-o",
            str(out),
        ]
    )
    assert_exits(run, timeout=SAMPLE_S + 60)
    end_running(job)
    verdict = json.loads(
        gilprof_stdout(spawn, "report", str(out), "--steps", str(log), "--format", "json")
    )["verdict"]
    print(verdict["reason"])
    assert verdict["bound"] == "peers", verdict["reason"]
    assert verdict["peer_wait_share"] > 0.5
    assert verdict["native_by_class"]["peer-wait"] > 0.5
