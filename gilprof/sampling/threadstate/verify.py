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
    Activity,
    SyscallFiles,
    classify,
)

if TYPE_CHECKING:
    from gilprof.sampling.threadstate.target import Interpreter, PythonThread

WAITER_LOOKS = 20  # looks at the GIL's waiters when a target is checked
_COND_WAIT = Activity(GIL_WAIT, "cond")


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
    if lay.tstate_holds_gil is not None and lay.tstate_gil_requested is not None:
        _check_own_gil_flags(interpreter, threads, refuse)


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
    arch = interpreter.located.arch
    wrong = 0
    try:
        for _ in range(WAITER_LOOKS):
            blocked = 0
            for tid in threads:
                activity = classify(files.read(tid) or b"", interpreter.gil, arch)
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


def _check_own_gil_flags(
    interpreter: Interpreter, threads: dict[int, PythonThread], refuse: str
) -> None:
    """3.15+: each thread's own `holds_gil` and `gil_requested` (PyThreadState ints the
    interpreter sets as it takes and waits for the GIL) must agree with what the reader
    reads elsewhere: the thread the GIL struct names as holder holds it by its own flag, and
    a thread the kernel shows blocked on the GIL's condition variable or mutex has
    requested it. Both flags read 0 or 1. The GIL changes hands between the reads of one
    look, so a look may disagree; a layout that reads the wrong words disagrees at most."""
    lay, mem, arch = interpreter.layout, interpreter.memory, interpreter.located.arch
    assert lay.tstate_holds_gil is not None and lay.tstate_gil_requested is not None
    files = SyscallFiles(interpreter.pid)
    wrong = 0
    try:
        for _ in range(WAITER_LOOKS):
            try:
                locked, holder, _ = interpreter.gil_state()
                flags = {
                    tid: (
                        mem.int32(thread.tstate + lay.tstate_holds_gil),
                        mem.int32(thread.tstate + lay.tstate_gil_requested),
                    )
                    for tid, thread in threads.items()
                }
            except MemoryReadError:
                raise StatesUnavailable(
                    f"{refuse}: its threads' GIL flags are not readable"
                ) from None
            odd = [f for pair in flags.values() for f in pair if f not in (0, 1)]
            if odd:
                raise StatesUnavailable(f"{refuse}: a thread's `holds_gil` reads {odd[0]}")
            # inside take_gil's condition-variable wait (the mutex is taken before the
            # request is flagged)
            waiting = [
                tid
                for tid in threads
                if classify(files.read(tid) or b"", interpreter.gil, arch) == _COND_WAIT
            ]
            holder_disagrees = locked == 1 and holder in flags and flags[holder][0] != 1
            waiter_disagrees = any(flags[tid][1] != 1 for tid in waiting)
            wrong += holder_disagrees or waiter_disagrees
    finally:
        files.close()
    if wrong > WAITER_LOOKS // 2:
        raise StatesUnavailable(
            f"{refuse}: the threads' own holds_gil/gil_requested disagree with the GIL's "
            f"holder and the kernel's waiters ({wrong} of {WAITER_LOOKS} looks)"
        )
