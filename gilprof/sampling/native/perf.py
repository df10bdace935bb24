"""The kernel's on-CPU samples of chosen threads, read without pausing them (perf_event_open).

Each thread gets a software cpu-clock event with a ring buffer shared with this process.
The kernel's timer fires on the thread's own CPU every period of its CPU time and writes
the instruction pointer, the time (on CLOCK_MONOTONIC, the clock the state reader ticks
on), the user registers that find the caller (instruction and stack pointer, link register)
and the top of the user stack into the buffer; the thread never stops. A thread off its CPU
(blocked, or runnable waiting for a core) gives no sample.

Permission is the one py-spy needs: at perf_event_paranoid 2 (the kernel's default) a
process may sample user space of another process it may ptrace (kernel-side samples too
where it is root or has CAP_PERFMON; otherwise user space only, exclude_kernel); paranoid 3
(some distributions), a seccomp profile (Docker's default refuses perf_event_open) or a
missing CAP_PERFMON refuse it: `PerfRefused` carries the kernel's reason in one line.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import platform
import struct
from typing import NamedTuple

# perf_event_open's number is the architecture's own (there is no glibc wrapper).
PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}

_PERF_TYPE_SOFTWARE = 1
_PERF_COUNT_SW_CPU_CLOCK = 0
_PERF_COUNT_SW_CONTEXT_SWITCHES = 3
_SAMPLE_IP, _SAMPLE_TID, _SAMPLE_TIME = 1 << 0, 1 << 1, 1 << 2
_SAMPLE_REGS_USER, _SAMPLE_STACK_USER = 1 << 12, 1 << 13
# The user-space registers kept with each sample: the instruction pointer (where a thread
# that the timer caught inside a system call made the call), the stack pointer (a leaf
# function's return address is on the stack on x86_64) and, on aarch64, the link register
# (it holds the return address there). Bits are perf_regs.h numbers; the kernel writes the
# registers in bit order: x86_64 SP, IP; aarch64 LR, SP, PC.
_CALLER_REGS = {"x86_64": (1 << 7) | (1 << 8), "aarch64": (1 << 30) | (1 << 31) | (1 << 32)}
KERNEL_SPACE = 1 << 63  # instruction pointers at or above this are the kernel's
AARCH64_USER_ADDRESS = (1 << 48) - 1  # user addresses of a 48-bit VA space, below PAC bits
STACK_BYTES = 256  # of the user stack copied with each sample: a leaf's callers' addresses
# copied with a context switch's sample: a thread blocks inside the C library's futex wait,
# two large frames (the condition variable's) below the interpreter's GIL function
SWITCH_STACK_BYTES = 512
_IOC_SET_OUTPUT = 0x2405  # PERF_EVENT_IOC_SET_OUTPUT: write into another event's buffer
_DISABLED, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 0, 1 << 5, 1 << 6
_SAMPLE_ID_ALL, _USE_CLOCKID, _CONTEXT_SWITCH = 1 << 18, 1 << 25, 1 << 26
_CLOCK_MONOTONIC = 1
_FLAG_FD_CLOEXEC = 8
_RECORD_SAMPLE, _RECORD_SWITCH = 9, 14  # a lost-samples record (2) is skipped by its length
_MISC_SWITCH_OUT, _MISC_SWITCH_OUT_PREEMPT = 0x2000, 0x4000
# A context switch of the thread, with sample_id_all's trailer (pid, tid, time)
SWITCH_IN, SWITCH_PREEMPTED, SWITCH_BLOCKED = "in", "preempted", "blocked"
_IOC_ENABLE = 0x2400  # PERF_EVENT_IOC_ENABLE
_DATA_HEAD, _DATA_TAIL = 1024, 1032  # in the ring buffer's first (metadata) page
# A power of two: 32 KiB holds ~90 samples with their stack copies, 90 ms of one busy
# thread at 1 kHz; the reader drains every tick. Small, because an unprivileged user's
# buffers all count against kernel.perf_event_mlock_kb (516 KiB by default).
DATA_PAGES = 8
# with a sample per context switch too (kernel-side events allowed): 128 KiB, ~200 switch
# samples, 40 ms of a thread that switches 5000 times a second; 8 pages where the kernel
# will not lock that much for this user
SWITCH_DATA_PAGES = 32
_SAMPLE = struct.Struct("<QIIQQ")  # ip, pid, tid, time, regs abi
_HEADER = struct.Struct("<IHH")  # type, misc, size
_U64 = struct.Struct("<Q")

_u32, _u64 = ctypes.c_uint32, ctypes.c_uint64


class _Attr(ctypes.Structure):
    """struct perf_event_attr as of PERF_ATTR_SIZE_VER8 (136 bytes)."""

    _fields_ = [
        ("type", _u32), ("size", _u32), ("config", _u64), ("sample_period", _u64),
        ("sample_type", _u64), ("read_format", _u64), ("flags", _u64),
        ("wakeup_events", _u32), ("bp_type", _u32), ("config1", _u64), ("config2", _u64),
        ("branch_sample_type", _u64), ("sample_regs_user", _u64),
        ("sample_stack_user", _u32), ("clockid", ctypes.c_int32),
        ("sample_regs_intr", _u64), ("aux_watermark", _u32),
        ("sample_max_stack", ctypes.c_uint16), ("_reserved_2", ctypes.c_uint16),
        ("aux_sample_size", _u32), ("_reserved_3", _u32), ("sig_data", _u64),
        ("config3", _u64),
    ]  # fmt: skip


class CpuSample(NamedTuple):
    """One sample of a thread: a tuple, made a few thousand times a second (a frozen
    dataclass costs twice as much to build)."""

    time_ns: int  # CLOCK_MONOTONIC
    ip: int  # the instruction pointer (the kernel's for a sample caught in a system call)
    # views into the drained buffer's copy (no copy per sample)
    registers: bytes | memoryview  # the _CALLER_REGS, in register-number order
    stack: bytes | memoryview  # the first STACK_BYTES of the user stack, from the stack pointer up

    @property
    def in_kernel(self) -> bool:
        """Caught inside the kernel (a system call): `ip` is the kernel's."""
        return self.ip >= KERNEL_SPACE

    def user_ip(self) -> int | None:
        """Where in user space the thread was: `ip`, or for a sample caught in the kernel
        the user registers' instruction pointer (the system call's call site)."""
        if not self.in_kernel:
            return self.ip
        if len(self.registers) == 16:  # x86_64: SP, IP
            return int.from_bytes(self.registers[8:16], "little")
        if len(self.registers) == 24:  # aarch64: LR, SP, PC
            return int.from_bytes(self.registers[16:24], "little")
        return None

    def callers(self) -> list[int]:
        """Candidate return addresses, innermost first: the link register (aarch64), then
        every word on the copied stack. A leaf function's caller is the first of these in
        code; the rest may be stale values (the locator checks each against the maps)."""
        stack = self.stack
        words = [int.from_bytes(stack[i : i + 8], "little") for i in range(0, len(stack) - 7, 8)]
        if len(self.registers) == 24:  # aarch64: LR first
            # a return address saved by code built with pointer authentication carries its
            # signature above the user address bits: strip it
            lr = int.from_bytes(self.registers[:8], "little")
            return [address & AARCH64_USER_ADDRESS for address in (lr, *words)]
        return words


