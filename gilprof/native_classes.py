"""What native time is: the one place that says which loaded library means what.

A thread that runs without the GIL is either doing host work in C, C++ or Rust, or waiting:
for the device (spinning in the GPU driver), for its peers (an MPI, UCX, libfabric or NCCL
progress loop), or for the GIL itself (the interpreter's own acquisition path). The native
locator (gilprof.sampling.native) places each such reading in the library its on-CPU
instruction pointer was in and classes it here; the reading's leaf frame then carries both,
`Frame("[native] libz.so.1 deflate", "[native:host]")`, so every report, picture and export
shows the place and the analysis reads the class back from the frame alone.

The built-in rules name libraries by their file name, which is what a library is: the
loader maps it by that name. A recipe's `[native]` section adds rules (its own come first);
a report states which rules decided (`NativeRules.describe`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from gilprof.model import Frame


class NativeClass(str, Enum):
    HOST = "host"  # compute in native code: host work
    LAUNCH = "device-launch"  # the GPU driver's launch path: host work
    DEVICE = "device-wait"  # spinning in the GPU driver or runtime until the device is done
    PEERS = "peer-wait"  # in a communication library's progress loop: waiting for peers
    GIL = "gil-wait"  # the interpreter taking or handing over the GIL
    # just woken from a system call, not sampled running since: waiting for a core or on
    # its way back to Python: host-side time
    WOKEN = "woken"
    UNPLACED = "unplaced"  # no on-CPU sample near the reading: the class is not known

    def __str__(self) -> str:
        return self.value

    @property
    def is_host_work(self) -> bool:
        return self in (NativeClass.HOST, NativeClass.LAUNCH, NativeClass.WOKEN)


NATIVE_FRAME_PREFIX = "[native]"
NOT_PLACED = "native time not placed"  # how the profile's message on a refused locator starts
_FILE_PREFIX = "[native:"


def native_frame(cls: NativeClass, place: str) -> Frame:
    """The leaf frame of a native reading: its place in the name, its class in the file."""
    return Frame(f"{NATIVE_FRAME_PREFIX} {place}", f"{_FILE_PREFIX}{cls.value}]", 0)


def native_class_of(frame: Frame) -> NativeClass | None:
    """The class a native locator's frame carries, or None for any other frame."""
    file = frame.file
    if not file.startswith(_FILE_PREFIX) or not file.endswith("]"):
        return None
    try:
        return NativeClass(file[len(_FILE_PREFIX) : -1])
    except ValueError:
        return None


@dataclass(frozen=True)
class LibraryRule:
    pattern: str  # a glob on the library's file name, e.g. "libcuda.so*"
    cls: NativeClass  # DEVICE, PEERS or HOST
    source: str  # "built-in", or the recipe that added it


def _builtin(cls: NativeClass, *patterns: str) -> tuple[LibraryRule, ...]:
    return tuple(LibraryRule(p, cls, "built-in") for p in patterns)


# The GPU driver and runtime libraries (CUDA, ROCm's HIP and HSA): a thread spins there
# while it waits for the device, and passes through them to launch work (told apart by
# what surrounds the sample: gilprof.sampling.native.locator).
DEVICE_LIBRARIES = _builtin(
    NativeClass.DEVICE,
    "libcuda.so*",
    "libcudart.so*",
    "libamdhip64.so*",
    "libhsa-runtime64.so*",
)
# Communication libraries whose collectives wait in a progress loop on the CPU: MPICH and
# Open MPI (and its PAL/RTE), UCX, libfabric and its providers, NCCL's host side, PSM2.
PEER_LIBRARIES = _builtin(
    NativeClass.PEERS,
    "libmpi.so*",
    "libmpi_*.so*",
    "libmpich*.so*",
    "libopen-pal.so*",
    "libopen-rte.so*",
    "libucp.so*",
    "libucs.so*",
    "libuct*.so*",
    "libfabric.so*",
    "libnccl.so*",
    "libpsm2.so*",
)
BUILTIN_RULES = DEVICE_LIBRARIES + PEER_LIBRARIES
# Clock reads, which a spin-wait makes as often as it loops (the CUDA driver's spin reads
# the clock on every turn): the kernel's vDSO and the C library's wrappers around it. A
# sample in one takes the class of the code around it.
CLOCK_PLACES = ("[vdso]",)
CLOCK_FUNCTIONS = frozenset(
    {"clock_gettime", "__clock_gettime", "__clock_gettime64", "gettimeofday", "__gettimeofday"}
)


