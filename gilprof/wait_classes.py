"""Why a thread is blocked: the one place that says which evidence means which kind of wait.

A thread that is off its CPU in a system call is waiting for something. What it waits for
decides what would shorten the step, so the reason must come from evidence, never from the
name of the function that waits (a `Condition.wait` may wait for the device, a request or a
peer). The thread-state reader (gilprof.sampling.blocked) records, for each blocked reading,
what the machine shows about the wait, as frames after the `[syscall]` frame that names the
call; the analysis reads them back here and classes the reading:

- `[blocked:native]` frames: the native code that made the blocking call (the first return
  address on the user stack, at the saved stack pointer, outside the C library), named
  `"<library> <symbol>"`;
- `[blocked:fd:<kind>]` frames: a descriptor the call waits on and what it is (a socket and
  who is at its other end, a pipe, an eventfd, a device node, a file);
- a `[blocked:waker:<kind>]` frame: who ended the wait (the kernel's sched_wakeup event),
  where the kernel allowed reading it.

Classes (WaitClass): device, peers, input (work handed in), sleep (a timer the code chose),
I/O (files), another thread (a lock or condition), the GIL, and unexplained (with what was
seen). A recipe adds rules ahead of the built-in ones: Python functions that wait for the
device (`[steps] device_wait`) or for requests (`[steps] input_wait`), and libraries whose
code is the device or the peers (`[native]`, gilprof.native_classes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from gilprof.model import Frame, ThreadState
from gilprof.native_classes import NativeClass, NativeRules, native_class_of


class WaitClass(str, Enum):
    DEVICE = "device"  # the GPU (a device library waits, a device node, a sync frame)
    PEERS = "peers"  # other ranks of the job (a collective, a socket to a rank)
    INPUT = "input"  # work handed in: a queue fed by another thread, a client's socket
    SLEEP = "sleep"  # a timer the code chose (time.sleep, a back-off)
    IO = "io"  # files
    THREAD = "thread"  # another thread of the process: a lock or a condition
    GIL = "gil"  # waiting to take the GIL (host work: another thread holds it)
    UNEXPLAINED = "unexplained"  # blocked, and the evidence names no class

    def __str__(self) -> str:
        return self.value

    @property
    def words(self) -> str:
        return CLASS_WORDS[self]


CLASS_WORDS = {
    WaitClass.DEVICE: "waiting for the device",
    WaitClass.PEERS: "waiting for peers",
    WaitClass.INPUT: "waiting for input",
    WaitClass.SLEEP: "sleeping",
    WaitClass.IO: "waiting for I/O",
    WaitClass.THREAD: "waiting for another thread",
    WaitClass.GIL: "waiting for the GIL",
    WaitClass.UNEXPLAINED: "blocked, unexplained",
}

# ---- the evidence frames (written by gilprof.sampling.blocked, read here) ----------------

BLOCKED_PREFIX = "[blocked:"
SYSCALL_FILE = "[syscall]"  # the file of the frame that names the call a thread sits in
NATIVE_CALLER = "native"
INTERPRETER_TAG = "interpreter"  # [blocked:native:interpreter]: the interpreter's own code
FD = "fd"
WAKER = "waker"

# [blocked:fd:<kind>]: what a waited-on descriptor is
FD_DEVICE = "device"  # a character device of a GPU driver (/dev/nvidia*, /dev/dri/*, /dev/kfd)
FD_DEV_OTHER = "dev"  # another device node
FD_SOCKET_RANK = "socket-rank"  # the other end is another rank of the same job
FD_SOCKET_LAUNCHER = "socket-launcher"  # the other end is the job's launcher (an ancestor)
FD_SOCKET_CLIENT = "socket-client"  # the other end is a process outside the job, or remote
FD_SOCKET_SELF = "socket-self"  # the other end is this process
FD_SOCKET = "socket"  # a socket whose other end was not found (listening, or not readable)
FD_PIPE_SELF = "pipe-self"  # both ends in this process (a wake-up pipe)
FD_PIPE_PROCESS = "pipe-process"  # the writing end is in another process
FD_PIPE = "pipe"  # a pipe whose other end was not found
FD_EVENTFD = "eventfd"
FD_FILE = "file"  # a regular file
FD_OTHER = "other"  # anything else (timerfd, signalfd, inotify, ...)

# [blocked:waker:<kind>]: who ended the wait
WAKER_THREAD = "thread"  # a thread of this process (its tid and name in the frame's name)
WAKER_RANK = "process-rank"  # another rank of the job
WAKER_LAUNCHER = "process-launcher"
WAKER_PROCESS = "process-other"
WAKER_TIMER = "timer"  # the wait's own timeout, or an interrupt (no task woke it)


def evidence_frame(kind: str, tag: str, text: str) -> Frame:
    """An evidence frame: `kind` NATIVE_CALLER (tag ''), FD or WAKER with its tag."""
    return Frame(text, f"{BLOCKED_PREFIX}{kind}{':' + tag if tag else ''}]", 0)


def native_caller_frame(library: str, symbol: str, tag: str = "") -> Frame:
    """The native code that made a blocking call: its library's file name and symbol (or
    its offset in hex where the library names none). `tag`: INTERPRETER_TAG for the file
    the reader found the interpreter's runtime in (an identity: a Python-level lock or
    sleep), or the class the sampling run's library rules (a recipe's [native]) gave it:
    NativeClass.DEVICE or PEERS's value."""
    return evidence_frame(NATIVE_CALLER, tag, f"{library} {symbol}")