class PerfRefused(Exception):
    """The kernel refused a sampling event; the message is one line with its reason."""

    def __init__(self, message: str, errno: int = 0) -> None:
        super().__init__(message)
        self.errno = errno


def paranoid_level() -> int | None:
    try:
        with open("/proc/sys/kernel/perf_event_paranoid", encoding="ascii") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def _refusal(tid: int, errno: int) -> str:
    level = paranoid_level()
    why = os.strerror(errno)
    if errno in (1, 13):  # EPERM, EACCES
        if level is not None and level > 2:
            why += (
                f" (kernel.perf_event_paranoid is {level}; 2 lets a user sample a process "
                "it may ptrace: sysctl kernel.perf_event_paranoid=2)"
            )
        else:
            why += (
                " (a seccomp profile or a missing CAP_PERFMON/ptrace right; in Docker: "
                "--cap-add PERFMON --cap-add SYS_PTRACE, or a seccomp profile that allows "
                "perf_event_open)"
            )
    elif errno == 38:  # ENOSYS
        why += " (this kernel has no perf events)"
    return f"perf_event_open refused for thread {tid}: {why}"


class _Libc:
    """syscall(2) and ioctl(2) through ctypes, loaded once."""

    _lib: ctypes.CDLL | None = None

    @classmethod
    def get(cls) -> ctypes.CDLL:
        if cls._lib is None:
            lib = ctypes.CDLL(None, use_errno=True)
            lib.syscall.restype = ctypes.c_long
            lib.ioctl.restype = ctypes.c_int
            cls._lib = lib
        return cls._lib


