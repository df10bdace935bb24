"""Host-bound or device-bound from the loop thread's time, on real sampled processes.

Two workloads whose iteration logs read device ~ host in both shapes: the bundled example
server (4 mpiexec ranks; host-shaped by default, device-shaped with a long simulated device
step and a light load), and tests/integration/workloads/overlap_loop.py (a loop that polls
for its device, beside a decoy thread that is busier than the loop). The log cannot tell
the shapes apart (`gilprof steps` says so); the verdict from the sampled loop thread can.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .conftest import (
    ROOT,
    WORKLOADS,
    assert_exits,
    attach,
    end_running,
    gilprof_stdout,
    require_tool,
    wait_for,
)

pytestmark = pytest.mark.integration

SERVER = str(ROOT / "examples" / "disagg_gen" / "server.py")
SAMPLE_S = 5.0
# The device shape's loop is busy on the host ~1% of the time, the ingress thread
# ~0.3%: at 5 s x 100 Hz that is ~6 busy readings against ~1.5, and a fresh
# clone's run once chose the ingress thread by measurement. 10 s doubles the evidence.
DEVICE_SAMPLE_S = 10.0
SHAPES = {
    # the host paces the loop. At the default 20 ms device step this machine's host step p50
    # is ~20 ms in the first seconds, and a timer around the loop's synchronize measured it
    # waiting for the device 10-13% of the time: the truth itself straddles the verdict's 10%
    # line, so `undetermined` was the right answer. At 10 ms the same timer reads 1-5%.
    "host": ["--impl", "before", "--device-ms", "10"],
    # a device step far longer than the host work of a light load: the loop waits for it.
    # Contention mode pauses the target at every sample and this machine runs other jobs, so
    # the host work per step swells; at --device-ms 80-150 the loop's device wait varied from
    # second to second (27-63%, intervals reaching under 25%): 250 ms keeps it well above.
    "device": ["--impl", "after", "--device-ms", "250", "--concurrency", "128"],
}


def _lines(path: Path) -> int:
    return path.read_text(errors="replace").count("iter = ") if path.exists() else 0


def _sampled(
    spawn,
    tmp_path: Path,
    cmd: list[str],
    log: Path,
    mode: str,
    pid_pattern: str,
    report_args: tuple[str, ...] = (),
    seconds: float = SAMPLE_S,
) -> tuple[dict, dict]:
    """Start `cmd`, let it warm up, sample its loop for `seconds`, wait for it, report --steps."""
    err = tmp_path / "stderr.txt"
    with open(err, "wb") as handle:
        target = spawn(cmd, stdout=handle, stderr=handle)
    match = wait_for(lambda: re.search(pid_pattern, err.read_text(errors="replace")), 90)
    assert match, f"no pid line: {err.read_text(errors='replace')}"
    assert wait_for(lambda: _lines(log) >= 5, 60), err.read_text(errors="replace")
    out = tmp_path / f"{mode}.json"
    run = attach(
        spawn, int(match.group(1)), out, "--mode", mode, "-d", str(seconds), "--window", "0.5"
    )
    assert_exits(run, timeout=seconds + 60)
    end_running(target, err.read_text(errors="replace"))
    steps = gilprof_stdout(spawn, "steps", str(log), "--skip-warmup", "3", "--format", "json")
    report = gilprof_stdout(
        spawn, "report", str(out), "--steps", str(log), "--format", "json", *report_args
    )
    return json.loads(report)["verdict"], json.loads(steps)["ranks"][0]


def _server(spawn, tmp_path: Path, shape: str, mode: str, *report_args: str) -> tuple[dict, dict]:
    mpiexec = require_tool("mpiexec")
    log = tmp_path / "server.log"
    seconds = DEVICE_SAMPLE_S if shape == "device" else SAMPLE_S
    cmd = [
        mpiexec,
        "-n",
        "4",
        "python",
        SERVER,
        *SHAPES[shape],
        "--duration",
        str(seconds + 9),
        "--warmup",
        "0",
        "--log-file",
        str(log),
    ]
    return _sampled(spawn, tmp_path, cmd, log, mode, r"rank0 pid=(\d+)", report_args, seconds)


def _report(verdict: dict, steps: dict) -> str:
    return (
        f"{verdict['bound']}: busy {verdict['busy_share']}, device wait "
        f"{verdict['device_wait_share']}; log {steps['host_step_ms']['p50']} / "
        f"{steps['device_step_ms']['p50']} ms; {verdict['reason']}"
    )


@pytest.mark.parametrize("mode", ["states", "contention"])
@pytest.mark.parametrize("shape", ["host", "device"])
def test_server_verdict_matches_the_shape(spawn, tmp_path, shape, mode):
    """states (the default, no pauses) and contention mode both see every thread's state."""
    verdict, steps = _server(spawn, tmp_path, shape, mode)
    print(_report(verdict, steps))
    assert steps["reading"] == "device~host"  # the log reads the same in both shapes
    assert verdict["thread"] == "executor-loop"  # chosen by measurement, no --loop-thread
    assert verdict["bound"] == shape, _report(verdict, steps)
    if shape == "host":
        # rank 0's loop waits a few percent in the attention-DP broadcast for its peers
        # (MPICH's progress loop): not host work, not the device either
        busy = verdict["busy_share"] + (verdict["peer_wait_share"] or 0.0)
        assert busy > 0.9 and verdict["device_wait_share"] < 0.1
    else:
        assert verdict["device_wait_share"] > 0.25


