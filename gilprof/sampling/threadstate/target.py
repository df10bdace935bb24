"""A target's interpreter read from outside: its threads, the GIL's holder, each thread's
Python stack. Reads /proc/PID/mem only (no ptrace stop), so the target never pauses.

`open_interpreter` finds `_PyRuntime` (an exported symbol of libpython or of the python
binary), picks the layout for the interpreter's version (`layout`), and checks it against
the live process before anything is read for a profile (`check`): a layout that fails gets
a one-line refusal, never a number.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass

from gilprof.model import Frame
from gilprof.sampling.threadstate.arch import X86_64, Arch, arch_of
from gilprof.sampling.threadstate.elf import ElfError, read_symbols
from gilprof.sampling.threadstate.layout import (
    DEBUG_OFFSETS_SIZE,
    GIL_COND,
    GIL_LAST_HOLDER,
    OB_TYPE,
    Layout,
    LayoutError,
    debug_offsets_layout,
    debug_offsets_version,
    table_layout,
)
from gilprof.sampling.threadstate.libc import cond_wrefs, is_musl
from gilprof.sampling.threadstate.memory import (
    MemoryReadError,
    NotReadyYet,
    StatesUnavailable,
    TargetMemory,
)
from gilprof.sampling.threadstate.namespaces import (
    MappedFile,
    ThreadIds,
    executable_inode,
    parse_maps,
    readable_path,
)
from gilprof.sampling.threadstate.verify import check

__all__ = [
    "Interpreter",
    "MemoryReadError",
    "NotReadyYet",
    "PythonThread",
    "StatesUnavailable",
    "TargetMemory",
    "open_interpreter",
]

MAX_THREADS = 4096
MAX_DEPTH = 128  # frames read per stack; deeper stacks keep their innermost MAX_DEPTH
FRAME_PAGE = 4096
_MAX_NAME = 1024
_SYMBOLS = ("_PyRuntime", "PyCode_Type", "Py_Version")


@dataclass(frozen=True, slots=True)
class PythonThread:
    tid: int  # Linux thread id: names its /proc entry
    pthread_id: int  # pthread_t
    tstate: int  # its PyThreadState
    profile_id: int  # the id py-spy reports for it, and so the profile's thread id


@dataclass(frozen=True)
class Located:
    path: str  # the file that exports _PyRuntime
    runtime: int  # its address in the target
    code_type: int  # PyCode_Type's address
    version_hex: int | None  # Py_Version (3.11+), read from the target
    # where its libc's pthread_cond_t counts its waiters (libc.py); a woken waiter is
    # counted until pthread_cond_wait returns
    cond_wrefs: int = 36
    arch: Arch = X86_64  # the target's architecture, by the ELF e_machine of that file


def _mapped_files(pid: int) -> dict[str, MappedFile]:
    """Each ELF file mapped from offset 0, in map order."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as handle:
            return parse_maps(handle.read())
    except FileNotFoundError:
        raise StatesUnavailable(f"PID {pid}: no such process") from None
    except PermissionError:
        raise StatesUnavailable(f"PID {pid}: no permission to read its memory map") from None


def target_arch(path: str, machine: int) -> Arch:
    """The tables for the architecture `path` (the file exporting `_PyRuntime`) was built
    for, by its ELF e_machine; a one-line refusal for one without them."""
    arch = arch_of(machine)
    if arch is None:
        raise StatesUnavailable(
            f"{path}: built for ELF machine {machine}, and the thread-state layout is known "
            "for x86_64 and aarch64 only"
        )
    return arch


def locate(pid: int, memory: TargetMemory) -> Located:
    """Find `_PyRuntime`: in the executable, else in a mapped file named like libpython
    (the search order only; what decides is the symbol, read from the file's own table)."""
    files = _mapped_files(pid)
    # the executable by what it is (its inode), not by its name: in a container the name is
    # a path in another mount namespace
    exe_inode = executable_inode(pid)
    exe = next((f.path for f in files.values() if f.inode == exe_inode), "")
    if is_musl(files):
        raise StatesUnavailable(
            "musl libc: its condition variables give each waiter its own futex, so a GIL "
            "waiter cannot be told from another waiter"
        )
    order = [exe] if exe in files else []
    order += [p for p in files if p != exe and "python" in os.path.basename(p)]
    unreadable: list[str] = []
    for path in order:
        try:
            symbols = read_symbols(readable_path(pid, files[path]), _SYMBOLS)
        except ElfError as exc:
            unreadable.append(str(exc))
            continue
        base = files[path].base
        runtime = symbols.address("_PyRuntime", base)
        code_type = symbols.address("PyCode_Type", base)
        if runtime is None or code_type is None:
            continue
        arch = target_arch(path, symbols.machine)
        version_at = symbols.address("Py_Version", base)
        version = None
        if version_at is not None:
            try:
                version = int(struct.unpack("<I", memory.read(version_at, 4))[0])
            except MemoryReadError:
                version = None
        return Located(path, runtime, code_type, version, cond_wrefs(pid, files), arch)
    # a process just exec'd may not have mapped libpython yet: the caller tries again
    if unreadable:  # the cause is the file, not the process (waiting would not help)
        raise StatesUnavailable(f"PID {pid}: no CPython runtime found ({unreadable[0]})")
    raise NotReadyYet(f"PID {pid}: no CPython runtime found (no _PyRuntime symbol)")