def waker_frame(tag: str, text: str, tid: int = 0) -> Frame:
    """Who ended a wait; `tid` (in the frame's line) is the waking thread's Linux id where
    it is a thread of this process, so the analysis can follow it."""
    return Frame(text, f"{BLOCKED_PREFIX}{WAKER}:{tag}]", tid)


@dataclass(frozen=True, slots=True)
class Evidence:
    kind: str  # NATIVE_CALLER, FD or WAKER
    tag: str
    text: str
    tid: int = 0  # WAKER_THREAD: the waking thread


def evidence_of(frame: Frame) -> Evidence | None:
    file = frame.file
    if not file.startswith(BLOCKED_PREFIX) or not file.endswith("]"):
        return None
    kind, _, tag = file[len(BLOCKED_PREFIX) : -1].partition(":")
    return Evidence(kind, tag, frame.name, frame.line)


def is_evidence(frame: Frame) -> bool:
    return frame.file.startswith(BLOCKED_PREFIX) or frame.file == SYSCALL_FILE


# ---- the rules ---------------------------------------------------------------------------

# Python functions that block until the device is done: CUDA synchronize calls by their
# qualnames (`torch.cuda.synchronize`, `Event.synchronize`, `Stream.synchronize`). Not
# `Condition.wait` or `Event.wait`: those wait for whatever sets them.
DEVICE_SYNC_FUNCTIONS = (
    "synchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cudaDeviceSynchronize",
    "cuStreamSynchronize",
    "cuEventSynchronize",
    "cuCtxSynchronize",
)
# Native code whose blocking calls wait for peers, by symbol namespace, in whichever library
# it was linked into (gloo and c10d live inside libtorch_cpu, next to its compute kernels).
PEER_SYMBOL_PREFIXES = ("gloo::", "c10d::", "MPI_", "PMPI_", "ncclGroup", "nccl")
# The system calls of a timer the code chose.
SLEEP_SYSCALLS = frozenset({"nanosleep", "clock_nanosleep", "pause"})
# Python's own queue consumers: a thread blocked in one waits for whoever puts work in.
QUEUE_GETS = ("Queue.get", "SimpleQueue.get", "Queue._get", "get_nowait")


@dataclass(frozen=True)
class WaitRules:
    native: NativeRules = field(default_factory=NativeRules)
    device_wait: tuple[str, ...] = DEVICE_SYNC_FUNCTIONS  # Python functions (recipe first)
    input_wait: tuple[str, ...] = ()  # Python functions that wait for requests (recipe)