@pytest.mark.parametrize("shape", ["device"])
def test_server_gil_mode_never_claims_what_it_cannot_see(spawn, tmp_path, shape):
    """gil mode sees only the GIL holder: it may prove host-bound, never device-bound.

    The thread is named: in the device shape the loop holds the GIL ~1% of the time, too few
    samples for the measured choice (tested in contention mode above) to be sure of it.
    """
    verdict, steps = _server(spawn, tmp_path, shape, "gil", "--loop-thread", "executor-loop")
    print(_report(verdict, steps))
    assert verdict["thread"] == "executor-loop"
    assert verdict["device_wait_share"] is None
    assert verdict["bound"] in ("host", "undetermined"), _report(verdict, steps)
    if shape == "device":
        assert verdict["bound"] == "undetermined" and "--mode states" in verdict["command"]


def _overlap(spawn, tmp_path: Path, shape: str, mode: str, *report_args: str) -> tuple[dict, dict]:
    log = tmp_path / "loop.log"
    cmd = [
        "python",
        str(WORKLOADS / "overlap_loop.py"),
        "--shape",
        shape,
        "--duration",
        str(SAMPLE_S + 8),
        "--log",
        str(log),
    ]
    return _sampled(
        spawn, tmp_path, cmd, log, mode, r"pid=(\d+)", ("--watch", "forward_step", *report_args)
    )


@pytest.mark.parametrize("shape", ["host", "device"])
def test_overlap_loop_states_mode(spawn, tmp_path, shape):
    """The wait is a sleep-poll (0.5 ms sleeps) beside a decoy that holds the GIL half the
    time: the reader sees the loop asleep only ~20% of the step, and waiting for the GIL on
    most wake-ups (~35%). Those waits are host work by the verdict's rule (the loop wants the
    GIL), so unnamed the shape reads mixed (measured: device wait 21% [14-29]); the poll
    function named as the device wait makes its native and idle time the device's."""
    verdict, steps = _overlap(spawn, tmp_path, shape, "states", "--device-wait", "wait_for_device")
    print(_report(verdict, steps))
    assert steps["reading"] == "device~host"
    assert verdict["thread"] == "step-loop"  # not the decoy, though the decoy is busier
    assert verdict["bound"] == shape, _report(verdict, steps)


@pytest.mark.parametrize("shape", ["device"])
def test_overlap_loop_wall_mode_with_a_named_device_wait(spawn, tmp_path, shape):
    """Wall mode has no thread states: the wait is found by the function named for it."""
    verdict, steps = _overlap(spawn, tmp_path, shape, "wall", "--device-wait", "wait_for_device")
    print(_report(verdict, steps))
    assert verdict["thread"] == "step-loop"
    assert verdict["bound"] == shape, _report(verdict, steps)
