"""Thread states read off native stacks, and the blame arithmetic over aligned spans."""

from __future__ import annotations

import pytest

from gilprof.analysis.contention import NO_HOLDER, analyze
from gilprof.model import Frame, Mode, Sample, SamplingInfo, Target, ThreadState
from gilprof.profile import Profile
from gilprof.sampling.backends.native import classify

PY = "/srv/app/loop.py"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"


def stack(*names: str) -> tuple[Frame, ...]:
    """`py:fn` Python frames, `c:fn@file` native frames, root first."""
    frames = []
    for name in names:
        kind, _, rest = name.partition(":")
        fn, _, file = rest.partition("@")
        frames.append(Frame(fn, PY if kind == "py" else (file or LIBC), 1 if kind == "py" else 0))
    return tuple(frames)


@pytest.mark.parametrize(
    "frames,state",
    [
        (stack("py:main", "py:spin"), ThreadState.HELD),
        (stack("py:main", "py:spin", "c:pthread_cond_timedwait"), ThreadState.WAITING),
        (
            stack("py:main", "c:zlib_compress_impl@zlibmodule.c", "c:pthread_cond_timedwait"),
            ThreadState.WAITING,
        ),
        # after time.sleep the thread takes the GIL back: that is a GIL wait, not sleep
        (
            stack("py:main", "c:time_sleep@timemodule.c", "c:pthread_cond_timedwait"),
            ThreadState.WAITING,
        ),
        (stack("py:main", "c:time_sleep@timemodule.c", "c:clock_nanosleep"), ThreadState.IDLE),
        (
            stack(
                "py:wait",
                "c:lock_PyThread_acquire_lock@_threadmodule.c",
                "c:PyThread_acquire_lock_timed@thread_pthread.h",
                "c:0x7f00",
            ),
            ThreadState.IDLE,
        ),
        # lock in hand, taking the GIL back: the wrapper is still on the stack, the primitive is not
        (
            stack(
                "py:wait",
                "c:lock_PyThread_acquire_lock@_threadmodule.c",
                "c:pthread_cond_timedwait",
            ),
            ThreadState.WAITING,
        ),
        (
            stack("py:main", "c:zlib_compress_impl@zlibmodule.c", "c:deflate@/lib/libz.so.1"),
            ThreadState.NATIVE,
        ),
        (stack("py:main", "c:_pickle_loads@_pickle.c"), ThreadState.HELD),
        (
            stack("py:main", "py:spin", "c:__tls_get_addr@/lib64/ld-linux-x86-64.so.2"),
            ThreadState.HELD,
        ),
        (stack("py:main", "c:0x7f00", "c:0x7f01"), ThreadState.UNCLASSIFIED),
        # Stacks py-spy 0.4.3 showed on 3.11/3.12 (benchmarks/accuracy/README.md, "native stacks").
        # A clock read in Python code holds the GIL; on 3.12 an unexported function of the python
        # binary (file "?") sits above it.
        (stack("py:spin", "c:clock_gettime", "c:0x7f3f29325b66@[vdso]"), ThreadState.HELD),
        (
            stack("py:spin", "c:0x5627cd980d60@?", "c:clock_gettime", "c:0x7f0eaf861b66@[vdso]"),
            ThreadState.HELD,
        ),
        (stack("py:spin", "c:0x7f3f29325b40@[vdso]"), ThreadState.HELD),
        # The GIL's mutex hand-off (__pthread_mutex_unlock_usercnt -> __lll_lock_wake, unnamed):
        # either side of the release, so unclassified rather than guessed.
        (stack("py:spin", "c:0x7f3f28aabcae", "c:0x7f3f28aa4193"), ThreadState.UNCLASSIFIED),
        (stack("py:spin", "c:pthread_cond_signal"), ThreadState.UNCLASSIFIED),
        (stack("py:spin", "c:pthread_mutex_lock", "c:0x7f3f28aa412b"), ThreadState.UNCLASSIFIED),
        (
            stack(
                "py:main",
                "c:zlib_compress_impl@zlibmodule.c",
                "c:0x7f64646abcae",
                "c:0x7f64646a4193",
            ),
            ThreadState.UNCLASSIFIED,
        ),
        # waits end in pthread_cond_*wait plus __futex_abstimed_wait_common (unnamed)
        (stack("py:spin", "c:pthread_cond_timedwait", "c:0x7f3f28aa3f16"), ThreadState.WAITING),
        (stack("py:spin", "c:pthread_cond_wait", "c:0x7f3f28aa412b"), ThreadState.WAITING),
        # the unwinder sometimes loses the zlib module's frames: libz directly under Python
        (
            stack("py:compress", "c:0x7f0b33d62068@/lib/libz.so.1", "c:adler32_z@/lib/libz.so.1"),
            ThreadState.NATIVE,
        ),
        (stack("c:start_thread", "c:epoll_wait"), ThreadState.IDLE),
    ],
)
def test_classify(frames, state):
    assert classify(frames) is state


def _profile(spans):
    profile = Profile(Target(pid=1), SamplingInfo("test", "0", Mode.CONTENTION, 100.0))
    samples = [
        (Sample(tid, name, frames, 1, classify(frames)), a, b) for tid, name, frames, a, b in spans
    ]
    profile.add_window(0.0, 1.0, 100, [], samples)
    profile.finish()
    return profile


def test_blame_is_the_overlap_of_waiting_and_holding():
    hold = stack("py:main", "py:spin")
    wait = stack("py:main", "py:spin", "c:pthread_cond_timedwait")
    idle = stack("py:main", "c:time_sleep@timemodule.c", "c:clock_nanosleep")
    c = analyze(
        _profile(
            [
                (1, "a", hold, 0.0, 0.6),
                (1, "a", wait, 0.6, 1.0),
                (2, "b", wait, 0.0, 0.5),
                (2, "b", idle, 0.5, 0.7),
                (2, "b", hold, 0.7, 1.0),
            ]
        )
    )
    threads = {t.name: t for t in c.threads}
    assert threads["a"].held_share == pytest.approx(0.6) and threads[
        "a"
    ].wait_share == pytest.approx(0.4)
    assert threads["b"].held_share == pytest.approx(0.3) and threads[
        "b"
    ].wait_share == pytest.approx(0.5)
    assert threads["b"].idle_share == pytest.approx(0.2)
    blame = {(b.waiter, b.holder): b.share for b in c.blame}
    assert blame[("b", "a")] == pytest.approx(0.5)
    assert blame[("a", "b")] == pytest.approx(0.3)
    assert blame[("a", NO_HOLDER)] == pytest.approx(0.1)  # 0.6-0.7: a waits, b sleeps
    assert c.utilization == pytest.approx(0.9)
    assert {(w.thread, w.function) for w in c.wait_sites} == {("a", "spin"), ("b", "spin")}
