"""Where CPython keeps what the thread-state reader needs, per interpreter version (LP64:
x86_64 and aarch64; what differs between those is in arch.py).

3.10-3.12 come from tables; each value was printed by `offsetof`/`sizeof` compiled against
that version's own internal headers (Py_BUILD_CORE, pyenv 3.10.13 / 3.11.7 / 3.12.1 and
Debian's 3.11.2, which agree with 3.11.7): see benchmarks/threadstate/offsets.c, which
prints them again for any installed build. 3.13-3.15 read `_Py_DebugOffsets`, the table the
interpreter publishes at the start of `_PyRuntime` for out-of-process tools, parsed in that
minor version's field order (each minor adds fields to the table itself; 3.15 also moves
PyThreadState's `thread_id` and gives its `holds_gil` and `gil_requested`). The parsed
offsets must fit the struct sizes the same table gives (`_check_sizes`), and the layout
must then fit the live process (verify.py), so a patch release that changes the table's own
order is refused, not misread. A version whose layout was not checked here gets no layout.

The GIL struct (`_gil_runtime_state`: last_holder +8, locked +16, cond +32, mutex +80,
switch_cond +120, switch_mutex +168, size 208 on x86_64; aarch64's pthread_mutex_t is 8
bytes longer, so switch_cond +128, switch_mutex +176, size 224: arch.py) is the same in
every version listed
(3.10-3.15; 3.13-3.15 also say so in their `_Py_DebugOffsets`, checked at attach).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

GIL_LAST_HOLDER = 8
GIL_LOCKED = 16
GIL_COND = 32  # cond +32 and mutex +80: where a thread waits to take the GIL
# x86_64's switch_cond +120 and switch_mutex +168 (a dropper waits there for the hand-off)
# and size: they follow a pthread_mutex_t, whose size is the architecture's (arch.py)
GIL_SWITCH = 120
GIL_SIZE = 208
OB_TYPE = 8
# glibc x86_64: struct pthread's `tid` (3.10 keeps only the pthread_t of each thread);
# arch.py has each architecture's
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
    # 3.15+: PyThreadState's own GIL flags, which the attach check compares with the GIL
    tstate_holds_gil: int | None = None
    tstate_gil_requested: int | None = None

    @property
    def code_tag_bits(self) -> int:
        """3.14+ keeps a frame's code as a _PyStackRef, tagged in its low bits (1 bit in
        3.14, 2 in 3.15): masked off before the pointer is followed."""
        return 3 if self.minor >= 14 else 0

    @property
    def skips_shim_frames(self) -> bool:
        """3.12+ pushes C-stack entry frames (owner FRAME_OWNED_BY_CSTACK = 3; 3.14+ also
        FRAME_OWNED_BY_INTERPRETER = 3 and CSTACK = 4: owner >= 3) with no Python code of
        their own."""
        return self.minor >= 12

    @property
    def frame_header_size(self) -> int:
        """Bytes read per frame: enough to cover code, previous and owner."""
        ends = [self.frame_code + 8, self.frame_previous + 8]
        if self.frame_owner is not None:
            ends.append(self.frame_owner + 1)
        return max(ends)


# The tables, a column per version (3.10, 3.11, 3.12): one row per Layout field.
_TABLE_MINORS = (10, 11, 12)
_TABLE_SOURCES = (
    "table for CPython 3.10 (checked on 3.10.13)",
    "table for CPython 3.11 (checked on 3.11.7 and Debian 3.11.2)",
    "table for CPython 3.12 (checked on 3.12.1)",
)
_TABLE: dict[str, tuple[int | None, ...]] = {
    "interpreters_head":       (32,   40,   40),
    "threads_head":            (8,    16,   72),
    "tstate_next":             (8,    8,    8),
    "tstate_thread_id":        (176,  152,  136),
    "tstate_native_thread_id": (None, 160,  144),
    "tstate_frame":            (24,   56,   56),
    "cframe_current_frame":    (None, 8,    0),
    "frame_code":              (32,   32,   0),
    "frame_previous":          (24,   48,   8),
    "frame_owner":             (None, 69,   70),
    "code_name":               (112,  120,  120),
    "code_qualname":           (None, 128,  128),
    "code_filename":           (104,  112,  112),
    "code_firstlineno":        (40,   72,   68),
    "unicode_length":          (16,   16,   16),
    "unicode_state":           (32,   32,   32),
    "unicode_ascii_size":      (48,   48,   40),
    "unicode_compact_size":    (72,   72,   56),
    "gil_in_runtime":          (352,  360,  None),
    "gil_pointer_in_interp":   (None, None, 384),
}  # fmt: skip


def table_layout(minor: int) -> Layout:
    """The verified table of 3.`minor`, for interpreters without _Py_DebugOffsets."""
    if minor not in _TABLE_MINORS:
        raise LayoutError(f"no verified layout for CPython 3.{minor}")
    column = _TABLE_MINORS.index(minor)
    values = {name: row[column] for name, row in _TABLE.items()}
    return Layout(minor=minor, source=_TABLE_SOURCES[column], **values)  # type: ignore[arg-type]


# `_Py_DebugOffsets` after its cookie, version and free_threaded words: its sections in
# header order, each a run of uint64 fields, up to the last section the reader uses
# (unicode_object). Read off each version's header (3.13: pycore_runtime.h; 3.14, 3.15:
# pycore_debug_offsets.h; Debian sid's 3.13.18, 3.14.10 and 3.15.2). The table gives
# offsets; its own field order is what a version can change, so debug_offsets_layout
# checks that what it parsed is self-consistent, and target.check that it fits the process.
_RUNTIME = ("runtime_state", "size finalizing interpreters_head")
_INTERP_13 = "size id next threads_head gc imports_modules sysdict builtins ceval_gil " + (
    "gil_runtime_state gil_runtime_state_enabled gil_runtime_state_locked gil_runtime_state_holder"
)
_INTERP_14 = _INTERP_13.replace("threads_head", "threads_head threads_main") + (
    " code_object_generation tlbc_generation"
)
_TSTATE_13 = "size prev next interp current_frame thread_id native_thread_id datastack_chunk status"
_TSTATE_15 = (
    _TSTATE_13.replace(
        "current_frame", "current_frame base_frame last_profiled_frame last_profiled_frame_seq"
    )
    + " holds_gil gil_requested current_exception exc_state"
)
_FRAME_13 = "size previous executable instr_ptr localsplus owner"
_CODE_13 = "size filename name qualname linetable firstlineno argcount localsplusnames " + (
    "localspluskinds co_code_adaptive"
)
_TYPE_13 = "size tp_name tp_repr tp_flags"
_UNICODE_13 = "size state length asciiobject_size"
_OBJECTS = (
    ("tuple_object", "size ob_item ob_size"),
    ("list_object", "size ob_item ob_size"),
)
_SET = ("set_object", "size used table mask")
_SCALARS = (
    ("dict_object", "size ma_keys ma_values"),
    ("float_object", "size ob_fval"),
    ("long_object", "size lv_tag ob_digit"),
    ("bytes_object", "size ob_size ob_sval"),
)
_DEBUG_SECTIONS: dict[int, tuple[tuple[str, str], ...]] = {
    13: (
        _RUNTIME, ("interpreter_state", _INTERP_13), ("thread_state", _TSTATE_13),
        ("interpreter_frame", _FRAME_13), ("code_object", _CODE_13),
        ("pyobject", "size ob_type"), ("type_object", _TYPE_13), *_OBJECTS, *_SCALARS,
        ("unicode_object", _UNICODE_13),
    ),
    14: (
        _RUNTIME, ("interpreter_state", _INTERP_14), ("thread_state", _TSTATE_13),
        ("interpreter_frame", _FRAME_13 + " stackpointer tlbc_index"),
        ("code_object", _CODE_13 + " co_tlbc"),
        ("pyobject", "size ob_type"), ("type_object", _TYPE_13), *_OBJECTS, _SET, *_SCALARS,
        ("unicode_object", _UNICODE_13),
    ),
    15: (
        _RUNTIME, ("interpreter_state", _INTERP_14), ("thread_state", _TSTATE_15),
        ("err_stackitem", "exc_value"),
        ("interpreter_frame", _FRAME_13 + " stackpointer tlbc_index"),
        ("code_object", _CODE_13 + " co_tlbc"),
        ("pyobject", "size ob_type"), ("type_object", _TYPE_13 + " tp_basicsize tp_dictoffset"),
        ("heap_type_object", "size ht_cached_keys"), *_OBJECTS, _SET, *_SCALARS,
        ("unicode_object", _UNICODE_13 + " compactunicodeobject_size"),
    ),
}  # fmt: skip
_DEBUG_HEAD = 24  # cookie, version, free_threaded
# The most bytes any verified version's sections take: what target.py reads at _PyRuntime.
DEBUG_OFFSETS_SIZE = _DEBUG_HEAD + 8 * max(
    sum(len(fields.split()) for _, fields in sections) for sections in _DEBUG_SECTIONS.values()
)
# sections whose `size` bounds the offsets the reader takes from them
_SIZED = ("interpreter_state", "thread_state", "interpreter_frame", "code_object")
_MAX_STRUCT = 1 << 20


def debug_offsets_version(raw: bytes) -> int:
    """PY_VERSION_HEX from the start of `_PyRuntime`; LayoutError without the cookie."""
    if raw[:8] != DEBUG_COOKIE:
        raise LayoutError("no _Py_DebugOffsets cookie at _PyRuntime")
    return int(struct.unpack_from("<Q", raw, 8)[0])


def parse_debug_offsets(raw: bytes, minor: int) -> dict[str, int]:
    """Each "section.field" -> its value, read in 3.`minor`'s field order."""
    names = [
        f"{section}.{field}"
        for section, fields in _DEBUG_SECTIONS[minor]
        for field in fields.split()
    ]
    if len(raw) < _DEBUG_HEAD + 8 * len(names):
        raise LayoutError(f"_Py_DebugOffsets shorter than 3.{minor}'s")
    values = struct.unpack_from(f"<{len(names)}Q", raw, _DEBUG_HEAD)
    return dict(zip(names, values, strict=True))