def ring_data(buffer: mmap.mmap, pages: int) -> tuple[bytes, int, int]:
    """What the kernel wrote to a perf ring buffer of `pages` data pages since the last
    release: (the bytes, its head, its tail); release with ring_release(buffer, head)."""
    head = int.from_bytes(buffer[_DATA_HEAD : _DATA_HEAD + 8], "little")
    tail = int.from_bytes(buffer[_DATA_TAIL : _DATA_TAIL + 8], "little")
    if head == tail:
        return b"", head, tail
    size = pages * mmap.PAGESIZE
    base = mmap.PAGESIZE
    start, end = tail % size, head % size
    if head - tail >= size or end <= start:  # wrapped: copy both pieces
        return buffer[base + start : base + size] + buffer[base : base + end], head, tail
    return buffer[base + start : base + end], head, tail


def ring_release(buffer: mmap.mmap, head: int) -> None:
    buffer[_DATA_TAIL : _DATA_TAIL + 8] = head.to_bytes(8, "little")


class ThreadEvent:
    """One thread's cpu-clock event and its ring buffer."""

    def __init__(self, tid: int, period_ns: int, kernel: bool = True) -> None:
        number = PERF_EVENT_OPEN.get(platform.machine())
        if number is None or platform.machine() not in _CALLER_REGS:
            raise PerfRefused(f"perf_event_open: no system call number for {platform.machine()}")
        attr = _Attr(
            type=_PERF_TYPE_SOFTWARE,
            size=ctypes.sizeof(_Attr),
            config=_PERF_COUNT_SW_CPU_CLOCK,
            sample_period=period_ns,
            sample_type=_SAMPLE_IP
            | _SAMPLE_TID
            | _SAMPLE_TIME
            | _SAMPLE_REGS_USER
            | _SAMPLE_STACK_USER,
            flags=_DISABLED
            | _EXCLUDE_HV
            | _USE_CLOCKID
            | _SAMPLE_ID_ALL
            | _CONTEXT_SWITCH
            | (0 if kernel else _EXCLUDE_KERNEL),
            clockid=_CLOCK_MONOTONIC,
            sample_regs_user=_CALLER_REGS[platform.machine()],
            sample_stack_user=STACK_BYTES,
        )
        self._regs = bin(attr.sample_regs_user).count("1")
        libc = _Libc.get()
        fd = libc.syscall(number, ctypes.byref(attr), tid, -1, -1, _FLAG_FD_CLOEXEC)
        if fd < 0:
            raise PerfRefused(_refusal(tid, ctypes.get_errno()), ctypes.get_errno())
        self.tid = tid
        self.fd = int(fd)
        self.switch_fd = -1
        # the larger buffer where switch samples come too, the usual one where the kernel
        # will not map that much
        for pages in (SWITCH_DATA_PAGES, DATA_PAGES) if kernel else (DATA_PAGES,):
            self.pages = pages
            try:
                self._buffer = self._map(pages)
                break
            except OSError as exc:
                if pages == DATA_PAGES:
                    os.close(self.fd)
                    raise PerfRefused(
                        f"perf ring buffer for thread {tid}: {exc.strerror}"
                    ) from None
        # Where the kernel allows kernel-side events, a sample at each of the thread's
        # context switches too, written into the same buffer: its user registers say
        # where the thread was when it left its CPU (preempted, or the system call it
        # blocked in), so a thread read off its CPU is placed where it is, not where the
        # clock last caught it running
        if kernel and self.pages == SWITCH_DATA_PAGES:
            switch_attr = _Attr(
                type=_PERF_TYPE_SOFTWARE,
                size=ctypes.sizeof(_Attr),
                config=_PERF_COUNT_SW_CONTEXT_SWITCHES,
                sample_period=1,
                sample_type=attr.sample_type,
                flags=_DISABLED | _EXCLUDE_HV | _USE_CLOCKID | _SAMPLE_ID_ALL,
                clockid=_CLOCK_MONOTONIC,
                sample_regs_user=attr.sample_regs_user,
                sample_stack_user=SWITCH_STACK_BYTES,
            )
            switch_fd = libc.syscall(
                number, ctypes.byref(switch_attr), tid, -1, -1, _FLAG_FD_CLOEXEC
            )
            if switch_fd >= 0:
                self.switch_fd = int(switch_fd)
                if libc.ioctl(self.switch_fd, _IOC_SET_OUTPUT, self.fd) != 0 or (
                    libc.ioctl(self.switch_fd, _IOC_ENABLE, 0) != 0
                ):
                    os.close(self.switch_fd)
                    self.switch_fd = -1
        if libc.ioctl(self.fd, _IOC_ENABLE, 0) != 0:
            errno = ctypes.get_errno()
            self.close()
            raise PerfRefused(_refusal(tid, errno))

    def _map(self, pages: int) -> mmap.mmap:
        size = (1 + pages) * mmap.PAGESIZE
        return mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)

    def drain(self, out: list[CpuSample], switches: list[tuple[int, str]]) -> None:
        """Append each sample written since the last drain, and each context switch of the
        thread as (time_ns, SWITCH_IN / SWITCH_PREEMPTED / SWITCH_BLOCKED); free their
        space."""
        data, head, tail = ring_data(self._buffer, self.pages)
        if head == tail:
            return
        limit = min(len(data), head - tail)
        offset = 0
        view = memoryview(data)
        regs = 8 * self._regs
        # the reader's largest cost per record: names bound once (a busy rank writes
        # thousands of records a second, three per context switch)
        header, sample, u64 = _HEADER.unpack_from, _SAMPLE.unpack_from, _U64.unpack_from
        add_sample, add_switch = out.append, switches.append
        fixed = 8 + _SAMPLE.size
        while offset + 8 <= limit:
            kind, misc, length = header(data, offset)
            if length < 8 or offset + length > limit:
                break  # never written this way: stop rather than misread
            if kind == _RECORD_SAMPLE:
                ip, _pid, _tid, time_ns, abi = sample(data, offset + 8)
                at = offset + fixed
                registers: bytes | memoryview = view[at : at + regs] if abi else b""
                at += regs if abi else 0
                (copied,) = u64(data, at)
                add_sample(CpuSample(time_ns, ip, registers, view[at + 8 : at + 8 + copied]))
            elif kind == _RECORD_SWITCH and length >= 24:
                (time_ns,) = u64(data, offset + 16)
                if not misc & _MISC_SWITCH_OUT:
                    add_switch((time_ns, SWITCH_IN))
                elif misc & _MISC_SWITCH_OUT_PREEMPT:
                    add_switch((time_ns, SWITCH_PREEMPTED))
                else:
                    add_switch((time_ns, SWITCH_BLOCKED))
            offset += length
        ring_release(self._buffer, head)

    def close(self) -> None:
        if self.switch_fd >= 0:
            os.close(self.switch_fd)
            self.switch_fd = -1
        with contextlib.suppress(AttributeError, BufferError):
            self._buffer.close()
        os.close(self.fd)


