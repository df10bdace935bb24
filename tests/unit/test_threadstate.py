"""The thread-state reader's pure parts: syscall classification, layouts, ELF symbols, the
span building of a recording, and the refusals that need no live target."""

from __future__ import annotations

import itertools
import struct
import sys
import threading
from pathlib import Path

import pytest

from gilprof.model import Frame, ThreadState
from gilprof.native_classes import NativeClass, native_class_of, native_frame
from gilprof.sampling.blocked import BlockedEvidence
from gilprof.sampling.threadstate import layout as lay
from gilprof.sampling.threadstate.elf import ElfError, read_symbols
from gilprof.sampling.threadstate.reader import SYSCALL_FILE, Recording, StateReader
from gilprof.sampling.threadstate.syscalls import (
    GIL_SWITCH_WAIT,
    GIL_WAIT,
    OUTSIDE_SYSCALL,
    RUNNING,
    classify,
)

GIL = 0x7F0000001000


def line(nr: int, *args: int) -> bytes:
    words = [str(nr), *(hex(a) for a in args)]
    words += ["0x0"] * (6 - len(args)) + ["0x7ffd0000", "0x7f00dead"]
    return (" ".join(words) + "\n").encode()


@pytest.mark.parametrize(
    ("text", "kind", "syscall"),
    [
        (b"running\n", RUNNING, ""),
        (line(202, GIL + 72, 0x89, 0), GIL_WAIT, "cond"),  # glibc cond futex words +40/+44
        (line(202, GIL + 76, 0x89, 0), GIL_WAIT, "cond"),
        (line(202, GIL + 80, 0x81), GIL_WAIT, "mutex"),  # the GIL's mutex
        (line(202, GIL + 120 + 40, 0x89), GIL_SWITCH_WAIT, "cond"),
        (line(202, GIL + 168, 0x81), GIL_SWITCH_WAIT, "mutex"),
        (line(202, GIL + 208, 0x189), "syscall", "futex"),  # just past the GIL: a lock
        (line(202, GIL + 8, 0x189), "syscall", "futex"),  # inside, before cond: not a wait
        (line(202, 0x5555_0000, 0x189), "syscall", "futex"),
        (line(230, 1, 0), "syscall", "clock_nanosleep"),
        (line(232, 5), "syscall", "epoll_wait"),
        (line(999, 1), "syscall", "syscall 999"),
        (b"-1 0x7ffd0000 0x7f00dead\n", OUTSIDE_SYSCALL, ""),
        (b"", OUTSIDE_SYSCALL, ""),
    ],
)
def test_a_syscall_line_classifies(text: bytes, kind: str, syscall: str) -> None:
    activity = classify(text, GIL)
    assert (activity.kind, activity.syscall) == (kind, syscall)


DATA = Path(__file__).parent / "data"


def _debian(minor: int) -> bytes:
    """The `_Py_DebugOffsets` read from Debian sid's python3.`minor` (3.13.18, 3.14.10,
    3.15.2) at _PyRuntime, as the reader reads it."""
    return (DATA / f"debug_offsets_debian_3.{minor}.bin").read_bytes()


def _with_header(raw: bytes, version: int, free_threaded: int = 0) -> bytes:
    return lay.DEBUG_COOKIE + struct.pack("<QQ", version, free_threaded) + raw[24:]


def test_debug_offsets_give_the_3_13_layout_the_headers_give() -> None:
    layout, gil = lay.debug_offsets_layout(_debian(13))
    # the values offsetof() printed against pyenv 3.13.0's internal headers (Debian's
    # 3.13.18 agrees where the reader looks)
    assert (layout.minor, layout.interpreters_head, layout.threads_head) == (13, 632, 7344)
    assert (layout.tstate_frame, layout.tstate_native_thread_id) == (72, 160)
    assert (layout.frame_previous, layout.frame_code, layout.frame_owner) == (8, 0, 70)
    assert (layout.code_qualname, layout.code_filename, layout.code_firstlineno) == (128, 112, 68)
    assert (layout.unicode_ascii_size, layout.unicode_compact_size) == (40, 56)
    assert layout.gil_pointer_in_interp == 16 and not layout.free_threaded
    assert layout.tstate_holds_gil is None and layout.code_tag_bits == 0
    assert gil == {"gil_runtime_state": 7752, "locked": 7768, "holder": 7760}


