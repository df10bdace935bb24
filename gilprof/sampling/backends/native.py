"""A thread's GIL state read off its merged native+Python stack (py-spy `--native --idle`).

py-spy merges native frames into the Python stack and hides every frame of the interpreter
itself (python binary, libpython) except the eval loop, which it replaces by the Python
frames, and a few whitelisted C functions (`time_sleep`, `thread_run`, `lock_*`, ...). So
`take_gil`, `drop_gil` and `PyEval_RestoreThread` never appear; what lies *below* a thread's
innermost Python frame says what the thread is doing (stacks seen on 3.11-3.13, see
benchmarks/accuracy/README.md):

- nothing, or a clock read (`clock_gettime` and the `[vdso]` it jumps into): executing
  bytecode, so it holds the GIL;
- leaf `pthread_cond_timedwait`/`pthread_cond_wait` (followed by at most unnamed libc
  frames, `__futex_abstimed_wait_common`) not called by a lock acquire: waiting to take the
  GIL (returning from a C call that released it, `time.sleep` included, or forced off by the
  other thread's drop request);
- leaf `PyThread_acquire_lock_timed`, sem waits, sleep/select/poll/recv: idle (GIL released);
- a C function of CPython or an extension built against it (`_pickle_loads`,
  `zlib_compress_impl`): holds the GIL; a frame in another shared library (`deflate` in
  libz, MPI progress in libmpi): running native code without the GIL;
- the GIL's own mutex traffic (leaf `pthread_mutex_lock`/`_unlock`, `pthread_cond_signal`,
  or only unnamed libc frames, which resolve to `__pthread_mutex_unlock_usercnt` ->
  `__lll_lock_wake`): a hand-off inside take_gil/drop_gil that may be either side of the
  release; reported as unclassified (measured 0.2-11% of a contended thread) rather than
  guessed.

This is parsing at the edge: backends map each sampled stack to a ThreadState here, and the
analysis above only counts states. Limits: a C extension that keeps the GIL while calling
into its own shared library counts as native; builds without symbols show only addresses
(unclassified); free-threaded builds have no GIL and are not supported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gilprof.model import Frame, ThreadState
from gilprof.wait_classes import SLEEP_SYMBOLS

_GIL_WAIT = frozenset({"pthread_cond_timedwait", "pthread_cond_wait"})
# The GIL's mutex and condition traffic in take_gil/drop_gil: held or released depending on
# which side of `locked` the thread is, which the stack cannot tell.
_HANDOFF = frozenset(
    {
        "pthread_mutex_lock",
        "pthread_mutex_unlock",
        "__pthread_mutex_unlock_usercnt",
        "__lll_lock_wait",
        "__lll_lock_wake",
        "pthread_cond_signal",
        "pthread_cond_broadcast",
    }
)
# The primitives a thread sits in while it waits for a lock (not the Python-level wrappers
# such as lock_PyThread_acquire_lock, which stay on the stack while the thread, lock in
# hand, takes the GIL back).
_LOCK_WAIT = frozenset(
    {
        "PyThread_acquire_lock_timed",
        "sem_timedwait",
        "sem_clock_wait",
        "sem_wait",
        "do_futex_wait",
        "_PySemaphore_Wait",
        "PyMutex_Lock",
        "_PyMutex_LockTimed",
        "_PyParkingLot_Park",
    }
)
# Native leaves of a thread blocked in the kernel on I/O, a child or a signal (no GIL, no CPU).
IO_WAIT_SYMBOLS = frozenset(
    {
        "select",
        "__select",
        "pselect",
        "poll",
        "__poll",
        "ppoll",
        "epoll_wait",
        "epoll_pwait",
        "read",
        "__read",
        "recv",
        "__recv",
        "recvfrom",
        "recvmsg",
        "accept",
        "accept4",
        "__libc_recv",
        "__libc_read",
        "connect",
        "__connect",
        "wait4",
        "waitpid",
        "sigwait",
        "sigtimedwait",
        "pause",
        # system calls as the thread-state reader names them (/proc/TID/syscall)
        "epoll_pwait2",
        "recvmmsg",
        "rt_sigtimedwait",
        "waitid",
    }
)
_IDLE = IO_WAIT_SYMBOLS | SLEEP_SYMBOLS
# Clock reads: time.perf_counter() in a Python loop jumps into the vDSO with the GIL held.
_CLOCK = frozenset(
    {
        "clock_gettime",
        "__clock_gettime",
        "gettimeofday",
        "__vdso_clock_gettime",
        "__vdso_gettimeofday",
        "__kernel_clock_gettime",  # aarch64's vDSO names them so
        "__kernel_gettimeofday",
        "time_perf_counter",
        "time_monotonic",
        "time_time",
    }
)
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
# py-spy's file for an address in no module it could name (seen on 3.12: the python binary's
# own unexported functions above a clock read): says nothing about the GIL either way.
_NO_MODULE = frozenset({"", "?"})
_CPYTHON_FILE = re.compile(r"(\.(c|h)$)|libpython|cpython-3|/python3(\.\d+)?$|/python$")
_VDSO_FILE = re.compile(r"^\[vdso\]$|linux-vdso")
# Called by the interpreter itself (allocation, TLS, string ops, clocks) as often as by
# extensions: on their own they say nothing about the GIL.
_SYSTEM_FILE = re.compile(
    r"(^|/)(libc|ld-linux[^/]*|libpthread|libm|libdl|libgcc_s|libstdc\+\+)[.-]|^\[vdso\]$|linux-vdso"
)


def classify(frames: Sequence[Frame]) -> ThreadState:
    """The state of a thread from its merged native+Python stack (root first)."""
    innermost = max((i for i, f in enumerate(frames) if f.is_python), default=-1)
    below = frames[innermost + 1 :]
    tail = [f for f in below if not _HEX.match(f.name)]
    if innermost < 0 and not tail:
        return ThreadState.UNCLASSIFIED
    # The leaf-most named frame decides: `time_sleep -> clock_nanosleep` is idle, but
    # `time_sleep -> pthread_cond_timedwait` is the thread taking the GIL back after the
    # sleep; a condition wait is a GIL wait unless the thread is inside a lock primitive.
    names = [f.name for f in tail]
    if names:
        if any(name in _LOCK_WAIT for name in names):
            return ThreadState.IDLE
        if names[-1] in _GIL_WAIT:
            return ThreadState.WAITING
        if names[-1] in _IDLE:
            return ThreadState.IDLE
    if innermost < 0:
        return ThreadState.IDLE  # a native thread that never ran Python (helper threads)
    external = [
        f
        for f in below
        if not _CPYTHON_FILE.search(f.file)
        and not _SYSTEM_FILE.search(f.file)
        and not f.name.startswith(("_Py", "Py"))
        and f.file not in _NO_MODULE
    ]
    if external:
        return ThreadState.NATIVE  # in a library of its own (libz, libmpi): GIL released
    if names and names[-1] in _HANDOFF:
        return ThreadState.UNCLASSIFIED
    unnamed = [f for f in below if _HEX.match(f.name) and f.file not in _NO_MODULE]
    if (names and names[-1] in _CLOCK) or all(_VDSO_FILE.search(f.file) for f in unnamed):
        return ThreadState.HELD  # bytecode, CPython's C code, or a clock read
    # Only unnamed libc frames under the named ones: the GIL's mutex hand-off.
    return ThreadState.UNCLASSIFIED
