"""GIL contention from native stacks: who waits for the GIL, and who holds it meanwhile.

Mechanism (CPython 3.10-3.13, py-spy `--native --idle`): py-spy merges native frames into the
Python stack and hides the interpreter's own eval-loop frames, so what lies *below* a
thread's innermost Python frame says what the thread is doing:

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

Every thread is sampled at the same ticks, so the states of all threads line up in time and
the blame matrix (while A waits, B holds in function f) is the overlap of their spans.
Limits: a C extension that keeps the GIL while calling into its own shared library counts
as native; builds without symbols show only addresses (unclassified); free-threaded builds
have no GIL and are not supported.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

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


def is_python_frame(frame: Frame) -> bool:
    f = frame.file
    return f.endswith((".py", ".pyw", ".pyx")) or f.startswith("<") or f == ""


def classify(frames: Sequence[Frame]) -> ThreadState:
    """The state of a thread from its merged native+Python stack (root first)."""
    innermost = max((i for i, f in enumerate(frames) if is_python_frame(f)), default=-1)
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


def python_function(frames: Sequence[Frame]) -> Frame | None:
    """The innermost Python frame: where a waiting thread waits, where a holder runs."""
    for frame in reversed(frames):
        if is_python_frame(frame) and frame.file:
            return frame
    return None


@dataclass(frozen=True)
class ThreadContention:
    tid: int
    name: str
    held_share: float
    wait_share: float
    native_share: float
    idle_share: float
    unclassified_share: float


@dataclass(frozen=True)
class WaitSite:
    thread: str
    function: str
    file: str
    share: float


@dataclass(frozen=True)
class Blame:
    waiter: str
    holder: str
    holder_function: str
    holder_file: str
    share: float


@dataclass(frozen=True)
class Contention:
    seconds: float
    utilization: float
    threads: tuple[ThreadContention, ...]
    wait_sites: tuple[WaitSite, ...]
    blame: tuple[Blame, ...]


NO_HOLDER = "(nobody: GIL in hand-off)"


def analyze(profile: object) -> Contention:
    """Contention figures from a contention-mode profile's spans (time-weighted)."""
    from gilprof.attribution import thread_label
    from gilprof.profile import Profile

    assert isinstance(profile, Profile)
    per_state: dict[int, dict[ThreadState, float]] = {}
    wait_sites: dict[tuple[str, str, str], float] = {}
    blame: dict[tuple[str, str, str, str], float] = {}
    held_any = 0.0
    total = 0.0
    func_cache: dict[int, Frame | None] = {}

    def func_of(stack: int) -> Frame | None:
        if stack not in func_cache:
            func_cache[stack] = python_function(profile.stack_frames(stack))
        return func_cache[stack]

    for window in profile.windows:
        total += window.seconds
        # Boundaries of every span: between two boundaries each thread's state is constant.
        points = sorted({t for span in window.spans for t in (span[2], span[3])})
        if len(points) < 2:
            continue
        by_thread: dict[int, list[tuple[float, float, int]]] = {}
        for tid, stack, t0, t1 in window.spans:
            by_thread.setdefault(tid, []).append((t0, t1, stack))
        cursors = {tid: 0 for tid in by_thread}
        for tid in by_thread:
            by_thread[tid].sort()
        for a, b in itertools.pairwise(points):
            dt = b - a
            if dt <= 0:
                continue
            holders: list[tuple[int, int]] = []
            waiters: list[tuple[int, int]] = []
            for tid, spans in by_thread.items():
                i = cursors[tid]
                while i < len(spans) and spans[i][1] <= a:
                    i += 1
                cursors[tid] = i
                if i == len(spans) or spans[i][0] > a:
                    continue
                stack = spans[i][2]
                state = profile.stacks[stack].state
                states = per_state.setdefault(tid, {})
                states[state] = states.get(state, 0.0) + dt
                if state is ThreadState.HELD:
                    holders.append((tid, stack))
                elif state is ThreadState.WAITING:
                    waiters.append((tid, stack))
            if holders:
                held_any += dt
            for tid, stack in waiters:
                name = thread_label(profile, tid)
                where = func_of(stack)
                site = (name, where.name if where else "?", os.path.basename(where.file) if where else "")
                wait_sites[site] = wait_sites.get(site, 0.0) + dt
                if not holders:
                    key = (name, NO_HOLDER, "", "")
                    blame[key] = blame.get(key, 0.0) + dt
                for htid, hstack in holders:
                    hf = func_of(hstack)
                    key = (name, thread_label(profile, htid), hf.name if hf else "?",
                           os.path.basename(hf.file) if hf else "")
                    blame[key] = blame.get(key, 0.0) + dt / len(holders)

    def share(seconds: float) -> float:
        return min(1.0, seconds / total) if total > 0 else 0.0

    threads = []
    for tid, states in per_state.items():
        threads.append(ThreadContention(
            tid, thread_label(profile, tid),
            share(states.get(ThreadState.HELD, 0.0)), share(states.get(ThreadState.WAITING, 0.0)),
            share(states.get(ThreadState.NATIVE, 0.0)), share(states.get(ThreadState.IDLE, 0.0)),
            share(states.get(ThreadState.UNCLASSIFIED, 0.0))))
    threads.sort(key=lambda t: (-(t.held_share + t.wait_share), t.tid))
    sites = sorted((WaitSite(t, f, file, share(v)) for (t, f, file), v in wait_sites.items()),
                   key=lambda w: -w.share)
    blamed = sorted((Blame(w, h, f, file, share(v)) for (w, h, f, file), v in blame.items()),
                    key=lambda b: -b.share)
    return Contention(total, share(held_any), tuple(threads), tuple(sites), tuple(blamed))
