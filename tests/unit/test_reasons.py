"""Blocked readings' reasons over a whole profile (gilprof.analysis.reasons) and the reader's
evidence parsing (gilprof.sampling.blocked): pure logic on built profiles and text."""

from __future__ import annotations

from gilprof.analysis.reasons import blocked_reasons
from gilprof.model import Frame, Mode, Sample, ThreadState
from gilprof.native_classes import NativeClass
from gilprof.sampling.blocked import parse_blocked
from gilprof.sampling.blocked.caller import readable_symbol
from gilprof.sampling.blocked.descriptors import _address, descriptor_numbers
from gilprof.sampling.native.wakeups import online_cpus
from gilprof.wait_classes import (
    INTERPRETER_TAG,
    SYSCALL_FILE,
    WAKER_THREAD,
    WaitClass,
    WaitRules,
    classify_blocked,
    native_caller_frame,
    waker_frame,
)

from .builders import frames, make_profile

LOOP, INGRESS, DEVICE = 11, 12, 13
FUTEX = Frame("futex", SYSCALL_FILE, 0)
LOCK = native_caller_frame("python3.11", "PyThread_acquire_lock_timed", INTERPRETER_TAG)
QUEUE_WAIT = frames("executor", "Queue.get@queue.py", "Condition.wait@threading.py")


def _idle(tid: int, name: str, stack: tuple[Frame, ...], count: int) -> Sample:
    return Sample(tid, name, stack, count, ThreadState.IDLE)


def _reasons(samples: list[Sample]):
    profile = make_profile([(100, samples)] * 3, mode=Mode.CONTENTION)
    reasons = blocked_reasons(profile, WaitRules())
    by_tid: dict[int, list] = {}
    for index, reason in reasons.items():
        by_tid.setdefault(profile.stacks[index].tid, []).append(reason)
    return by_tid


def test_a_wait_whose_waker_was_not_seen_takes_its_sites_waker():
    """The first wait at a site names no waker (it had not ended when it was read): the same
    thread's readings at the same site that name one decide it."""
    woken = waker_frame(WAKER_THREAD, "thread 'python' (tid 12)", INGRESS)
    by_tid = _reasons(
        [
            _idle(LOOP, "executor", (*QUEUE_WAIT, FUTEX, LOCK, woken), 70),
            _idle(LOOP, "executor", (*QUEUE_WAIT, FUTEX, LOCK), 10),
            Sample(INGRESS, "ingress", frames("ingress", "Queue.put@queue.py"), 20),
        ]
    )
    assert [r.cls for r in by_tid[LOOP]] == [WaitClass.INPUT, WaitClass.INPUT]
    assert all("a queue fed by thread 'ingress' (tid 12)" in r.evidence for r in by_tid[LOOP])


def test_a_wait_without_any_waker_stays_unexplained():
    by_tid = _reasons([_idle(LOOP, "executor", (*QUEUE_WAIT, FUTEX, LOCK), 80)])
    (reason,) = by_tid[LOOP]
    assert reason.cls is WaitClass.UNEXPLAINED
    assert "who ended the wait was not seen" in reason.evidence


def test_a_wait_ended_by_a_thread_that_waits_for_the_device_waits_for_the_device():
    woken = waker_frame(WAKER_THREAD, "thread 'python' (tid 13)", DEVICE)
    event_wait = frames("executor", "Event.wait@threading.py", "Condition.wait@threading.py")
    sync = frames("device_loop", "synchronize", file="device.py")
    by_tid = _reasons(
        [
            _idle(LOOP, "executor", (*event_wait, FUTEX, LOCK, woken), 80),
            _idle(DEVICE, "device", (*sync, FUTEX), 90),
        ]
    )
    (reason,) = by_tid[LOOP]
    assert reason.cls is WaitClass.DEVICE
    assert "thread 'device' (tid 13)" in reason.evidence and "the device" in reason.evidence


def test_a_native_caller_tagged_by_the_runs_rules_decides_before_the_built_in_ones():
    caller = native_caller_frame("libblockdev.so", "bd_sync", NativeClass.DEVICE.value)
    reason = classify_blocked((*frames("loop"), FUTEX, caller), ThreadState.IDLE, WaitRules())
    assert reason.cls is WaitClass.DEVICE and "libblockdev.so bd_sync" in reason.evidence
    untagged = native_caller_frame("libblockdev.so", "bd_sync")
    reason = classify_blocked((*frames("loop"), FUTEX, untagged), ThreadState.IDLE, WaitRules())
    assert reason.cls is WaitClass.UNEXPLAINED and "libblockdev.so bd_sync" in reason.evidence


def test_gloo_and_c10d_callers_are_peers_by_their_namespace():
    caller = native_caller_frame("libtorch_cpu.so", "c10d::Work::wait")
    reason = classify_blocked((*frames("step"), FUTEX, caller), ThreadState.IDLE, WaitRules())
    assert reason.cls is WaitClass.PEERS


def test_the_syscall_line_and_its_pieces_parse():
    line = b"0 0x5 0x7f00 0x1 0x0 0x0 0x0 0x7ffc10 0x7f1234\n"
    assert parse_blocked(line) == (0, [5, 0x7F00, 1, 0, 0, 0], 0x7FFC10, 0x7F1234)
    assert parse_blocked(b"running\n") is None
    assert descriptor_numbers("read", [5, 0, 0, 0, 0, 0], 1, None) == [5]
    assert descriptor_numbers("futex", [5, 0, 0, 0, 0, 0], 1, None) == []
    assert _address("0100007F:1F90") == ("127.0.0.1", 8080)
    assert _address("0000000000000000FFFF00000100007F:0050") == ("127.0.0.1", 80)
    assert online_cpus("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]


def test_mangled_names_read_as_their_nested_name():
    assert readable_symbol("_ZN4c10d4Work4waitENSt6chrono8durationIlSt5ratioILl1ELl1000EEEE") == (
        "c10d::Work::wait"
    )
    assert (
        readable_symbol("_ZNK4gloo9transport3tcp4Pair4recvEv") == "gloo::transport::tcp::Pair::recv"
    )
    assert readable_symbol("_ZZN8pybind1112cpp_function10initializeIZ") == (
        "pybind11::cpp_function::initialize"
    )
    assert readable_symbol("bd_sync") == "bd_sync"