def is_clock_read(path: str, function: str | None) -> bool:
    """A sample in the vDSO, or in the C library's clock functions."""
    return path in CLOCK_PLACES or function in CLOCK_FUNCTIONS


# The interpreter's functions that take, hand over or wait for the GIL (3.10-3.15; a
# compiler's clone suffix such as `.lto_priv.0` is ignored). A sample elsewhere in the
# interpreter was taken while the thread ran Python, holding the GIL: not where a thread
# read as not holding it now is waiting.
GIL_FUNCTIONS = frozenset(
    {
        "take_gil",
        "drop_gil",
        "PyEval_RestoreThread",
        "PyEval_SaveThread",
        "PyEval_AcquireThread",
        "PyEval_ReleaseThread",
        "PyEval_AcquireLock",
        "PyEval_ReleaseLock",
        "_PyEval_ReleaseLock",
        "PyGILState_Ensure",
        "PyGILState_Release",
        "_PyThreadState_Attach",
        "_PyThreadState_Detach",
        "_PyThreadState_Swap",
        "eval_frame_handle_pending",
        "_Py_HandlePending",
        "handle_eval_breaker",
    }
)


def interpreter_class(function: str | None) -> NativeClass:
    """The class of a native reading placed in the interpreter's own code: the GIL's
    hand-off in a GIL function or where the function is not known (a stripped build:
    take_gil is a local symbol), host-side otherwise (the thread was sampled running
    Python, and has released the GIL since)."""
    if function is None or function.split(".", 1)[0] in GIL_FUNCTIONS:
        return NativeClass.GIL
    return NativeClass.HOST


# The C library, its threads and the dynamic loader serve whoever calls them (memcpy,
# sched_yield, a lock's futex wrapper): their time is their caller's kind of time.
# "[uprobes]": the kernel's page of out-of-line instructions and return trampolines for a
# uprobe set on the process (a tracer's, bpftrace's): code run on behalf of the probed
# function, so the caller's class
PASS_THROUGH_LIBRARIES = (
    "libc.so*", "libc-*.so", "libpthread.so*", "ld-linux*.so*", "[[]uprobes[]]",
)  # fmt: skip


def is_pass_through(library: str) -> bool:
    return any(fnmatch.fnmatchcase(library, pattern) for pattern in PASS_THROUGH_LIBRARIES)


@dataclass(frozen=True)
class NativeRules:
    rules: tuple[LibraryRule, ...] = BUILTIN_RULES

    @classmethod
    def with_recipe(cls, added: Iterable[LibraryRule]) -> NativeRules:
        """The recipe's rules ahead of the built-in ones (the first match decides)."""
        return cls(tuple(added) + BUILTIN_RULES)

    def library_class(self, library: str) -> NativeClass:
        """The class of native time in the library file named `library` (a base name)."""
        for rule in self.rules:
            if fnmatch.fnmatchcase(library, rule.pattern):
                return rule.cls
        return NativeClass.HOST

    def describe(self) -> str:
        """How each class is decided, in one paragraph for a report."""
        by: dict[tuple[NativeClass, str], list[str]] = {}
        for rule in self.rules:
            by.setdefault((rule.cls, rule.source), []).append(rule.pattern)
        named = "; ".join(
            f"{cls.value} ({source}): {', '.join(patterns)}"
            for (cls, source), patterns in by.items()
        )
        return (
            "native time placed by the kernel's on-CPU samples (perf_event_open), classed by "
            f"library: {named}; in a device library a sample is a wait when the thread's "
            "samples around it are all in device libraries, clock reads or the interpreter, "
            "else a launch (host work); in the interpreter's own code, taking or handing over "
            "the GIL; in a clock read, the C library or the kernel (a system call), the class "
            "of the code that called it (the first return address on the sampled stack); in "
            "any other library, host work; a thread just woken from a system call and not "
            "sampled since, woken (host-side time); preempted between two samples in the "
            "interpreter, the GIL's hand-off (waiting); with no sample near the reading, "
            "unplaced"
        )
