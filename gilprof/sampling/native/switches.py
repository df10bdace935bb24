"""What the kernel's context switches of a followed thread tell the native locator: whether
it blocked or was preempted, when, and where (perf.ThreadEvent's sample at each switch)."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from gilprof.native_classes import NativeClass
from gilprof.sampling.native.perf import SWITCH_BLOCKED, SWITCH_IN, SWITCH_PREEMPTED

if TYPE_CHECKING:
    from gilprof.sampling.native.perf import CpuSample

BRIDGE_NS = 30_000_000  # the longest gap between two samples in one place that is bridged
SWITCH_SAMPLE_NS = 50_000  # a context switch's sample precedes its switch record by this at most


class SwitchEvidence:
    """The context-switch half of NativeLocator: per thread, the switches (time, kind) and the
    on-CPU samples (time-ordered), filled by NativeLocator.collect."""

    _switch_times: dict[int, list[int]]
    _switch_kinds: dict[int, list[str]]
    _times: dict[int, list[int]]
    _samples: dict[int, list[CpuSample]]

    def _class_at(self, tid: int, index: int, at_ns: int) -> NativeClass | None:
        raise NotImplementedError

    def _last_switch(self, tid: int, at_ns: int) -> tuple[int, str] | None:
        """(time, kind) of the thread's last context switch before `at_ns`."""
        switch_times = self._switch_times.get(tid)
        if not switch_times:
            return None
        last = bisect.bisect_right(switch_times, at_ns) - 1
        return None if last < 0 else (switch_times[last], self._switch_kinds[tid][last])

    def _switch_sample(self, tid: int, switch_ns: int) -> int | None:
        """The index of the kernel's sample of the switch at `switch_ns` (it precedes the
        switch record by at most SWITCH_SAMPLE_NS), if there is one."""
        times = self._times.get(tid) or []
        index = bisect.bisect_right(times, switch_ns) - 1
        if index < 0 or switch_ns - times[index] > SWITCH_SAMPLE_NS:
            return None
        return index

    def in_gil_wait(self, tid: int, at_ns: int) -> bool | None:
        """Whether a thread read running is inside the GIL's wait, by the kernel's sample
        of its last context switch (perf.ThreadEvent): blocked there and not run since
        (woken, waiting for a core), or preempted there. False where that sample is in
        other code, or the thread is on its CPU now; None where there is no such sample."""
        last = self._last_switch(tid, at_ns)
        if last is None:
            return None
        if last[1] == SWITCH_IN:
            return False
        index = self._switch_sample(tid, last[0])
        return None if index is None else self._class_at(tid, index, at_ns) is NativeClass.GIL

    def _preemption_sample(self, tid: int, at_ns: int) -> int | None:
        """The index of the kernel's sample of the thread's last context switch before
        `at_ns` where that switch is a preemption (the thread has not run since), if the
        kernel gave one (perf.ThreadEvent's switch samples: where it was preempted)."""
        last = self._last_switch(tid, at_ns)
        if last is None or last[1] != SWITCH_PREEMPTED:
            return None
        return self._switch_sample(tid, last[0])

    def _blocked_in_gil(self, tid: int, block_ns: int | None, at_ns: int) -> bool:
        """Whether the sample the kernel took as the thread blocked (a context switch's
        sample, perf.ThreadEvent: just before the switch record) is in the GIL's code."""
        index = None if block_ns is None else self._switch_sample(tid, block_ns)
        return index is not None and self._class_at(tid, index, at_ns) is NativeClass.GIL

    def _preempted(self, tid: int, at_ns: int) -> bool:
        """Whether the kernel's last context switch of the thread before `at_ns` is a
        preemption: runnable, off its CPU, at the reading."""
        last = self._last_switch(tid, at_ns)
        return last is not None and last[1] == SWITCH_PREEMPTED

    def _since_last_block(
        self, tid: int, at_ns: int, blocked_ns: int | None
    ) -> tuple[int, bool, int | None]:
        """(index of the thread's first sample since it last blocked, whether it was
        woken from it, when it blocked). From the kernel's context switches where it gave them: a switch
        out that was no preemption is a block. Otherwise from the reader's last blocked
        reading, if at most BRIDGE old."""
        switch_times = self._switch_times.get(tid)
        if switch_times:
            kinds = self._switch_kinds[tid]
            last = bisect.bisect_right(switch_times, at_ns) - 1
            block = last
            while block >= 0 and kinds[block] != SWITCH_BLOCKED:
                block -= 1
            if block < 0:
                return 0, False, None
            # blocked, and read running now: woken since, however long it slept
            times = self._times.get(tid) or []
            return bisect.bisect_right(times, switch_times[block]), True, switch_times[block]
        if blocked_ns is None:
            return 0, False, None
        times = self._times.get(tid) or []
        return bisect.bisect_right(times, blocked_ns), at_ns - blocked_ns <= BRIDGE_NS, blocked_ns
