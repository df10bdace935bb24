"""Where CPython keeps what the thread-state reader needs, per interpreter version (x86_64).

3.10-3.12 come from tables; each value was printed by `offsetof`/`sizeof` compiled against
that version's own internal headers (Py_BUILD_CORE, pyenv 3.10.13 / 3.11.7 / 3.12.1 and
Debian's 3.11.2, which agree with 3.11.7): see benchmarks/threadstate/offsets.c, which
prints them again for any installed build. 3.13 reads `_Py_DebugOffsets`, the table the
interpreter publishes at the start of `_PyRuntime` for out-of-process tools, parsed with the
3.13 header's field order. A version whose layout was not checked here gets no layout: the
reader refuses rather than guess (3.14's `_Py_DebugOffsets` has other fields).

The GIL struct (`_gil_runtime_state`: last_holder +8, locked +16, cond +32, mutex +80,
switch_cond +120, switch_mutex +168, size 208) is the same in every version listed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

GIL_LAST_HOLDER = 8
GIL_LOCKED = 16
GIL_COND = 32  # cond +32 and mutex +80: where a thread waits to take the GIL
GIL_SWITCH = 120  # switch_cond +120 and switch_mutex +168: a dropper waits for the hand-off
GIL_SIZE = 208
OB_TYPE = 8
# glibc x86_64: struct pthread's `tid` (3.10 keeps only the pthread_t of each thread)
PTHREAD_TID = 0x2D0
DEBUG_COOKIE = b"xdebugpy"


class LayoutError(Exception):
    """No verified layout for this interpreter."""


@dataclass(frozen=True)
class Layout:
    minor: int  # 3.minor
    source: str  # where the offsets came from
    interpreters_head: int  # _PyRuntime -> first PyInterpreterState*
    threads_head: int  # PyInterpreterState -> first PyThreadState*
    tstate_next: int
    tstate_thread_id: int  # pthread_t
    tstate_native_thread_id: int | None  # Linux TID (3.11+)
    tstate_frame: int  # 3.10 frame, 3.11/3.12 cframe, 3.13 current_frame
    cframe_current_frame: int | None  # 3.11/3.12: _PyCFrame -> current _PyInterpreterFrame*
    frame_code: int
    frame_previous: int
    frame_owner: int | None  # None: 3.10 frame objects
    code_name: int
    code_qualname: int | None
    code_filename: int
    code_firstlineno: int
    unicode_length: int
    unicode_state: int
    unicode_ascii_size: int  # sizeof(PyASCIIObject): where compact ASCII data starts
    unicode_compact_size: int  # sizeof(PyCompactUnicodeObject)
    gil_in_runtime: int | None = None  # 3.10/3.11: the GIL is embedded in _PyRuntime here
    gil_pointer_in_interp: int | None = None  # 3.12+: interp holds a pointer to it here
    free_threaded: bool = False

    @property
    def skips_shim_frames(self) -> bool:
        """3.12+ pushes C-stack entry frames (owner FRAME_OWNED_BY_CSTACK = 3) with no
        Python code of their own."""
        return self.minor >= 12

    @property
    def frame_header_size(self) -> int:
        """Bytes read per frame: enough to cover code, previous and owner."""
        ends = [self.frame_code + 8, self.frame_previous + 8]
        if self.frame_owner is not None:
            ends.append(self.frame_owner + 1)
        return max(ends)


_TABLES: dict[int, Layout] = {
    10: Layout(
        minor=10, source="table for CPython 3.10 (checked on 3.10.13)",
        interpreters_head=32, threads_head=8, tstate_next=8, tstate_thread_id=176,
        tstate_native_thread_id=None, tstate_frame=24, cframe_current_frame=None,
        frame_code=32, frame_previous=24, frame_owner=None,
        code_name=112, code_qualname=None, code_filename=104, code_firstlineno=40,
        unicode_length=16, unicode_state=32, unicode_ascii_size=48, unicode_compact_size=72,
        gil_in_runtime=352,
    ),
    11: Layout(
        minor=11, source="table for CPython 3.11 (checked on 3.11.7 and Debian 3.11.2)",
        interpreters_head=40, threads_head=16, tstate_next=8, tstate_thread_id=152,
        tstate_native_thread_id=160, tstate_frame=56, cframe_current_frame=8,
        frame_code=32, frame_previous=48, frame_owner=69,
        code_name=120, code_qualname=128, code_filename=112, code_firstlineno=72,
        unicode_length=16, unicode_state=32, unicode_ascii_size=48, unicode_compact_size=72,
        gil_in_runtime=360,
    ),
    12: Layout(
        minor=12, source="table for CPython 3.12 (checked on 3.12.1)",
        interpreters_head=40, threads_head=72, tstate_next=8, tstate_thread_id=136,
        tstate_native_thread_id=144, tstate_frame=56, cframe_current_frame=0,
        frame_code=0, frame_previous=8, frame_owner=70,
        code_name=120, code_qualname=128, code_filename=112, code_firstlineno=68,
        unicode_length=16, unicode_state=32, unicode_ascii_size=40, unicode_compact_size=56,
        gil_pointer_in_interp=384,
    ),
}  # fmt: skip


def table_layout(minor: int) -> Layout:
    """The verified table of 3.`minor`, for interpreters without _Py_DebugOffsets."""
    layout = _TABLES.get(minor)
    if layout is None:
        raise LayoutError(f"no verified layout for CPython 3.{minor}")
    return layout


# The 3.13 _Py_DebugOffsets after its cookie, as uint64 fields in header order:
# version, free_threaded, runtime_state{3}, interpreter_state{13}, thread_state{9},
# interpreter_frame{6}, code_object{10}, pyobject{2}, type_object{4}, tuple{3}, list{3},
# dict{3}, float{2}, long{3}, bytes{3}, unicode_object{4}, gc{2}.
_DEBUG_313_FIELDS = 2 + 3 + 13 + 9 + 6 + 10 + 2 + 4 + 3 + 3 + 3 + 2 + 3 + 3 + 4 + 2
DEBUG_OFFSETS_SIZE = 8 + 8 * _DEBUG_313_FIELDS


def debug_offsets_version(raw: bytes) -> int:
    """PY_VERSION_HEX from the start of `_PyRuntime`; LayoutError without the cookie."""
    if raw[:8] != DEBUG_COOKIE:
        raise LayoutError("no _Py_DebugOffsets cookie at _PyRuntime")
    return int(struct.unpack_from("<Q", raw, 8)[0])


def debug_offsets_layout(raw: bytes) -> tuple[Layout, dict[str, int]]:
    """A Layout from a 3.13 `_Py_DebugOffsets`, and the GIL fields it gives for checking
    (`gil_runtime_state`, `locked`, `holder`, relative to the interpreter state)."""
    version = debug_offsets_version(raw)
    major, minor = version >> 24, (version >> 16) & 0xFF
    if (major, minor) != (3, 13):
        raise LayoutError(
            f"CPython {major}.{minor}: its _Py_DebugOffsets layout was not verified here"
        )
    if len(raw) < DEBUG_OFFSETS_SIZE:
        raise LayoutError("_Py_DebugOffsets shorter than 3.13's")
    d = struct.unpack_from(f"<{_DEBUG_313_FIELDS}Q", raw, 8)
    interp, tstate, frame, code = d[5:18], d[18:27], d[27:33], d[33:43]
    unicode = d[_DEBUG_313_FIELDS - 6 : _DEBUG_313_FIELDS - 2]
    layout = Layout(
        minor=minor,
        source="_Py_DebugOffsets (CPython 3.13)",
        interpreters_head=d[4],
        threads_head=interp[3],
        tstate_next=tstate[2],
        tstate_thread_id=tstate[5],
        tstate_native_thread_id=tstate[6],
        tstate_frame=tstate[4],
        cframe_current_frame=None,
        frame_code=frame[2],
        frame_previous=frame[1],
        frame_owner=frame[5],
        code_name=code[2],
        code_qualname=code[3],
        code_filename=code[1],
        code_firstlineno=code[5],
        unicode_length=unicode[2],
        unicode_state=unicode[1],
        unicode_ascii_size=unicode[3],
        unicode_compact_size=unicode[3] + 16,  # utf8_length, utf8: two words after ASCII's
        gil_pointer_in_interp=interp[8],
        free_threaded=bool(d[1]),
    )
    return layout, {"gil_runtime_state": interp[9], "locked": interp[11], "holder": interp[12]}