class CpuSampler:
    """Cpu-clock events on a changing set of threads."""

    def __init__(self, period_ns: int) -> None:
        self.period_ns = period_ns
        # Samples inside the kernel too (a thread spinning through a system call, such as
        # MPICH's sched_yield, is placed by its call site) where the kernel allows it (root,
        # CAP_PERFMON, or perf_event_paranoid <= 1); user space only otherwise
        self.kernel = True
        self.events: dict[int, ThreadEvent] = {}
        self.gone: set[int] = set()  # threads whose event could not be opened: exited

    def follow(self, tids: set[int]) -> None:
        """Open events on new threads, close those of threads no longer followed. A thread
        that exited before its event opened is skipped; any other refusal raises."""
        for tid in list(self.events):
            if tid not in tids:
                self.events.pop(tid).close()
        for tid in tids:
            if tid in self.events or tid in self.gone:
                continue
            try:
                self.events[tid] = self._open(tid)
            except PerfRefused:
                if not _thread_exists(tid):
                    self.gone.add(tid)
                    continue
                raise

    def _open(self, tid: int) -> ThreadEvent:
        if self.kernel:
            try:
                return ThreadEvent(tid, self.period_ns, kernel=True)
            except PerfRefused as exc:
                if exc.errno not in (1, 13):  # EPERM, EACCES: kernel samples not allowed
                    raise
                self.kernel = False
        return ThreadEvent(tid, self.period_ns, kernel=False)

    def close(self) -> None:
        for event in self.events.values():
            event.close()
        self.events.clear()


def _thread_exists(tid: int) -> bool:
    try:
        os.stat(f"/proc/{tid}")
    except OSError:
        return False
    return True