def debug_offsets_layout(raw: bytes) -> tuple[Layout, dict[str, int]]:
    """A Layout from a 3.13-3.15 `_Py_DebugOffsets`, and the GIL fields it gives for
    checking (`gil_runtime_state`, `locked`, `holder`, relative to the interpreter state)."""
    version = debug_offsets_version(raw)
    major, minor = version >> 24, (version >> 16) & 0xFF
    if major != 3 or minor not in _DEBUG_SECTIONS:
        raise LayoutError(
            f"CPython {major}.{minor}: its _Py_DebugOffsets layout was not verified here"
        )
    d = parse_debug_offsets(raw, minor)
    _check_sizes(d, minor)
    tstate = "thread_state."
    compact = d.get("unicode_object.compactunicodeobject_size")
    layout = Layout(
        minor=minor,
        source=f"_Py_DebugOffsets (CPython 3.{minor})",
        interpreters_head=d["runtime_state.interpreters_head"],
        threads_head=d["interpreter_state.threads_head"],
        tstate_next=d[tstate + "next"],
        tstate_thread_id=d[tstate + "thread_id"],
        tstate_native_thread_id=d[tstate + "native_thread_id"],
        tstate_frame=d[tstate + "current_frame"],
        cframe_current_frame=None,
        frame_code=d["interpreter_frame.executable"],
        frame_previous=d["interpreter_frame.previous"],
        frame_owner=d["interpreter_frame.owner"],
        code_name=d["code_object.name"],
        code_qualname=d["code_object.qualname"],
        code_filename=d["code_object.filename"],
        code_firstlineno=d["code_object.firstlineno"],
        unicode_length=d["unicode_object.length"],
        unicode_state=d["unicode_object.state"],
        unicode_ascii_size=d["unicode_object.asciiobject_size"],
        # 3.13/3.14 do not give it: utf8_length and utf8, two words after PyASCIIObject
        unicode_compact_size=compact or d["unicode_object.asciiobject_size"] + 16,
        gil_pointer_in_interp=d["interpreter_state.ceval_gil"],
        free_threaded=bool(struct.unpack_from("<Q", raw, 16)[0]),
        tstate_holds_gil=d.get(tstate + "holds_gil"),
        tstate_gil_requested=d.get(tstate + "gil_requested"),
    )
    gil = {
        "gil_runtime_state": d["interpreter_state.gil_runtime_state"],
        "locked": d["interpreter_state.gil_runtime_state_locked"],
        "holder": d["interpreter_state.gil_runtime_state_holder"],
    }
    return layout, gil


def _check_sizes(d: dict[str, int], minor: int) -> None:
    """Each offset the reader takes lies inside its struct as the same table sizes it: a
    patch release that added or moved a field of `_Py_DebugOffsets` itself shifts every
    later value, which reads as sizes and offsets that cannot be."""
    for section in _SIZED:
        size = d[f"{section}.size"]
        if not 0 < size < _MAX_STRUCT:
            raise LayoutError(
                f"CPython 3.{minor}: its _Py_DebugOffsets do not read in 3.{minor}'s field "
                f"order ({section} size {size}): not a verified release"
            )
        for name, value in d.items():
            if name.startswith(section + ".") and name != f"{section}.size" and value >= size:
                raise LayoutError(
                    f"CPython 3.{minor}: its _Py_DebugOffsets do not read in 3.{minor}'s "
                    f"field order ({name} {value} outside its struct of {size} bytes): not "
                    "a verified release"
                )
