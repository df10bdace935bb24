"""What a thread is doing, from /proc/PID/task/TID/syscall.

The kernel prints `running` for a thread on a CPU or runnable, or the number of the system
call a blocked thread sits in with its six arguments (then its stack and instruction
pointers), or `-1 SP PC` for one blocked outside a system call. Reading it never stops the
thread (the reader waits until a blocked thread is off its CPU and copies its saved
registers). Numbers are the architecture's own: this table is x86_64's, the only one
verified here (aarch64 numbers differ: futex is 98 there).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gilprof.sampling.threadstate.layout import GIL_COND, GIL_SIZE, GIL_SWITCH

FUTEX = 202
X86_64_NAMES = {
    0: "read", 1: "write", 7: "poll", 16: "ioctl", 17: "pread64", 19: "readv", 20: "writev",
    23: "select", 24: "sched_yield", 34: "pause", 35: "nanosleep", 42: "connect",
    43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg", 61: "wait4",
    72: "fcntl", 128: "rt_sigtimedwait", 130: "rt_sigsuspend", 202: "futex",
    230: "clock_nanosleep", 232: "epoll_wait", 247: "waitid", 270: "pselect6", 271: "ppoll",
    281: "epoll_pwait", 288: "accept4", 299: "recvmmsg", 441: "epoll_pwait2",
}  # fmt: skip

RUNNING = "running"
GIL_WAIT = "gil-wait"  # futex on the GIL's cond/mutex: waiting to take it
GIL_SWITCH_WAIT = "gil-switch"  # futex on switch_cond/mutex: a dropper waits for the hand-off
OUTSIDE_SYSCALL = "blocked"  # blocked, not in a system call (page fault, stopped)


@dataclass(frozen=True, slots=True)
class Activity:
    kind: str  # RUNNING, GIL_WAIT, GIL_SWITCH_WAIT, OUTSIDE_SYSCALL, or "syscall"
    syscall: str = ""  # the system call's name where kind == "syscall"


_RUNNING = Activity(RUNNING)
GIL_COND_END = 80  # gil+32..80 is the condition variable, gil+80..120 the mutex
_WAIT_COND = Activity(GIL_WAIT, "cond")  # in pthread_cond_wait: counted in its __wrefs
_WAIT_MUTEX = Activity(GIL_WAIT, "mutex")
_SWITCH = Activity(GIL_SWITCH_WAIT, "cond")  # switch_cond (+120) or switch_mutex (+168)
_SWITCH_MUTEX = Activity(GIL_SWITCH_WAIT, "mutex")
_OUTSIDE = Activity(OUTSIDE_SYSCALL)
_SYSCALLS: dict[int, Activity] = {}


def classify(text: bytes, gil: int) -> Activity:
    """One read of the syscall file, given the GIL struct's address."""
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
    if number == FUTEX and len(fields) > 1:
        address = int(fields[1], 16)
        if gil + GIL_COND <= address < gil + GIL_COND_END:
            return _WAIT_COND
        if gil + GIL_COND_END <= address < gil + GIL_SWITCH:
            return _WAIT_MUTEX
        if gil + GIL_SWITCH <= address < gil + GIL_SWITCH + 48:
            return _SWITCH
        if gil + GIL_SWITCH + 48 <= address < gil + GIL_SIZE:
            return _SWITCH_MUTEX
    activity = _SYSCALLS.get(number)
    if activity is None:
        activity = _SYSCALLS[number] = Activity(
            "syscall", X86_64_NAMES.get(number, f"syscall {number}")
        )
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
