"""A thread's GIL state read off its merged native+Python stack (py-spy `--native --idle`).

py-spy merges native frames into the Python stack and hides the interpreter's own eval-loop
frames, so what lies *below* a thread's innermost Python frame says what the thread is doing:

- nothing: it is executing bytecode, so it holds the GIL;
- leaf `pthread_cond_timedwait`/`pthread_cond_wait` (or `take_gil`, `PyEval_RestoreThread`)
  not called by a lock acquire: it is waiting to take the GIL (returning from a C call
  that released it, `time.sleep` included, or switched out by the other thread's drop
  request);
- leaf `PyThread_acquire_lock_timed`, sem waits, sleep/select/poll/recv: idle (GIL released);
- a C function of CPython or an extension built against it (`_pickle_loads`,
  `zlib_compress_impl`): holds the GIL; a frame in another shared library (`deflate` in
  libz, MPI progress in libmpi): running native code without the GIL;
- only unnamed addresses: unclassified, reported as such rather than guessed.

This is parsing at the edge: backends map each sampled stack to a ThreadState here, and the
analysis above only counts states. Limits: a C extension that keeps the GIL while calling
into its own shared library counts as native; builds without symbols show only addresses
(unclassified); free-threaded builds have no GIL and are not supported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gilprof.model import Frame, ThreadState

_GIL_WAIT = frozenset({"pthread_cond_timedwait", "pthread_cond_wait", "take_gil",
                       "PyEval_RestoreThread", "PyEval_AcquireThread", "_PyEval_AcquireLock",
                       "PyCOND_TIMEDWAIT", "PyMUTEX_LOCK", "pthread_mutex_lock"})
# The primitives a thread sits in while it waits for a lock (not the Python-level wrappers
# such as lock_PyThread_acquire_lock, which stay on the stack while the thread, lock in
# hand, takes the GIL back).
_LOCK_WAIT = frozenset({"PyThread_acquire_lock_timed", "sem_timedwait", "sem_clock_wait",
                        "sem_wait", "do_futex_wait", "_PySemaphore_Wait", "PyMutex_Lock",
                        "_PyMutex_LockTimed", "_PyParkingLot_Park"})
_IDLE = frozenset({"clock_nanosleep", "nanosleep", "__nanosleep", "pysleep", "time_sleep",
                   "select", "__select", "pselect", "poll", "__poll", "ppoll", "epoll_wait",
                   "epoll_pwait", "read", "__read", "recv", "__recv", "recvfrom", "recvmsg",
                   "accept", "accept4", "wait4", "waitpid", "__libc_recv", "__libc_read",
                   "sigwait", "sigtimedwait", "pause", "connect", "__connect"})
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
_CPYTHON_FILE = re.compile(r"(\.(c|h)$)|libpython|cpython-3|/python3(\.\d+)?$|/python$")
# Called by the interpreter itself (allocation, TLS, string ops) as often as by extensions:
# on their own they say nothing about the GIL.
_SYSTEM_FILE = re.compile(r"(^|/)(libc|ld-linux[^/]*|libpthread|libm|libdl|libgcc_s|libstdc\+\+)[.-]")


def classify(frames: Sequence[Frame]) -> ThreadState:
    """The state of a thread from its merged native+Python stack (root first)."""
    innermost = max((i for i, f in enumerate(frames) if f.is_python), default=-1)
    tail = [f for f in frames[innermost + 1:] if not _HEX.match(f.name)]
    unnamed = len(frames) - innermost - 1 - len(tail)
    if innermost < 0 and not tail:
        return ThreadState.UNCLASSIFIED
    # The leaf-most named frame decides: `time_sleep -> clock_nanosleep` is idle, but
    # `time_sleep -> pthread_cond_timedwait` is the thread taking the GIL back after the
    # sleep; a condition wait is a GIL wait unless the thread is inside a lock primitive.
    if tail:
        names = [f.name for f in tail]
        if any(name in _LOCK_WAIT for name in names):
            return ThreadState.IDLE
        if names[-1] in _GIL_WAIT:
            return ThreadState.WAITING
        if names[-1] in _IDLE:
            return ThreadState.IDLE
    if innermost < 0:
        return ThreadState.IDLE  # a native thread that never ran Python (helper threads)
    below = frames[innermost + 1:]
    external = [f for f in below if not _CPYTHON_FILE.search(f.file)
                and not _SYSTEM_FILE.search(f.file) and not f.name.startswith(("_Py", "Py"))]
    if external:
        return ThreadState.NATIVE  # in a library of its own (libz, libmpi): GIL released
    if not tail:
        return ThreadState.HELD if unnamed == 0 else ThreadState.UNCLASSIFIED
    return ThreadState.HELD  # CPython's C code, or libc called by it
