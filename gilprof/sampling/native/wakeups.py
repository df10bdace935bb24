"""Who ended a thread's wait: the kernel's sched:sched_waking events of the target's threads.

`sched_waking` fires in try_to_wake_up, in the context of the task that wakes (its
`common_pid`), with the woken thread in its `pid` field. (`sched_wakeup` fires later and,
for a wake-up queued to another CPU, in that CPU's interrupt, where `common_pid` is
whichever task ran there: the wrong task.) A wake-up made from an interrupt (a timer that
expired: a wait's own timeout, a sleep's end) carries the hard- or soft-irq flag and is
the timer's, not the interrupted task's.

One event per online CPU, every task (pid -1), filtered in the kernel to the followed
threads as the woken: reading other tasks' scheduling needs root or CAP_PERFMON (at
perf_event_paranoid 2); where the kernel refuses, `PerfRefused` says why in one line and no
wait names a waker.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import platform
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from gilprof.sampling.native.perf import (
    _HEADER,
    PERF_EVENT_OPEN,
    PerfRefused,
    _Attr,
    _Libc,
    ring_data,
    ring_release,
)

TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
EVENT = "sched/sched_waking"
_TYPE_TRACEPOINT = 2
_SAMPLE_TID, _SAMPLE_TIME, _SAMPLE_RAW = 1 << 1, 1 << 2, 1 << 10
_DISABLED, _USE_CLOCKID = 1 << 0, 1 << 25
_CLOCK_MONOTONIC = 1
_FLAG_FD_CLOEXEC = 8
_IOC_ENABLE = 0x2400
_IOC_SET_FILTER = 0x40082406  # _IOW('$', 6, char *)
_RECORD_SAMPLE, _RECORD_LOST = 9, 2
PAGES = 8  # per CPU: ~500 wake-ups between two drains (a tick)
_FIXED = struct.Struct("<IIQI")  # pid, tid, time, raw size
_RAW = struct.Struct("<HBBi16sii")  # common_type, flags, preempt count, common_pid, comm, pid, prio
_WHOLE = 8 + _FIXED.size + _RAW.size  # header, fixed fields, raw
_WOKEN_AT = 8 + _FIXED.size + struct.calcsize("<HBBi16s")  # the woken pid, in the raw part
_I32 = struct.Struct("<i")
_IRQ_FLAGS = 0x08 | 0x10  # TRACE_FLAG_HARDIRQ | TRACE_FLAG_SOFTIRQ
MAX_FILTERED = 200  # threads named in the kernel's filter; more: every wake-up, filtered here


@dataclass(frozen=True, slots=True)
class Wakeup:
    time_ns: int  # CLOCK_MONOTONIC, the reader's clock
    woken: int  # the woken thread's Linux id
    waker: int  # the waking task's Linux id (0: an interrupt, see in_interrupt)
    waker_comm: str
    in_interrupt: bool  # a timer or device interrupt ended the wait, not a task


def _event_id() -> int:
    for root in TRACEFS:
        with (
            contextlib.suppress(OSError, ValueError),
            open(f"{root}/events/{EVENT}/id", encoding="ascii") as handle,
        ):
            return int(handle.read())
    raise PerfRefused(
        "who woke a thread is not read: the sched_waking tracepoint is not visible "
        "(tracefs not mounted at /sys/kernel/tracing, or not readable)"
    )


def online_cpus(text: str | None = None) -> list[int]:
    """The CPUs of /sys/devices/system/cpu/online ("0-3,8,10-11")."""
    if text is None:
        try:
            with open("/sys/devices/system/cpu/online", encoding="ascii") as handle:
                text = handle.read()
        except OSError:
            return list(range(os.cpu_count() or 1))
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return cpus


class WakeupTracer:
    def __init__(self) -> None:
        number = PERF_EVENT_OPEN.get(platform.machine())
        if number is None:
            raise PerfRefused(f"perf_event_open: no system call number for {platform.machine()}")
        attr = _Attr(
            type=_TYPE_TRACEPOINT,
            size=ctypes.sizeof(_Attr),
            config=_event_id(),
            sample_period=1,
            sample_type=_SAMPLE_TID | _SAMPLE_TIME | _SAMPLE_RAW,
            flags=_DISABLED | _USE_CLOCKID,
            clockid=_CLOCK_MONOTONIC,
        )
        libc = _Libc.get()
        self.fds: list[int] = []
        self.buffers: list[mmap.mmap] = []
        self.lost = 0
        self._filter: frozenset[int] | None = None
        self._wanted: frozenset[int] = frozenset()
        try:
            for cpu in online_cpus():
                fd = libc.syscall(number, ctypes.byref(attr), -1, cpu, -1, _FLAG_FD_CLOEXEC)
                if fd < 0:
                    errno = ctypes.get_errno()
                    why = os.strerror(errno)
                    if errno in (1, 13):
                        why += " (reading other tasks' wake-ups needs root or CAP_PERFMON)"
                    raise PerfRefused(f"who woke a thread is not read: {why}", errno)
                self.fds.append(int(fd))
                self.buffers.append(
                    mmap.mmap(int(fd), (1 + PAGES) * mmap.PAGESIZE, mmap.MAP_SHARED,
                              mmap.PROT_READ | mmap.PROT_WRITE)
                )  # fmt: skip
        except OSError as exc:
            self.close()
            raise PerfRefused(f"who woke a thread is not read: {exc.strerror}") from None
        except PerfRefused:
            self.close()
            raise
        for fd in self.fds:
            libc.ioctl(fd, _IOC_ENABLE, 0)

    def follow(self, tids: Iterable[int]) -> None:
        """Wake-ups of these threads (the woken) only; the kernel filters where it can."""
        wanted = frozenset(tids)
        self._wanted = wanted
        if wanted == self._filter or len(wanted) > MAX_FILTERED:
            return
        text = " || ".join(f"pid == {tid}" for tid in sorted(wanted)) or "pid == -1"
        buffer = ctypes.create_string_buffer(text.encode())
        libc = _Libc.get()
        for fd in self.fds:
            libc.ioctl(fd, _IOC_SET_FILTER, buffer)  # refused: every wake-up, filtered below
        self._filter = wanted

    def drain(self, only: Iterable[int] | None = None) -> list[Wakeup]:
        """Every wake-up of a followed thread (of those in `only`, where given) since the
        last drain, in time order; the others are dropped unread."""
        out: list[Wakeup] = []
        wanted = self._wanted if only is None else self._wanted.intersection(only)
        for buffer in self.buffers:
            data, head, tail = ring_data(buffer, PAGES)
            if head == tail:
                continue
            limit = min(len(data), head - tail)
            offset = 0
            header, woken_at = _HEADER.unpack_from, _I32.unpack_from
            while offset + 8 <= limit:
                kind, _misc, length = header(data, offset)
                if length < 8 or offset + length > limit:
                    break
                if (
                    kind == _RECORD_SAMPLE
                    and length >= _WHOLE
                    and woken_at(data, offset + _WOKEN_AT)[0] in wanted  # most are not
                ):
                    _pid, _tid, time_ns, _size = _FIXED.unpack_from(data, offset + 8)
                    raw = _RAW.unpack_from(data, offset + 8 + _FIXED.size)
                    _type, flags, _preempt, waker, comm, woken, _prio = raw
                    irq = bool(flags & _IRQ_FLAGS) or waker == 0
                    name = comm.split(b"\0", 1)[0].decode("utf-8", "replace")
                    out.append(Wakeup(time_ns, woken, 0 if irq else waker, name, irq))
                elif kind == _RECORD_LOST and length >= 24:
                    self.lost += int.from_bytes(data[offset + 16 : offset + 24], "little")
                offset += length
            ring_release(buffer, head)
        out.sort(key=lambda w: w.time_ns)
        return out

    def close(self) -> None:
        for buffer in self.buffers:
            with contextlib.suppress(BufferError):
                buffer.close()
        for fd in self.fds:
            os.close(fd)
        self.buffers.clear()
        self.fds.clear()