def test_debug_offsets_of_3_14_and_3_15_read_in_their_own_field_order() -> None:
    l14, gil14 = lay.debug_offsets_layout(_debian(14))
    assert (l14.minor, l14.tstate_thread_id, l14.tstate_native_thread_id) == (14, 152, 160)
    assert (l14.frame_owner, l14.code_tag_bits, l14.tstate_holds_gil) == (74, 3, None)
    assert gil14 == {"gil_runtime_state": 7784, "locked": 7800, "holder": 7792}
    l15, gil15 = lay.debug_offsets_layout(_debian(15))
    # base_frame and last_profiled_frame(_seq) after current_frame move thread_id
    assert (l15.tstate_frame, l15.tstate_thread_id, l15.tstate_native_thread_id) == (72, 176, 184)
    assert (l15.tstate_holds_gil, l15.tstate_gil_requested) == (36, 40)
    assert gil15 == {"gil_runtime_state": 7736, "locked": 7752, "holder": 7744}


@pytest.mark.parametrize(("actual", "read_as"), [(14, 13), (15, 14), (14, 15), (15, 13)])
def test_a_table_in_another_field_order_is_refused_not_misread(actual: int, read_as: int) -> None:
    # what a patch release that adds a field to `_Py_DebugOffsets` itself looks like: the
    # values of one order read in another's
    raw = _with_header(_debian(actual), 0x03000000 | read_as << 16 | 0xF0)
    with pytest.raises(lay.LayoutError, match="field order"):
        lay.debug_offsets_layout(raw)


def test_a_free_threaded_build_is_flagged() -> None:
    layout, _ = lay.debug_offsets_layout(_with_header(_debian(13), 0x030D00F0, 1))
    assert layout.free_threaded


@pytest.mark.parametrize("version", [0x031000F0, 0x030C00F0, 0x040000F0])
def test_debug_offsets_of_an_unverified_version_are_refused(version: int) -> None:
    with pytest.raises(lay.LayoutError, match="not verified"):
        lay.debug_offsets_layout(_with_header(_debian(15), version))


def test_no_cookie_means_no_debug_offsets() -> None:
    with pytest.raises(lay.LayoutError, match="cookie"):
        lay.debug_offsets_version(b"\0" * 16)


@pytest.mark.parametrize("minor", [8, 9, 13, 14, 15])
def test_no_table_outside_3_10_to_3_12(minor: int) -> None:
    with pytest.raises(lay.LayoutError, match=f"3.{minor}"):
        lay.table_layout(minor)


def test_the_tables_read_code_and_previous_within_the_frame_header() -> None:
    for minor in (10, 11, 12):
        layout = lay.table_layout(minor)
        assert layout.frame_header_size >= max(layout.frame_code, layout.frame_previous) + 8
        assert (layout.gil_in_runtime is None) != (layout.gil_pointer_in_interp is None)


def test_elf_symbols_of_this_interpreter() -> None:
    import sysconfig

    library = sysconfig.get_config_var("LDLIBRARY") or ""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    path = f"{libdir}/{library}" if library.endswith(".so") or ".so." in library else sys.executable
    if library.endswith(".so"):
        path += ".1.0"
    symbols = read_symbols(path, ("_PyRuntime", "PyCode_Type", "no_such_symbol"))
    assert {"_PyRuntime", "PyCode_Type"} <= set(symbols.symbols)
    assert "no_such_symbol" not in symbols.symbols
    assert symbols.machine == 62


def test_a_file_that_is_not_elf_is_refused(tmp_path) -> None:
    path = tmp_path / "x.so"
    path.write_bytes(b"#!/bin/sh\n")
    with pytest.raises(ElfError, match="not a 64-bit"):
        read_symbols(str(path), ("_PyRuntime",))


class _ScriptedReader(StateReader):
    """A reader whose ticks read a script instead of a process."""

    def __init__(self, script: list[dict[int, tuple[ThreadState, tuple[Frame, ...]]]]) -> None:
        self.period = 0.001
        self.script = script
        import random

        self.random = random.Random(1)
        self.stop = threading.Event()
        self.cond_check = True
        self.locator = None
        self.evidence = BlockedEvidence(0, None, False, "/no/interpreter")
        self._unplaced = native_frame(NativeClass.UNPLACED, "unplaced (not located)")

    def tick(self, now, out: Recording):
        out.ticks += 1
        readings = self.script.pop(0)
        self._native_tids = {
            tid: (tid, None) for tid, (state, _f) in readings.items() if state is ThreadState.NATIVE
        }
        if not self.script:
            self.stop.set()
        return readings