@dataclass(frozen=True, slots=True)
class Reason:
    """A blocked reading's class and the evidence for it, in a few words."""

    cls: WaitClass
    evidence: str
    waker_tid: int = 0  # a thread of this process that ended the wait (0: none or unknown)
    # where the thread blocks: its innermost Python frame (the function a user would open)
    where: str = ""


def _python_frames(frames: Sequence[Frame]) -> list[Frame]:
    return [f for f in frames if f.is_python and not is_evidence(f)]


# The standard library's waiting machinery: where a thread blocks is shown as the code that
# called it (the `requests.get()` line, not Condition.wait). Display only: no class is decided
# by these names.
_WAIT_MACHINERY = frozenset({"threading.py", "queue.py", "selectors.py", "socket.py"})


def _where(py: Sequence[Frame]) -> str:
    outside = [f for f in py if f.basename not in _WAIT_MACHINERY]
    for frame in reversed(outside or py):
        if frame.name:
            return f"{frame.name} ({frame.basename}:{frame.line})" if frame.line else frame.name
    return ""


def _is_peer_symbol(symbol: str) -> bool:
    return any(symbol.startswith(p) for p in PEER_SYMBOL_PREFIXES)


# a native caller frame's tag: the class the sampling run's rules gave its library
_RULE_TAGS = {
    NativeClass.DEVICE.value: NativeClass.DEVICE,
    NativeClass.PEERS.value: NativeClass.PEERS,
}
_FD_CLASSES = {
    FD_DEVICE: WaitClass.DEVICE,
    FD_SOCKET_RANK: WaitClass.PEERS,
    FD_SOCKET_LAUNCHER: WaitClass.PEERS,
    FD_SOCKET_CLIENT: WaitClass.INPUT,
    FD_PIPE_PROCESS: WaitClass.INPUT,
    FD_FILE: WaitClass.IO,
    FD_DEV_OTHER: WaitClass.IO,
}
# the order in which a descriptor's class decides, where a call waits on several
_FD_ORDER = (
    FD_DEVICE,
    FD_SOCKET_RANK,
    FD_SOCKET_LAUNCHER,
    FD_SOCKET_CLIENT,
    FD_PIPE_PROCESS,
    FD_FILE,
    FD_DEV_OTHER,
)


