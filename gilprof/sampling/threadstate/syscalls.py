"""What a thread is doing, from /proc/PID/task/TID/syscall.

The kernel prints `running` for a thread on a CPU or runnable, or the number of the system
call a blocked thread sits in with its six arguments (then its stack and instruction
pointers), or `-1 SP PC` for one blocked outside a system call. Reading it never stops the
thread (the reader waits until a blocked thread is off its CPU and copies its saved
registers). Numbers are the architecture's own (futex is 202 on x86_64, 98 on aarch64), and
so is the GIL struct's size: both come from the target's table (arch.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gilprof.sampling.threadstate.arch import X86_64, X86_64_NAMES, Arch
from gilprof.sampling.threadstate.layout import GIL_COND

__all__ = ["FUTEX", "X86_64_NAMES", "Activity", "SyscallFiles", "classify"]

FUTEX = X86_64.futex  # x86_64's, kept for callers that name it

RUNNING = "running"
GIL_WAIT = "gil-wait"  # futex on the GIL's cond/mutex: waiting to take it
GIL_SWITCH_WAIT = "gil-switch"  # futex on switch_cond/mutex: a dropper waits for the hand-off
OUTSIDE_SYSCALL = "blocked"  # blocked, not in a system call (page fault, stopped)


@dataclass(frozen=True, slots=True)
class Activity:
    kind: str  # RUNNING, GIL_WAIT, GIL_SWITCH_WAIT, OUTSIDE_SYSCALL, or "syscall"
    syscall: str = ""  # the system call's name where kind == "syscall"


_RUNNING = Activity(RUNNING)
GIL_COND_END = 80  # gil+32..80 is the condition variable; the mutex follows
_WAIT_COND = Activity(GIL_WAIT, "cond")  # in pthread_cond_wait: counted in its __wrefs
_WAIT_MUTEX = Activity(GIL_WAIT, "mutex")
_SWITCH = Activity(GIL_SWITCH_WAIT, "cond")  # switch_cond or switch_mutex (arch.py)
_SWITCH_MUTEX = Activity(GIL_SWITCH_WAIT, "mutex")
_OUTSIDE = Activity(OUTSIDE_SYSCALL)
_SYSCALLS: dict[tuple[int, int], Activity] = {}


def classify(text: bytes, gil: int, arch: Arch = X86_64) -> Activity:
    """One read of the syscall file, given the GIL struct's address and the target's
    architecture (its system call numbers and GIL struct)."""
    if text.startswith(b"running"):
        return _RUNNING
    fields = text.split()
    if not fields:
        return _OUTSIDE
    try:
        number = int(fields[0])
    except ValueError:
        return _OUTSIDE
    if number < 0:
        return _OUTSIDE
    if number == arch.futex and len(fields) > 1:
        address = int(fields[1], 16)
        if gil + GIL_COND <= address < gil + GIL_COND_END:
            return _WAIT_COND
        if gil + GIL_COND_END <= address < gil + arch.gil_switch:
            return _WAIT_MUTEX
        if gil + arch.gil_switch <= address < gil + arch.gil_switch_mutex:
            return _SWITCH
        if gil + arch.gil_switch_mutex <= address < gil + arch.gil_size:
            return _SWITCH_MUTEX
    key = (arch.machine, number)
    activity = _SYSCALLS.get(key)
    if activity is None:
        activity = _SYSCALLS[key] = Activity("syscall", arch.syscall_name(number))
    return activity


class SyscallFiles:
    """An open /proc/PID/task/TID/syscall per thread, re-read with pread at offset 0
    (no open/close per tick)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fds: dict[int, int] = {}

    def read(self, tid: int) -> bytes | None:
        fd = self.fds.get(tid)
        try:
            if fd is None:
                fd = self.fds[tid] = os.open(f"/proc/{self.pid}/task/{tid}/syscall", os.O_RDONLY)
            return os.pread(fd, 256, 0)
        except OSError:
            self.forget(tid)
            return None  # the thread exited

    def keep_only(self, tids: set[int]) -> None:
        for tid in list(self.fds):
            if tid not in tids:
                self.forget(tid)

    def forget(self, tid: int) -> None:
        fd = self.fds.pop(tid, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        for tid in list(self.fds):
            self.forget(tid)
