"""What the thread-state reader reads differently per CPU architecture: the system call
numbers /proc/TID/syscall prints, the GIL struct's pthread members (glibc's
`pthread_mutex_t` is 40 bytes on x86_64 and 48 on aarch64, `pthread_cond_t` 48 on both),
where glibc's `struct pthread` keeps the thread's Linux id (3.10 reaches a thread's id
only through its pthread_t) and the symbol version every glibc of the architecture defines.

The architecture is the *target's*: the ELF `e_machine` of the file that exports
`_PyRuntime` (62 x86_64, 183 aarch64), never a name. An architecture with no table here
gets no layout; one with a table is still only trusted once the attach checks (verify.py)
pass on the live process.

Numbers: x86_64 from arch/x86/entry/syscalls/syscall_64.tbl; aarch64 uses the generic
table (include/uapi/asm-generic/unistd.h), which has no `poll`, `select`, `epoll_wait` or
`pause` (glibc calls `ppoll`, `pselect6`, `epoll_pwait`, `ppoll` for them). The GIL struct,
`_gil_runtime_state` (3.10-3.15): interval +0, last_holder +8, locked +16, switch_number
+24, cond +32, mutex +80, then switch_cond and switch_mutex after the mutex.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

EM_X86_64 = 62
EM_AARCH64 = 183


@dataclass(frozen=True)
class Arch:
    name: str
    machine: int  # ELF e_machine
    futex: int  # the futex system call's number
    syscall_names: Mapping[int, str]  # number -> name, for the calls a thread blocks in
    gil_mutex: int  # the GIL struct's `mutex` (cond is +32..+80 everywhere)
    gil_switch: int  # `switch_cond`
    gil_switch_mutex: int  # `switch_mutex`
    gil_size: int
    pthread_tid: int  # glibc's struct pthread: `tid`
    glibc_base_version: str  # the oldest symbol version its glibc defines

    def syscall_name(self, number: int) -> str:
        return self.syscall_names.get(number, f"syscall {number}")


X86_64_NAMES = {
    0: "read", 1: "write", 7: "poll", 16: "ioctl", 17: "pread64", 19: "readv", 20: "writev",
    23: "select", 24: "sched_yield", 34: "pause", 35: "nanosleep", 42: "connect",
    43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg", 61: "wait4",
    72: "fcntl", 128: "rt_sigtimedwait", 130: "rt_sigsuspend", 202: "futex",
    230: "clock_nanosleep", 232: "epoll_wait", 247: "waitid", 270: "pselect6", 271: "ppoll",
    281: "epoll_pwait", 288: "accept4", 299: "recvmmsg", 441: "epoll_pwait2",
}  # fmt: skip

AARCH64_NAMES = {
    22: "epoll_pwait", 25: "fcntl", 29: "ioctl", 63: "read", 64: "write", 65: "readv",
    66: "writev", 67: "pread64", 72: "pselect6", 73: "ppoll", 95: "waitid", 98: "futex",
    101: "nanosleep", 115: "clock_nanosleep", 124: "sched_yield", 133: "rt_sigsuspend",
    137: "rt_sigtimedwait", 202: "accept", 203: "connect", 206: "sendto", 207: "recvfrom",
    211: "sendmsg", 212: "recvmsg", 242: "accept4", 243: "recvmmsg", 260: "wait4",
    441: "epoll_pwait2",
}  # fmt: skip

X86_64 = Arch(
    name="x86_64",
    machine=EM_X86_64,
    futex=202,
    syscall_names=X86_64_NAMES,
    gil_mutex=80,
    gil_switch=120,
    gil_switch_mutex=168,
    gil_size=208,
    pthread_tid=0x2D0,  # after tcbhead_t (704 bytes) and the list_t
    glibc_base_version="GLIBC_2.2.5",
)
AARCH64 = Arch(
    name="aarch64",
    machine=EM_AARCH64,
    futex=98,
    syscall_names=AARCH64_NAMES,
    gil_mutex=80,
    gil_switch=128,  # after a 48-byte pthread_mutex_t
    gil_switch_mutex=176,
    gil_size=224,
    pthread_tid=0xD0,  # after the 192-byte header padding and the list_t
    glibc_base_version="GLIBC_2.17",
)
ARCHES = {arch.machine: arch for arch in (X86_64, AARCH64)}


def arch_of(machine: int) -> Arch | None:
    """The tables for an ELF e_machine, or None for an architecture without them."""
    return ARCHES.get(machine)