def _layout_for(located: Located, memory: TargetMemory) -> tuple[Layout, dict[str, int]]:
    head = memory.read(located.runtime, DEBUG_OFFSETS_SIZE)
    try:
        version = debug_offsets_version(head)
    except LayoutError:
        version = None
    if version is not None:
        try:
            return debug_offsets_layout(head)
        except LayoutError as exc:
            raise StatesUnavailable(str(exc)) from None
    if located.version_hex is not None:
        minor = (located.version_hex >> 16) & 0xFF
    else:  # 3.10 exports no Py_Version: its file name says; the checks below confirm it
        match = re.search(r"python3\.(\d+)", os.path.basename(located.path))
        if match is None:
            raise StatesUnavailable(f"{located.path}: cannot tell the CPython version")
        minor = int(match.group(1))
    try:
        return table_layout(minor), {}
    except LayoutError as exc:
        raise StatesUnavailable(str(exc)) from None


class Interpreter:
    """One target's interpreter: threads, GIL holder and stacks, read on demand."""

    def __init__(self, pid: int, memory: TargetMemory, located: Located, layout: Layout) -> None:
        self.pid = pid
        self.memory = memory
        self.located = located
        self.layout = layout
        self.gil = 0  # the GIL struct's address, once the interpreter has one
        self._code_frames: dict[int, Frame | None] = {}
        self._tid_of_tstate: dict[int, int] = {}
        self.ids = ThreadIds(pid)
        self.stray: list[int] = []  # ids in the thread list that name no thread of the target

    # -- structure ------------------------------------------------------------------------
    def main_interpreter(self) -> int:
        return self.memory.pointer(self.located.runtime + self.layout.interpreters_head)

    def find_gil(self) -> int:
        lay = self.layout
        if lay.gil_in_runtime is not None:
            return self.located.runtime + lay.gil_in_runtime
        assert lay.gil_pointer_in_interp is not None
        return self.memory.pointer(self.main_interpreter() + lay.gil_pointer_in_interp)

    def threads(self) -> dict[int, PythonThread]:
        """Linux TID (as /proc names it) -> the thread, for every thread the interpreter
        knows; the ids that name none of the target's threads are left in `self.stray`."""
        lay, mem = self.layout, self.memory
        tstate = mem.pointer(self.main_interpreter() + lay.threads_head)
        listed: list[tuple[int, int]] = []  # (the id the interpreter stored, tstate)
        seen: set[int] = set()
        while tstate and tstate not in seen and len(seen) < MAX_THREADS:
            seen.add(tstate)
            inner = self._native_id(tstate)
            if inner > 0:
                listed.append((inner, tstate))
            tstate = mem.pointer(tstate + lay.tstate_next)
        ids = self.ids
        if any(ids.proc_id(inner) is None for inner, _ in listed):
            ids.refresh()  # a thread started since the last look (or a namespace's first)
        found: dict[int, PythonThread] = {}
        self.stray = []
        for inner, tstate in listed:
            tid = ids.proc_id(inner)
            if tid is None:
                self.stray.append(inner)
                continue
            pthread_id = mem.pointer(tstate + lay.tstate_thread_id)
            # py-spy names a thread by the Linux id the interpreter keeps (3.11+: the id in
            # the target's own PID namespace), else by its pthread_t (3.10): the profile
            # must use the same id
            native = lay.tstate_native_thread_id is not None
            found[tid] = PythonThread(tid, pthread_id, tstate, inner if native else pthread_id)
        self._tid_of_tstate = {thread.tstate: tid for tid, thread in found.items()}
        return found

    def _native_id(self, tstate: int) -> int:
        """The thread's Linux id as the interpreter stored it: in the target's own PID
        namespace (ThreadIds maps it to /proc's)."""
        lay, mem = self.layout, self.memory
        if lay.tstate_native_thread_id is not None:
            return int(struct.unpack("<q", mem.read(tstate + lay.tstate_native_thread_id, 8))[0])
        pthread = mem.pointer(tstate + lay.tstate_thread_id)
        return mem.int32(pthread + self.located.arch.pthread_tid) if pthread else 0

    # -- per tick -------------------------------------------------------------------------
    def holder(self) -> tuple[int, int | None]:
        """(locked, holder's TID): locked 0 means nobody holds the GIL (a hand-off)."""
        locked, holder, _ = self.gil_state()
        return locked, holder

    def gil_state(self) -> tuple[int, int | None, int]:
        """(locked, holder's TID, threads inside pthread_cond_wait on the GIL's two
        condition variables: cond, where takers wait, and switch_cond, where a dropper
        waits for the hand-off), in one read of the GIL struct."""
        wrefs = self.located.cond_wrefs
        switch = self.located.arch.gil_switch
        end = switch + wrefs + 4
        raw = self.memory.read(self.gil + GIL_LAST_HOLDER, end - GIL_LAST_HOLDER)
        last, locked = struct.unpack_from("<Qi", raw)
        waiters = 0
        for cond in (GIL_COND, switch):
            at = cond + wrefs - GIL_LAST_HOLDER
            waiters += int.from_bytes(raw[at : at + 4], "little") >> 3
        if locked != 1 or not last:
            return locked, None, waiters
        tid = self._tid_of_tstate.get(last)
        if tid is None:
            try:
                tid = self.ids.proc_id(self._native_id(last))
            except MemoryReadError:
                return locked, None, waiters
        return locked, tid, waiters

    def stack(self, tstate: int) -> tuple[Frame, ...]:
        """The thread's Python frames, root first (the innermost MAX_DEPTH of them)."""
        lay, mem = self.layout, self.memory
        if lay.cframe_current_frame is not None:
            cframe = mem.pointer(tstate + lay.tstate_frame)
            frame = mem.pointer(cframe + lay.cframe_current_frame) if cframe else 0
        else:
            frame = mem.pointer(tstate + lay.tstate_frame)
        frames: list[Frame] = []
        header = lay.frame_header_size
        # 3.11+ frames sit in the thread's data stack, each caller below its callee: one read
        # from the start of a frame's page serves the callers on that page too (one to three
        # reads for a 20-frame stack, where each frame took one). 3.10's
        # frames are heap objects, read one by one. 4096 divides every page size Linux uses.
        owner = lay.frame_owner
        window, window_start, window_end = b"", 0, 0
        depth = 0
        while frame and depth < MAX_DEPTH:
            depth += 1
            if owner is None:
                raw = mem.read(frame, header)
            else:
                if not window_start <= frame <= window_end - header:
                    window_start = frame & ~(FRAME_PAGE - 1)
                    window_end = frame + header
                    window = mem.read(window_start, window_end - window_start)
                raw = window[frame - window_start : frame - window_start + header]
            code = int.from_bytes(raw[lay.frame_code : lay.frame_code + 8], "little")
            code &= ~lay.code_tag_bits
            previous = int.from_bytes(raw[lay.frame_previous : lay.frame_previous + 8], "little")
            shim = owner is not None and lay.skips_shim_frames and raw[owner] >= 3
            if not shim:
                python_frame = self.code_frame(code)
                if python_frame is not None:
                    frames.append(python_frame)
            frame = previous
        frames.reverse()
        return tuple(frames)

    def code_frame(self, code: int) -> Frame | None:
        """The function a code object names, or None when `code` is not a code object
        (checked by its type, once per address)."""
        if code in self._code_frames:
            return self._code_frames[code]
        lay, mem = self.layout, self.memory
        frame: Frame | None = None
        try:
            if code and mem.pointer(code + OB_TYPE) == self.located.code_type:
                name_at = lay.code_qualname if lay.code_qualname is not None else lay.code_name
                frame = Frame(
                    self.string(mem.pointer(code + name_at)),
                    self.string(mem.pointer(code + lay.code_filename)),
                    mem.int32(code + lay.code_firstlineno),
                )
        except MemoryReadError:
            return None  # not cached: a pointer caught mid-update
        if len(self._code_frames) > 100_000:
            self._code_frames.clear()
        self._code_frames[code] = frame
        return frame

    def string(self, address: int) -> str:
        """A str object's text (compact strings: what code names and file names are)."""
        lay, mem = self.layout, self.memory
        raw = mem.read(address + lay.unicode_length, lay.unicode_state - lay.unicode_length + 4)
        length = int.from_bytes(raw[:8], "little")
        state = int.from_bytes(raw[-4:], "little")
        kind, compact, ascii_ = (state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1
        if not compact or kind not in (1, 2, 4) or length > _MAX_NAME:
            return "?"
        start = lay.unicode_ascii_size if ascii_ else lay.unicode_compact_size
        data = mem.read(address + start, length * kind) if length else b""
        encoding = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
        return data.decode(encoding, "replace")


def open_interpreter(pid: int) -> Interpreter:
    """The target's interpreter, checked (see `check`); StatesUnavailable says why not,
    NotReadyYet when it is too young to read."""
    memory = TargetMemory(pid)
    try:
        located = locate(pid, memory)
        layout, debug_gil = _layout_for(located, memory)
        if layout.free_threaded:
            raise StatesUnavailable(
                "free-threaded build: there is no GIL to hold or wait for; use --mode wall "
                "or --mode cpu"
            )
        interpreter = Interpreter(pid, memory, located, layout)
        check(interpreter, debug_gil)
    except BaseException:
        memory.close()
        raise
    return interpreter
