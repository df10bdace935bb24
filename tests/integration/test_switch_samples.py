"""The kernel's sample at each context switch of a followed thread, on a real process: where a
thread blocked or was preempted, which is where it is while it waits for a core.

Two Python threads spin on one GIL, so each blocks, over and over, in the GIL's condition
variable (take_gil) or in drop_gil's wait for the hand-off. The native locator follows one of
them with perf_event_open (root: kernel-side events); every switch out of it must come with
a sample taken just before, and the samples of its blocks must be placed in the GIL's code:
the futex wait in the C library is passed over to its caller, two large condition-variable
frames up the copied stack (perf.SWITCH_STACK_BYTES).
"""

from __future__ import annotations

import bisect
import os
import subprocess
import sys
import time

import pytest

from gilprof.native_classes import NativeClass, NativeRules
from gilprof.sampling.native.perf import SWITCH_BLOCKED, SWITCH_PREEMPTED
from gilprof.sampling.native.switches import SWITCH_SAMPLE_NS
from gilprof.sampling.threadstate.reader import StateReader

pytestmark = pytest.mark.integration

SPINNERS = """
import sys, threading, time
def spin():
    while True:
        sum(i * i for i in range(200))
threads = [threading.Thread(target=spin, daemon=True) for _ in range(2)]
for t in threads:
    t.start()
print(*(t.native_id for t in threads), flush=True)
sys.stdin.read()
"""


def test_each_switch_out_is_sampled_and_a_gil_block_is_placed_in_the_gils_code(spawn) -> None:
    if os.geteuid() != 0:
        pytest.fail("switch samples need kernel-side perf events: run as root (CI does)")
    target = spawn([sys.executable, "-c", SPINNERS], stdin=subprocess.PIPE)
    assert target.stdout is not None
    spinner = int(target.stdout.readline().split()[0])
    time.sleep(0.3)
    reader = StateReader.open(target.pid, 200)
    try:
        assert reader.locate_native(NativeRules()) == ""
        locator = reader.locator
        assert locator is not None
        assert locator.sampler.events[spinner].switch_fd >= 0, "no switch event opened"
        # rounds shorter than the locator's memory (KEEP_NS), each drained once
        outs: list[tuple[int, str, int]] = []  # (time, kind, index of its sample or -1)
        classes: list[NativeClass | None] = []
        seen_until = time.monotonic_ns()
        for _round in range(6):
            time.sleep(0.15)
            now = time.monotonic_ns()
            locator.collect(now, [spinner])
            times = locator._times[spinner]
            kinds = locator._switch_kinds[spinner]
            for at, kind in zip(locator._switch_times[spinner], kinds, strict=True):
                if at <= seen_until or kind not in (SWITCH_BLOCKED, SWITCH_PREEMPTED):
                    continue
                index = bisect.bisect_right(times, at) - 1
                if index >= 0 and at - times[index] > SWITCH_SAMPLE_NS:
                    index = -1
                outs.append((at, kind, index))
                blocked = kind == SWITCH_BLOCKED and index >= 0
                classes.append(locator._class_at(spinner, index, now) if blocked else None)
            seen_until = now
        assert len(outs) >= 20, f"only {len(outs)} switches out in 0.9 s of GIL contention"
        sampled = sum(index >= 0 for _t, _k, index in outs)
        blocks = sum(kind == SWITCH_BLOCKED and index >= 0 for _t, kind, index in outs)
        blocks_in_gil = sum(cls is NativeClass.GIL for cls in classes)
        # a buffer that overflowed between two drains would lose some: nearly all are there
        assert sampled >= 0.9 * len(outs), f"{sampled} of {len(outs)} switches sampled"
        assert blocks >= 10
        assert blocks_in_gil >= 0.9 * blocks, f"{blocks_in_gil} of {blocks} blocks in the GIL"
    finally:
        reader.close()
        target.stdin.close()