def test_a_recording_keeps_runs_of_one_state_and_ends_a_gone_thread() -> None:
    f = (Frame("loop", "app.py", 1),)
    held, wait = (ThreadState.HELD, f), (ThreadState.WAITING, f)
    idle = (ThreadState.IDLE, (Frame("futex", SYSCALL_FILE, 0),))
    reader = _ScriptedReader(
        [{1: held, 2: wait}, {1: held, 2: wait}, {1: wait, 2: held}, {1: idle}, {1: idle}]
    )
    recording = reader.record(reader.stop)
    ordered = sorted(((s.tid, a, s.state, b) for s, a, b in recording.spans), key=lambda r: r[:2])
    runs = [(tid, state, a, b) for tid, a, state, b in ordered]
    assert recording.ticks == 5
    assert [(tid, state) for tid, state, _, _ in runs] == [
        (1, ThreadState.HELD),
        (1, ThreadState.WAITING),
        (1, ThreadState.IDLE),
        (2, ThreadState.WAITING),
        (2, ThreadState.HELD),
    ]
    for tid in (1, 2):  # one thread's runs tile its time without gaps or overlaps
        mine = [(a, b) for t, _, a, b in runs if t == tid]
        assert all(b1 == a2 for (_, b1), (a2, _) in itertools.pairwise(mine))
    thread_2_end = max(b for t, _, _, b in runs if t == 2)
    assert thread_2_end < recording.t_last  # it was gone at the fourth tick


def test_a_native_reading_without_a_locator_ends_in_the_unplaced_frame() -> None:
    f = (Frame("loop", "app.py", 1),)
    reader = _ScriptedReader([{1: (ThreadState.NATIVE, f)}, {1: (ThreadState.HELD, f)}])
    recording = reader.record(reader.stop)
    native = [s for s, _a, _b in recording.spans if s.state is ThreadState.NATIVE]
    assert len(native) == 1 and native[0].frames[:-1] == f
    assert native_class_of(native[0].frames[-1]) is NativeClass.UNPLACED
    assert (recording.native_unplaced, recording.native_placed) == (1, 0)


