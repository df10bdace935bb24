"""The checks a target passes before anything read from it goes into a profile.

A layout (from a table or from the target's `_Py_DebugOffsets`) is only trusted once it
describes this live process: its thread list names only the target's threads, the GIL's
`locked` reads 0 or 1 and its holder is one of those threads, a thread's frame points at a
code object, and the GIL's condition variables count no fewer waiters than the kernel shows
blocked on them. Any failure is a one-line refusal (StatesUnavailable), never a number.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gilprof.sampling.threadstate.layout import GIL_LAST_HOLDER, GIL_LOCKED
from gilprof.sampling.threadstate.memory import MemoryReadError, NotReadyYet, StatesUnavailable
from gilprof.sampling.threadstate.syscalls import (
    GIL_SWITCH_WAIT,
    GIL_WAIT,
    SyscallFiles,
    classify,
)

if TYPE_CHECKING:
    from gilprof.sampling.threadstate.target import Interpreter, PythonThread

WAITER_LOOKS = 20  # looks at the GIL's waiters when a target is checked


def _tasks(pid: int) -> set[int]:
    try:
        return {int(name) for name in os.listdir(f"/proc/{pid}/task")}
    except OSError:
        raise StatesUnavailable(f"PID {pid}: no such process") from None


def check(interpreter: Interpreter, debug_gil: dict[str, int]) -> None:
    """Refuse a layout that does not describe this process: the thread list must name
    only the target's own threads, `locked` must be 0 or 1, the holder one of the threads,
    and a thread's frame must point at a code object (its type is PyCode_Type)."""
    pid, lay = interpreter.pid, interpreter.layout
    refuse = f"PID {pid}: the CPython 3.{lay.minor} layout ({lay.source}) does not match"
    if debug_gil and (
        debug_gil["holder"] != debug_gil["gil_runtime_state"] + GIL_LAST_HOLDER
        or debug_gil["locked"] != debug_gil["gil_runtime_state"] + GIL_LOCKED
    ):
        raise StatesUnavailable(f"{refuse}: _Py_DebugOffsets places the GIL's fields elsewhere")
    try:
        if not interpreter.main_interpreter():
            raise NotReadyYet(f"PID {pid}: interpreter not initialised yet")
        interpreter.gil = interpreter.find_gil()
        threads = interpreter.threads()
    except MemoryReadError:  # tried again until the attach timeout, then refused with this
        raise NotReadyYet(
            f"{refuse}, or the process is still starting: its thread list is not readable"
        ) from None
    if not threads:
        raise NotReadyYet(f"PID {pid}: no Python thread yet")
    stray = sorted(interpreter.stray) + sorted(set(threads) - _tasks(pid))
    if stray:
        where = " (in its own PID namespace)" if interpreter.ids.nested else ""
        raise StatesUnavailable(f"{refuse}: thread ids {stray[:3]} are not its threads{where}")
    holders: set[int | None] = set()
    for _ in range(20):  # a hand-off can leave `locked` 0 for a moment: look several times
        try:
            locked, holder = interpreter.holder()
        except MemoryReadError:
            raise StatesUnavailable(f"{refuse}: the GIL is not readable") from None
        if locked not in (0, 1):
            raise StatesUnavailable(f"{refuse}: the GIL's `locked` reads {locked}")
        if locked:
            holders.add(holder)
    if holders and not holders & set(threads):
        raise StatesUnavailable(f"{refuse}: the GIL's holder is none of its threads")
    if not any(_has_code(interpreter, thread.tstate) for thread in threads.values()):
        raise StatesUnavailable(f"{refuse}: no thread's frame points at a code object")
    _check_gil_waiters(interpreter, threads, refuse)


def _check_gil_waiters(
    interpreter: Interpreter, threads: dict[int, PythonThread], refuse: str
) -> None:
    """The GIL's waiters as the kernel shows them must agree with the condition variables'
    own count: the threads /proc shows blocked in futex on the GIL's cond or switch_cond
    are inside pthread_cond_wait, so glibc's __wrefs count of those two cannot be lower,
    nor higher than the thread count. One look can catch a waiter between the two reads;
    a layout (or a libc) that reads them wrong disagrees at most looks. A target with no
    waiter passes trivially: the reader keeps checking at every tick (reader.py)."""
    files = SyscallFiles(interpreter.pid)
    wrong = 0
    try:
        for _ in range(WAITER_LOOKS):
            blocked = 0
            for tid in threads:
                activity = classify(files.read(tid) or b"", interpreter.gil)
                in_gil_cond = activity.kind in (GIL_WAIT, GIL_SWITCH_WAIT)
                blocked += in_gil_cond and activity.syscall == "cond"
            try:
                _, _, counted = interpreter.gil_state()
            except MemoryReadError:
                raise StatesUnavailable(f"{refuse}: the GIL is not readable") from None
            wrong += counted > len(threads) or blocked > counted
    finally:
        files.close()
    if wrong > WAITER_LOOKS // 2:
        raise StatesUnavailable(
            f"{refuse}: the GIL's condition variables count other waiters than the kernel "
            f"shows blocked on them ({wrong} of {WAITER_LOOKS} looks; not glibc's layout?)"
        )


def _has_code(interpreter: Interpreter, tstate: int) -> bool:
    try:
        return bool(interpreter.stack(tstate))
    except MemoryReadError:
        return False
