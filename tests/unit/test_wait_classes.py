"""Blocked time is classed from evidence (gilprof.wait_classes), never called the device's
because a thread is idle or sits in `Condition.wait` (issue 33's four confident wrong answers)."""

from __future__ import annotations

import random

from gilprof.analysis.verdict import verdict
from gilprof.model import Frame, Sample, ThreadState
from gilprof.wait_classes import (
    FD,
    FD_DEVICE,
    FD_SOCKET_CLIENT,
    SYSCALL_FILE,
    WAKER_THREAD,
    WaitClass,
    WaitRules,
    classify_blocked,
    evidence_frame,
    native_caller_frame,
    waker_frame,
)

from .test_per_step import HELD, IDLE, LOOP, states_profile

IDLE_STATE = ThreadState.IDLE


def _py(*names: str, file: str = "app.py") -> tuple[Frame, ...]:
    return tuple(Frame(n, file, 1) for n in names)


def _sys(name: str) -> Frame:
    return Frame(name, SYSCALL_FILE, 0)


def test_a_queue_wait_without_a_waker_is_not_the_device():
    frames = (*_py("executor"), Frame("Queue.get", "queue.py", 1), _sys("futex"))
    reason = classify_blocked(frames, IDLE_STATE, WaitRules())
    assert reason.cls is WaitClass.UNEXPLAINED
    assert "who ended the wait was not seen" in reason.evidence


def test_a_queue_wait_woken_by_a_thread_is_input_naming_the_feeder():
    frames = (
        *_py("executor"),
        Frame("Queue.get", "queue.py", 1),
        _sys("futex"),
        waker_frame(WAKER_THREAD, "thread ingress (tid 42)", 42),
    )
    reason = classify_blocked(frames, IDLE_STATE, WaitRules())
    assert reason.cls is WaitClass.INPUT and "ingress" in reason.evidence
    assert reason.waker_tid == 42


def test_a_sleep_is_sleeping_and_a_sync_frame_is_the_device():
    assert classify_blocked(
        (*_py("loop"), _sys("clock_nanosleep")), IDLE_STATE, WaitRules()
    ).cls is (WaitClass.SLEEP)
    sync = (*_py("loop", "Event.synchronize"), _sys("futex"))
    assert classify_blocked(sync, IDLE_STATE, WaitRules()).cls is WaitClass.DEVICE


def test_native_callers_and_descriptors_decide():
    rules = WaitRules()
    cuda = (*_py("loop"), _sys("futex"), native_caller_frame("libcuda.so.1", "cuEventSynchronize"))
    assert classify_blocked(cuda, IDLE_STATE, rules).cls is WaitClass.DEVICE
    gloo = (
        *_py("all_reduce"),
        _sys("futex"),
        native_caller_frame("libtorch_cpu.so", "c10d::Work::wait"),
    )
    assert classify_blocked(gloo, IDLE_STATE, rules).cls is WaitClass.PEERS
    c10d = (Frame("all_reduce", "distributed_c10d.py", 1), _sys("futex"))
    assert classify_blocked(c10d, IDLE_STATE, rules).cls is WaitClass.PEERS
    node = (*_py("loop"), _sys("ioctl"), evidence_frame(FD, FD_DEVICE, "fd 9 /dev/nvidia0"))
    assert classify_blocked(node, IDLE_STATE, rules).cls is WaitClass.DEVICE
    client = (*_py("serve"), _sys("recvfrom"), evidence_frame(FD, FD_SOCKET_CLIENT, "fd 5 tcp"))
    assert classify_blocked(client, IDLE_STATE, rules).cls is WaitClass.INPUT
    # an undeclared native library that waits: named, not host work, not the device
    fake = (*_py("loop"), _sys("futex"), native_caller_frame("libfakedev.so", "fakedev_wait"))
    reason = classify_blocked(fake, IDLE_STATE, rules)
    assert reason.cls is WaitClass.UNEXPLAINED and "libfakedev.so fakedev_wait" in reason.evidence


def _loop_profile(blocked: tuple[Frame, ...], blocked_share: float = 0.85):
    rng = random.Random(5)
    windows = []
    for _ in range(10):
        jitter = rng.uniform(-0.01, 0.01)
        windows.append(
            [
                (Sample(LOOP, "loop", _py("loop", "work"), 1, HELD), 1 - blocked_share + jitter),
                (Sample(LOOP, "loop", blocked, 1, IDLE), blocked_share - jitter),
            ]
        )
    return states_profile(windows)


def test_verdicts_of_blocked_loops_on_a_machine_without_a_device():
    def bound(frames: tuple[Frame, ...]) -> str:
        return verdict(_loop_profile(frames), 30.0, None, loop_thread="^loop$").bound

    queue = (*_py("loop"), Frame("Queue.get", "queue.py", 1), _sys("futex"))
    assert bound(queue) == "undetermined"
    fed = (*queue, waker_frame(WAKER_THREAD, "thread ingress (tid 2)", 2))
    assert bound(fed) == "input"
    assert bound((*_py("loop"), _sys("clock_nanosleep"))) == "sleep"
    assert bound((Frame("all_reduce", "distributed_c10d.py", 1), _sys("futex"))) == "peers"
    assert bound((*_py("loop", "Event.synchronize"), _sys("futex"))) == "device"