class _FakeInterpreter:
    """Two Python threads: 1 holds the GIL, 2 sleeps; counts the stack reads."""

    pid = 0
    gil = 0x1000

    def __init__(self) -> None:
        from gilprof.sampling.threadstate.target import PythonThread

        self.list = {t: PythonThread(t, t, 0x100 * t, t) for t in (1, 2)}
        self.stack_reads: list[int] = []

    def threads(self):
        return self.list

    def gil_state(self):
        return 1, 1, 0

    def stack(self, tstate: int):
        self.stack_reads.append(tstate // 0x100)
        return (Frame("work" if tstate == 0x100 else "poll", "app.py", 1),)


class _FakeFiles:
    def __init__(self, lines: dict[int, list[bytes]]) -> None:
        self.lines = lines

    def read(self, tid: int) -> bytes:
        return self.lines[tid].pop(0)

    def keep_only(self, tids) -> None:
        pass


def _bare_reader(interpreter) -> StateReader:
    """A StateReader over a fake interpreter: no process, no locator, no evidence."""
    reader = StateReader.__new__(StateReader)
    reader.__dict__.update(
        interpreter=interpreter,
        period=0.01,
        threads={},
        _threads_at=-1e9,
        _last={},
        _blocked_stacks={},
        cond_check=True,
        locator=None,
        _blocked_at={},
        evidence=BlockedEvidence(0, None, False, "/no/interpreter"),
    )
    return reader


def test_a_thread_blocked_in_the_same_call_keeps_its_stack_without_a_read() -> None:
    """Stacks are the reader's largest cost: one still blocked in the very same system call
    (number, arguments, stack pointer, pc) is not read again; any change reads it."""
    interpreter = _FakeInterpreter()
    reader = _bare_reader(interpreter)
    sleep = b"230 0x1 0x0 0x7ffd0 0x0 0x0 0x0 0x7ffc8 0x7f00\n"
    other = b"230 0x1 0x0 0x7ffe0 0x0 0x0 0x0 0x7ffd8 0x7f00\n"
    reader.files = _FakeFiles({1: [b"running\n"] * 4, 2: [sleep, sleep, other, b"running\n"]})  # type: ignore[assignment]
    out = Recording()
    readings = [reader.tick(float(i), out) for i in range(4)]
    # thread 1 (running, the holder) is read at every tick; thread 2 at the first tick, not at
    # the second (same call), again at the third (another stack pointer) and fourth (running)
    assert interpreter.stack_reads.count(1) == 4
    assert interpreter.stack_reads.count(2) == 3
    assert out.stacks_reused == 1
    assert readings[1][2] == readings[0][2]  # the reused reading is the one read then
    assert readings[1][2][0] is ThreadState.IDLE and readings[1][2][1][-1].name == "clock_nanosleep"


class _SwitchEvidence:
    """A native locator's word on whether each running thread is inside the GIL's wait."""

    def __init__(self, evidence: dict[int, bool | None]) -> None:
        self.evidence = evidence

    def collect(self, now_ns: int, wanted=None) -> None:
        pass

    def in_gil_wait(self, tid: int, at_ns: int) -> bool | None:
        return self.evidence[tid]


@pytest.mark.parametrize(
    ("extra", "evidence", "last_waiting", "expected"),
    [
        (1, {1: False, 2: None, 3: True}, set(), {3}),  # the kernel's sample says which
        (2, {1: False, 2: None, 3: True}, set(), {2, 3}),  # never one placed elsewhere
        (1, {1: None, 2: None, 3: None}, {2}, {2}),  # no evidence: the one waiting before
        (2, {1: False, 2: False, 3: False}, set(), set()),  # all elsewhere: none
    ],
)
def test_the_condvar_count_goes_to_the_running_threads_the_evidence_puts_in_the_wait(
    extra, evidence, last_waiting, expected
) -> None:
    reader = StateReader.__new__(StateReader)
    reader.threads = {tid: None for tid in (1, 2, 3)}  # type: ignore[misc]
    reader._last = {tid: ThreadState.WAITING for tid in last_waiting}
    reader.locator = _SwitchEvidence(evidence)  # type: ignore[assignment]
    states = {tid: ThreadState.NATIVE for tid in (1, 2, 3)}
    out = Recording()
    reader._waiting_while_running([1, 2, 3], extra, states, out, 0)
    assert {tid for tid, s in states.items() if s is ThreadState.WAITING} == expected
    assert out.woken_waiters == len(expected)


class _HandOffInterpreter(_FakeInterpreter):
    """Thread 1 holds the GIL at the tick's first read; `after` holds it at the re-read."""

    def __init__(self, after: int | None) -> None:
        super().__init__()
        self.reads = [(1, 1, 0), (0 if after is None else 1, after, 0)]

    def gil_state(self):
        return self.reads.pop(0)


@pytest.mark.parametrize(
    ("after", "reread", "expected", "released"),
    [
        (None, "same", ThreadState.IDLE, 1),  # let go, still in the very call: never held there
        (2, "same", ThreadState.IDLE, 1),  # the same, the GIL handed to another thread
        (1, "same", ThreadState.HELD, 0),  # still the holder: it holds the GIL in the call
        (None, "other", ThreadState.HELD, 0),  # let go, left that call: undetermined, as read
    ],
)
def test_a_holder_read_blocked_is_idle_only_when_it_let_go_before_the_call(
    after: int | None, reread: str, expected: ThreadState, released: int
) -> None:
    interpreter = _HandOffInterpreter(after)
    reader = _bare_reader(interpreter)
    sleep = b"230 0x1 0x0 0x7ffd0 0x0 0x0 0x0 0x7ffc8 0x7f00\n"
    again = sleep if reread == "same" else b"running\n"
    reader.files = _FakeFiles({1: [sleep, again], 2: [b"running\n"]})  # type: ignore[assignment]
    out = Recording()
    readings = reader.tick(0.0, out)
    assert readings[1][0] is expected
    assert out.holder_released == released


def test_a_running_thread_that_takes_the_gil_during_the_tick_was_waiting_at_its_instant() -> None:
    """Thread 1 holds the GIL at the tick's first read, thread 2 is read running and holds
    it by the re-read: it took the GIL between the reads, so at the tick's instant (the first
    read) it was on its way in, waiting (it read held before, counting the hand-off to it)."""
    interpreter = _HandOffInterpreter(2)
    reader = _bare_reader(interpreter)
    reader.files = _FakeFiles({1: [b"running\n"], 2: [b"running\n"]})  # type: ignore[assignment]
    readings = reader.tick(0.0, Recording())
    assert readings[1][0] is ThreadState.HELD
    assert readings[2][0] is ThreadState.WAITING
