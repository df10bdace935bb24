"""The what-if on a loop whose device work another Python thread launches.

tests/integration/workloads/thread_fed_loop.py: the loop's device work is launched kernel by
kernel by a `launcher` thread that needs the GIL between kernels; the loop waits for the
device (one step in flight), so the device chain paces the step, and the launcher's GIL waits
while the loop holds the GIL are on the step's critical path. Removing the loop's
`removable_work` shortens the step though the loop is device-bound. From the before profile,
`report --what-if removable_work --feeder-thread launcher` predicts it; the same process then
measures the step with the function off and on in turn, in blocks of steps (a drift of the
shared machine's load falls on both sides alike).
"""

from __future__ import annotations

import json
import math
import re
import statistics

import pytest

from .conftest import gilprof_stdout
from .test_what_if import _host_steps, _run, _se_of_difference

pytestmark = pytest.mark.integration

WORKLOAD = "thread_fed_loop.py"
MARK = "# interleaved from here"


def test_a_thread_fed_device_step_shrinks_by_the_launchers_waits(spawn, tmp_path):
    log_on, log_off, profile, _ = _run(spawn, tmp_path, ["--off-seconds", "5"], workload=WORKLOAD)
    args = ["report", str(profile), "--steps", str(log_on), "--loop-thread", "step-loop"]
    # the simulated device is an Event the launcher sets: declared, as a recipe declares it
    args += ["--device-wait", "Event.wait"]
    args += ["--what-if", "removable_work", "--format", "json"]
    fed = json.loads(gilprof_stdout(spawn, *args, "--feeder-thread", "^launcher$"))
    alone = json.loads(gilprof_stdout(spawn, *args))
    predicted = fed["per_step"]["what_if"]
    saving = predicted["step_saving_ms"]["value"]
    # measured on blocks of steps with the function on and off in turn (the workload's
    # --block): a drift of the machine's load falls on both
    interleaved = log_on.read_text().split(MARK, 1)[1]
    on = [float(v) for v in re.findall(r"host_step_time = ([\d.]+)ms", interleaved)]
    off = _host_steps(log_off, skip=0)
    assert len(on) >= 20 and len(off) >= 20, (len(on), len(off))
    measured = statistics.fmean(on) - statistics.fmean(off)
    period = predicted["host_step_before_ms"]
    print(f"thread-fed: predicted {saving:.2f} ms, measured {measured:.2f} ms of {period:.1f} ms")
    assert fed["verdict"]["bound"] == "device"
    assert predicted["device_paced"]
    # the step did shrink (medians: a stall of the shared machine moves a mean): the
    # coupling this test is about is there
    assert statistics.median(on) > statistics.median(off) + 0.1 * period, (on, off)
    se = _se_of_difference(on, off)
    # the issue's bound: 20% of the measured saving, or the two figures' own 95% uncertainty
    ci = predicted["step_saving_ms"]
    half = (ci["ci_high"] - ci["ci_low"]) / 2 if ci.get("ci_high") is not None else 0.0
    noise = 1.96 * math.sqrt(se**2 + (half / 1.96) ** 2)
    print(f"  bound: 20% = {0.2 * measured:.2f} ms, 95% uncertainty = {noise:.2f} ms")
    assert abs(saving - measured) <= max(0.2 * measured, noise), (saving, measured, noise)
    # without the feeder named, the device-paced prediction of ~0 says it is undetermined
    # and names the launcher
    unnamed = alone["per_step"]["what_if"]
    assert abs(unnamed["step_saving_ms"]["value"]) <= 0.05 * period
    assert "launcher" in unnamed["note"] and "--feeder-thread" in unnamed["note"]