def classify_blocked(
    frames: Sequence[Frame],
    state: ThreadState,
    rules: WaitRules,
    thread_names: Mapping[int, str] | None = None,
) -> Reason:
    """Why a reading that is not running is not running (states mode: an IDLE reading with
    its `[syscall]` frame and evidence frames; contention mode: py-spy's native frames).
    `thread_names` (Linux id -> name) names a waking thread of the process."""
    py = _python_frames(frames)
    where = _where(py)
    if state is ThreadState.WAITING:
        return Reason(WaitClass.GIL, "taking the GIL", where=where)
    evidence = [e for e in map(evidence_of, frames) if e is not None]
    syscall = next((f.name for f in frames if f.file == SYSCALL_FILE), "")
    natives = [e for e in evidence if e.kind == NATIVE_CALLER]
    native = natives[0] if natives else None
    fds = [e for e in evidence if e.kind == FD]
    waker = next((e for e in evidence if e.kind == WAKER), None)
    waker_tid = waker.tid if waker is not None and waker.tag == WAKER_THREAD else 0
    waker_words = waker.text if waker is not None else ""
    if waker_tid and thread_names and thread_names.get(waker_tid):
        waker_words = f"thread '{thread_names[waker_tid]}' (tid {waker_tid})"
    woken = f", woken by {waker_words}" if waker is not None and waker.tag != WAKER_TIMER else ""

    def reason(cls: WaitClass, words: str) -> Reason:
        return Reason(cls, words, waker_tid, where)

    # 1. A Python function the recipe or the built-in rules name as a device or input wait.
    for name in rules.device_wait:
        if any(f.matches(name) for f in py):
            return reason(WaitClass.DEVICE, f"in {name}")
    for name in rules.input_wait:
        if any(f.matches(name) for f in py):
            return reason(WaitClass.INPUT, f"in {name} (the recipe's input_wait){woken}")
    # 2. The native code that made the call (innermost first; the reader stops the chain
    # at the interpreter's own code: a Python-level wait).
    library, _, symbol = native.text.partition(" ") if native is not None else ("", "", "")
    for caller in natives:
        if caller.tag == INTERPRETER_TAG:
            break
        lib, _, sym = caller.text.partition(" ")
        cls = _RULE_TAGS.get(caller.tag) or rules.native.library_class(lib)
        if cls is NativeClass.DEVICE:
            return reason(WaitClass.DEVICE, f"{lib} {sym} ({syscall})")
        if cls is NativeClass.PEERS or _is_peer_symbol(sym):
            return reason(WaitClass.PEERS, f"{lib} {sym} ({syscall})")
    # 3. The descriptors it waits on.
    by_tag = {e.tag: e for e in fds}
    for tag in _FD_ORDER:
        if tag in by_tag:
            return reason(_FD_CLASSES[tag], f"{syscall} on {by_tag[tag].text}{woken}")
    # 4. The call itself: a timer the code chose.
    if syscall in SLEEP_SYSCALLS or (not syscall and _contention_sleep(frames)):
        return reason(WaitClass.SLEEP, f"{syscall or 'sleep'}" + (f" in {where}" if where else ""))
    # 5. Peers by the Python code that called (torch.distributed's collectives).
    if any(f.basename == "distributed_c10d.py" for f in py):
        return reason(WaitClass.PEERS, f"torch.distributed ({where}){woken}")
    # 6. A lock or condition: another thread, named by its waker where known.
    if native is not None or syscall == "futex" or fds:
        where_code = f"{library} {symbol}".strip() if native is not None else syscall
        if waker is not None and waker_tid and any(f.matches(q) for f in py for q in QUEUE_GETS):
            return reason(WaitClass.INPUT, f"a queue fed by {waker_words}")
        if waker_tid:
            return reason(WaitClass.THREAD, f"{where_code}{woken}")
        if fds:
            kinds = ", ".join(e.text for e in fds[:2])
            return reason(WaitClass.UNEXPLAINED, f"{syscall} on {kinds}{woken}")
        return reason(
            WaitClass.UNEXPLAINED,
            f"{where_code}" + (woken or "; who ended the wait was not seen"),
        )
    if syscall:
        return reason(WaitClass.UNEXPLAINED, syscall + woken)
    return _contention_reason(frames, rules, where)


# contention mode: py-spy's native frames below the innermost Python frame (the sleeps'
# C functions, also how the contention backend tells a sleeping thread)
SLEEP_SYMBOLS = frozenset({"clock_nanosleep", "nanosleep", "__nanosleep", "pysleep", "time_sleep"})


def _native_tail(frames: Sequence[Frame]) -> list[Frame]:
    innermost = max((i for i, f in enumerate(frames) if f.is_python), default=-1)
    return [f for f in frames[innermost + 1 :] if not f.name.startswith("0x")]


def _contention_sleep(frames: Sequence[Frame]) -> bool:
    return any(f.name in SLEEP_SYMBOLS for f in _native_tail(frames))


def _contention_reason(frames: Sequence[Frame], rules: WaitRules, where: str) -> Reason:
    for frame in _native_tail(frames):
        if frame.file and native_class_of(frame) is None:
            cls = rules.native.library_class(frame.basename)
            if cls is NativeClass.DEVICE:
                return Reason(WaitClass.DEVICE, f"{frame.basename} {frame.name}", 0, where)
            if cls is NativeClass.PEERS or _is_peer_symbol(frame.name):
                return Reason(WaitClass.PEERS, f"{frame.basename} {frame.name}", 0, where)
    tail = _native_tail(frames)
    leaf = tail[-1].name if tail else "no native frames"
    return Reason(WaitClass.UNEXPLAINED, leaf, 0, where)
