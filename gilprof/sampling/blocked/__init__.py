"""The evidence for why a blocked thread waits, read without pausing it (gilprof.wait_classes
says what each piece means; this package only reads them):

- the native code that made the call (caller.CallerChain: return addresses at the stack
  pointer that /proc/TID/syscall gives);
- the descriptors the call waits on, and who is at their other end (descriptors);
- who ended the thread's last wait at the same place (native.wakeups: the kernel's
  sched_waking events). A wait is read while it lasts, and who ends it is known only once
  it has ended: a reading is given the waker of the last wait that ended at the same call
  site (system call and instruction pointer) of the same thread; the first wait at a site
  names none.
"""

from __future__ import annotations

import contextlib
import os

from gilprof.model import Frame
from gilprof.native_classes import NativeClass, NativeRules
from gilprof.sampling.blocked.caller import CallerChain
from gilprof.sampling.blocked.descriptors import Descriptors, descriptor_numbers
from gilprof.sampling.blocked.relation import JobRelations
from gilprof.sampling.native.perf import PerfRefused
from gilprof.sampling.native.wakeups import WakeupTracer
from gilprof.sampling.threadstate.memory import TargetMemory
from gilprof.wait_classes import (
    FD,
    INTERPRETER_TAG,
    WAKER_LAUNCHER,
    WAKER_PROCESS,
    WAKER_RANK,
    WAKER_THREAD,
    WAKER_TIMER,
    evidence_frame,
    native_caller_frame,
    waker_frame,
)

_SITES_KEPT = 4096


def parse_blocked(text: bytes) -> tuple[int, list[int], int, int] | None:
    """(call number, its six arguments, stack pointer, program counter) of a syscall line."""
    fields = text.split()
    if len(fields) < 9:
        return None
    try:
        number = int(fields[0])
        args = [int(f, 16) for f in fields[1:7]]
        return number, args, int(fields[7], 16), int(fields[8], 16)
    except ValueError:
        return None


class BlockedEvidence:
    def __init__(
        self, pid: int, memory: TargetMemory | None, aarch64: bool, interpreter_path: str
    ) -> None:
        self.pid = pid
        self.memory = memory
        self.relations = JobRelations(pid)
        self.callers = CallerChain(pid, memory, aarch64, interpreter_path)
        self.descriptors = Descriptors(pid, self.relations)
        self.tracer: WakeupTracer | None = None
        self.rules = NativeRules()  # the sampling run's (a recipe's [native] first)
        self.wakers_note = ""
        self._told = False
        self._read_at: dict[int, tuple[int, tuple[int, int]]] = {}  # tid -> (ns, site)
        self._wakers: dict[tuple[int, tuple[int, int]], Frame] = {}
        self._waker_words: dict[int, Frame] = {}

    def watch_wakeups(self) -> str:
        """Start reading who wakes the target's threads; '' or one line why not."""
        try:
            self.tracer = WakeupTracer()
        except PerfRefused as exc:
            self.wakers_note = f"{exc}; no wait names who ended it"
        return self.wakers_note

    def new_note(self) -> str:
        """Once: one line on evidence that could not be read (the target's descriptors)."""
        why = self.descriptors.unreadable
        if not why or self._told:
            return ""
        self._told = True
        return f"{why}: no wait is classed by what it waits on"

    def follow(self, tids: set[int]) -> None:
        if self.tracer is not None:
            self.tracer.follow(tids)

    def frames(self, syscall: str, text: bytes, now_ns: int) -> tuple[Frame, ...]:
        """The evidence frames of a blocked reading in `syscall` (its /proc line `text`)."""
        parsed = parse_blocked(text)
        if parsed is None:
            return ()
        _number, args, sp, _pc = parsed
        out: list[Frame] = []
        for library, symbol, interpreter in self.callers.callers(sp, now_ns):
            cls = self.rules.library_class(library)
            tagged = cls in (NativeClass.DEVICE, NativeClass.PEERS)
            tag = INTERPRETER_TAG if interpreter else (cls.value if tagged else "")
            out.append(native_caller_frame(library, symbol, tag))
        for fd in descriptor_numbers(syscall, args, self.pid, self.memory):
            described = self.descriptors.describe(fd)
            if described is not None:
                out.append(evidence_frame(FD, described[0], described[1]))
        return tuple(out)

    # ---- who ended the wait --------------------------------------------------------------

    def blocked_at(self, tid: int, text: bytes, now_ns: int) -> Frame | None:
        """Note that `tid` is blocked at this call site now; the waker frame of the last
        wait that ended at the same site, where one was seen."""
        if self.tracer is None:
            return None
        parsed = parse_blocked(text)
        if parsed is None:
            return None
        site = (parsed[0], parsed[3])
        if tid not in self._read_at:
            self._read_at[tid] = (now_ns, site)
        return self._wakers.get((tid, site))

    def drain(self) -> None:
        """Match the wake-ups since the last drain to the waits read before them."""
        if self.tracer is None:
            return
        # only a wait read before it can be matched: the other wake-ups are not built
        for wakeup in self.tracer.drain(self._read_at):
            read = self._read_at.get(wakeup.woken)
            if read is None or wakeup.time_ns < read[0]:
                continue
            del self._read_at[wakeup.woken]
            if len(self._wakers) > _SITES_KEPT:
                self._wakers.clear()
            self._wakers[(wakeup.woken, read[1])] = self._waker(wakeup.waker, wakeup.waker_comm)

    def _waker(self, waker: int, comm: str) -> Frame:
        known = self._waker_words.get(waker)
        if known is not None:
            return known
        if waker == 0:
            frame = waker_frame(WAKER_TIMER, "a timer or interrupt")
        elif os.path.exists(f"/proc/{self.pid}/task/{waker}"):
            name = comm
            with (
                contextlib.suppress(OSError),
                open(f"/proc/{self.pid}/task/{waker}/comm", encoding="utf-8") as handle,
            ):
                name = handle.read().strip()
            frame = waker_frame(WAKER_THREAD, f"thread {name!r} (tid {waker})", waker)
        else:
            tgid = _tgid(waker)
            relation = self.relations.relation(tgid) if tgid else "other"
            tag = {"rank": WAKER_RANK, "launcher": WAKER_LAUNCHER}.get(relation, WAKER_PROCESS)
            words = self.relations.describe(tgid) if tgid else f"task {comm} ({waker})"
            frame = waker_frame(tag, words)
        if len(self._waker_words) < _SITES_KEPT:
            self._waker_words[waker] = frame
        return frame

    def close(self) -> None:
        if self.tracer is not None:
            self.tracer.close()
            self.tracer = None


def _tgid(tid: int) -> int:
    with (
        contextlib.suppress(OSError, ValueError),
        open(f"/proc/{tid}/status", encoding="ascii", errors="replace") as handle,
    ):
        for line in handle:
            if line.startswith("Tgid:"):
                return int(line.split()[1])
    return 0
