"""Stacks py-spy 0.4.3 recorded at ticks where the target's own truth is known (issue 11).

Captured with benchmarks/accuracy/accuracy_ticks.py on CPython 3.11.7 (pyenv build, zlib
module linked against the system libz): each stack is the sample of one thread at one tick,
paired with what that thread was doing when py-spy stopped it. At the thread's own stop the
classifier agreed with the truth on 99.5-100% of ticks (duo, planted) and the misses of
contention mode came from when threads are stopped, not from how stacks are read
(docs/accuracy.md, "Contention mode tick by tick"); these pin the readings down. Also the
benchmark truth's bound on a native call (accuracy_truth._native_ends).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from gilprof.model import Frame, ThreadState
from gilprof.sampling.backends.native import classify

ROOT = Path(__file__).resolve().parents[2]
PY311 = "/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py"
LIBPY = "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0"
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
LIBZ = "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13"
WORKLOADS = "/work/main/benchmarks/accuracy/workloads.py"
ZLIB_SRC = "/tmp/python-build.20260509073455.222/Python-3.11.7/Modules"

THREAD = (
    Frame("0x7fce5e9278ec", LIBC),
    Frame("0x7fce5e8a71f5", LIBC),
    Frame("thread_run", LIBPY),
    Frame("Thread._bootstrap", PY311, 1002),
    Frame("Thread._bootstrap_inner", PY311, 1045),
    Frame("Thread.run", PY311, 982),
)
IN_COMPRESS = (
    *THREAD,
    Frame("compressor", WORKLOADS, 164),
    Frame("zlib_compress", f"{ZLIB_SRC}/clinic/zlibmodule.c.h", 64),
    Frame("zlib_compress_impl", f"{ZLIB_SRC}/zlibmodule.c", 374),
)


@pytest.mark.parametrize(
    "frames,state",
    [
        # truth native (inside the call's CPU time): deflate in the system libz
        (
            (*IN_COMPRESS, Frame("deflate", LIBZ), Frame("0x7fce5e482f7c", LIBZ)),
            ThreadState.NATIVE,
        ),
        # truth held: `thread_time()` right after the call, a clock_gettime system call
        # made with the GIL in hand (what the zlib truth counted as a wait before it was
        # taken out of the bracket)
        (
            (
                *THREAD[3:],
                Frame("compressor", WORKLOADS, 169),
                Frame("clock_gettime", LIBC),
                Frame("0x7fe75e95fc01", "[vdso]"),
            ),
            ThreadState.HELD,
        ),
        # truth wait: the call is over, the thread takes the GIL back
        (
            (*IN_COMPRESS, Frame("pthread_cond_timedwait", LIBC)),
            ThreadState.WAITING,
        ),
    ],
)
def test_zlib_thread_at_ticks(frames: tuple[Frame, ...], state: ThreadState) -> None:
    assert classify(frames) is state


def _truth_module():
    name = "gilprof_accuracy_truth"
    if name not in sys.modules:
        path = ROOT / "benchmarks" / "accuracy" / "accuracy_truth.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_native_call_bounded_by_the_forced_switch() -> None:
    """The spinner drops the GIL 5 ms or more after the waiter asks, so a call that ended
    at 10.0 s, the spinner's last run before it ending at 9.9 s, was native until 9.895 s at
    the latest; never less than its CPU time, and the whole call where the GIL was free."""
    ends = _truth_module()._native_ends
    naps = [(9.8, 9.81, 10.0), (11.0, 11.02, 11.03)]
    other_ends = [9.5, 9.9, 10.5]
    assert ends(naps, other_ends, 0.005) == [
        (9.8, pytest.approx(9.895)),
        (11.0, 11.03),  # nobody ran during it: the GIL was free when it returned
    ]
    # a drop sooner than the switch interval after the CPU-time estimate: the estimate stands
    assert ends([(9.89, 9.898, 10.0)], other_ends, 0.005) == [(9.89, 9.898)]
