"""The native locator's use of the kernel's context-switch samples (perf.ThreadEvent), on
hand-made samples: a thread off its CPU is where its last switch was sampled."""

from __future__ import annotations

from gilprof.native_classes import NativeClass
from gilprof.sampling.native.perf import SWITCH_BLOCKED, SWITCH_IN, SWITCH_PREEMPTED
from tests.unit.test_native_classes import LIB, _class, _feed, _locator, _sample


def test_a_woken_thread_is_waiting_for_the_gil_when_it_blocked_in_the_gils_code():
    """The kernel's sample at a thread's context switch says where it blocked; woken and
    not run since, it is still there (perf.ThreadEvent's switch samples)."""
    locator = _locator()
    interpreter = LIB["/usr/bin/python3.11"] + 0x80  # take_gil, the caller of the futex wait
    for tid, caller in ((1, interpreter), (2, LIB["/opt/lib/libtorch_cpu.so"] + 0x80)):
        _feed(locator, tid, [_sample(4.98, "/usr/lib/libc.so.6", 0x400, callers=(caller,))])
        locator._switch_times[tid], locator._switch_kinds[tid] = [int(5e6)], [SWITCH_BLOCKED]
    assert _class(locator, 8.0) is NativeClass.GIL
    assert _class(locator, 8.0, tid=2) is NativeClass.WOKEN
    # a sample from well before the block says nothing of where it blocked
    _feed(locator, 3, [_sample(3.0, "/usr/lib/libc.so.6", 0x400, callers=(interpreter,))])
    locator._switch_times[3], locator._switch_kinds[3] = [int(5e6)], [SWITCH_BLOCKED]
    assert _class(locator, 8.0, tid=3) is NativeClass.WOKEN


def test_off_its_cpu_a_thread_is_where_the_kernel_sampled_its_preemption():
    """A switch's sample (perf.ThreadEvent) is where the thread is until it runs again, however
    its older clock samples read."""
    locator = _locator()
    torch, python = "/opt/lib/libtorch_cpu.so", "/usr/bin/python3.11"
    # host work sampled at 0-2 ms, then preempted in the interpreter's GIL code at 2.5 ms
    _feed(locator, 1, [_sample(0.0, torch), _sample(1.0, torch), _sample(2.49, python)])
    locator._switch_times[1], locator._switch_kinds[1] = [int(2.5e6)], [SWITCH_PREEMPTED]
    assert _class(locator, 6.0) is NativeClass.GIL
    # and the other way round: sampled in the interpreter, preempted in host code
    _feed(locator, 2, [_sample(0.0, python), _sample(2.49, torch)])
    locator._switch_times[2], locator._switch_kinds[2] = [int(2.5e6)], [SWITCH_PREEMPTED]
    assert _class(locator, 6.0, tid=2) is NativeClass.HOST
    # switched in again since: its samples decide as before
    _feed(locator, 3, [_sample(2.49, torch), _sample(6.9, python)])
    locator._switch_times[3] = [int(2.5e6), int(6.5e6)]
    locator._switch_kinds[3] = [SWITCH_PREEMPTED, SWITCH_IN]
    assert _class(locator, 7.0, tid=3) is NativeClass.GIL


def test_the_gils_wait_is_told_by_the_last_switchs_sample_or_undetermined():
    locator = _locator()
    interpreter = LIB["/usr/bin/python3.11"] + 0x80
    libc = "/usr/lib/libc.so.6"
    cases = {
        1: ([_sample(4.99, libc, 0x400, callers=(interpreter,))], SWITCH_BLOCKED, True),
        2: ([_sample(4.99, "/opt/lib/libtorch_cpu.so")], SWITCH_PREEMPTED, False),
        3: ([_sample(4.99, libc, 0x400, callers=(interpreter,))], SWITCH_IN, False),
        4: ([_sample(1.0, libc, 0x400, callers=(interpreter,))], SWITCH_BLOCKED, None),
    }
    for tid, (samples, kind, _expected) in cases.items():
        _feed(locator, tid, samples)
        locator._switch_times[tid], locator._switch_kinds[tid] = [int(5e6)], [kind]
    for tid, (_samples, _kind, expected) in cases.items():
        assert locator.in_gil_wait(tid, int(8e6)) is expected, tid
    assert locator.in_gil_wait(9, int(8e6)) is None  # no switches known
