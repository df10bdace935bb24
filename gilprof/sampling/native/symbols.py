"""Function symbols of an ELF file with their extents, to name the function an instruction
pointer is in.

The full symbol table (.symtab) where the file still has one, else the exported one
(.dynsym). A pointer is named only when it falls inside a symbol's own extent
(st_value .. st_value + st_size): a stripped library's internal code lies between exported
functions, and the nearest exported name before it would be a confident wrong answer.
Files are read through an mmap and only their section headers and symbol tables are
touched, so a 1 GB libtorch costs its symbol table, not its size. A stripped file's full
table is taken from its installed debug file, found by build id (read_function_symbols).
"""

from __future__ import annotations

import bisect
import contextlib
import mmap
import os
import struct
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from gilprof.sampling.threadstate.namespaces import MappedFile, readable_path

_SHT_SYMTAB, _SHT_NOTE, _SHT_DYNSYM = 2, 7, 11
_NT_GNU_BUILD_ID = 3
_PT_LOAD = 1
_STT_FUNC, _STT_GNU_IFUNC = 2, 10
_SYM = struct.Struct("<IBBHQQ")
MAX_SYMBOLS = 2_000_000  # larger tables are cut: the tail is named by library only
MAX_NAME = 120
SYNC_LOAD_BYTES = 16 << 20  # symbols of smaller files are read at once, larger in the background


@dataclass(frozen=True)
class Segment:
    offset: int  # p_offset
    vaddr: int  # p_vaddr
    size: int  # p_filesz


class FunctionSymbols:
    """Sorted extents of one file's functions, and its loadable segments."""

    def __init__(
        self,
        segments: list[Segment],
        extents: list[tuple[int, int, str]],
        full: bool = True,
        debug_file: str | None = None,
    ) -> None:
        self.segments = segments
        self.full = full  # the full table (.symtab), not only the exported functions
        self.debug_file = debug_file  # where the table came from, when not the file itself
        extents.sort()
        self._starts = [start for start, _end, _name in extents]
        self._extents = extents

    def vaddr(self, file_offset: int) -> int | None:
        """The link-time address of a byte at `file_offset` of the file."""
        for segment in self.segments:
            if segment.offset <= file_offset < segment.offset + segment.size:
                return file_offset - segment.offset + segment.vaddr
        return None

    def name(self, file_offset: int) -> str | None:
        """The function whose extent holds the byte at `file_offset`, or None."""
        address = self.vaddr(file_offset)
        if address is None:
            return None
        index = bisect.bisect_right(self._starts, address) - 1
        # extents can nest or alias one another: look back over a few that start earlier
        for i in range(index, max(-1, index - 8), -1):
            start, end, name = self._extents[i]
            if start <= address < end:
                return name
        return None

    def __len__(self) -> int:
        return len(self._extents)

    @property
    def extents(self) -> list[tuple[int, int, str]]:
        return self._extents

    def has(self, base_name: str) -> bool:
        """Whether a function of that name, or a compiler's clone of it (`take_gil.lto_priv.0`),
        is in the table."""
        return any(name.split(".", 1)[0] == base_name for _s, _e, name in self._extents)


def read_function_symbols(path: str, debug_roots: Sequence[str] = ()) -> FunctionSymbols:
    """The functions of the ELF file at `path` (OSError/ValueError when it cannot be read).

    A file without its full table (a distribution's stripped build) takes it from its
    separate debug file where one is installed (`find_debug_file` under `debug_roots`): its
    names, with the file's own segments (the debug file keeps the addresses, not the code)."""
    with _mapped(path) as data:
        try:
            symbols = _parse(data)
            build_id = _build_id(data) if not symbols.full and debug_roots else None
        except (struct.error, IndexError) as exc:
            raise ValueError(f"{path}: malformed ELF ({exc})") from None
    debug = _installed_debug_file(build_id, debug_roots) if build_id else None
    if debug is not None:
        try:
            with _mapped(debug) as data:
                named = _parse(data)
        except (OSError, ValueError, struct.error, IndexError):
            return symbols
        if named.full:
            return FunctionSymbols(symbols.segments, named.extents, full=True, debug_file=debug)
    return symbols


def find_debug_file(path: str, debug_roots: Sequence[str] = ("",)) -> str | None:
    """The separate debug file of the ELF file at `path`, installed under one of
    `debug_roots` ("" for this machine's, /proc/PID/root for a container's) as
    `usr/lib/debug/.build-id/XX/REST.debug`, named by the file's GNU build id; used only
    when its own build id is the same. None where there is none (or no build id)."""
    try:
        with _mapped(path) as data:
            build_id = _build_id(data)
    except (OSError, ValueError, struct.error, IndexError):
        return None
    return _installed_debug_file(build_id, debug_roots) if build_id else None


def _installed_debug_file(build_id: str, debug_roots: Sequence[str]) -> str | None:
    for root in debug_roots:
        debug = f"{root}/usr/lib/debug/.build-id/{build_id[:2]}/{build_id[2:]}.debug"
        try:
            with _mapped(debug) as data:
                if _build_id(data) == build_id:
                    return debug
        except (OSError, ValueError, struct.error, IndexError):
            continue
    return None


@contextlib.contextmanager
def _mapped(path: str) -> Iterator[mmap.mmap]:
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
        yield data


def _build_id(data: mmap.mmap) -> str | None:
    """The GNU build id from the file's note sections, hex; None without one."""
    e_shoff = struct.unpack_from("<Q", data, 40)[0]
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 58)
    for i in range(e_shnum):
        _name, sh_type, _f, _a, offset, size = struct.unpack_from(
            "<IIQQQQ", data, e_shoff + i * e_shentsize
        )
        at, end = offset, offset + size
        while sh_type == _SHT_NOTE and at + 12 <= end:
            namesz, descsz, kind = struct.unpack_from("<III", data, at)
            desc = at + 12 + (namesz + 3) // 4 * 4
            if kind == _NT_GNU_BUILD_ID and data[at + 12 : at + 16] == b"GNU\0":
                return bytes(data[desc : desc + descsz]).hex()
            at = desc + (descsz + 3) // 4 * 4
    return None


def _parse(data: mmap.mmap) -> FunctionSymbols:
    e_phoff, e_shoff = struct.unpack_from("<QQ", data, 32)
    e_phentsize, e_phnum, e_shentsize, e_shnum = struct.unpack_from("<HHHH", data, 54)
    segments = []
    for i in range(e_phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, e_phoff + i * e_phentsize
        )
        if p_type == _PT_LOAD:
            segments.append(Segment(p_offset, p_vaddr, p_filesz))
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)
    ]
    tables = [s for s in sections if s[1] == _SHT_SYMTAB and s[9]]
    full = bool(tables)
    tables = tables or [s for s in sections if s[1] == _SHT_DYNSYM and s[9]]
    extents: list[tuple[int, int, str]] = []
    for _name, _type, _f, _addr, offset, size, link, _info, _align, entsize in tables:
        strtab = sections[link]
        strings_at, strings_end = strtab[4], strtab[4] + strtab[5]
        count = min(size // entsize, MAX_SYMBOLS - len(extents))
        for i in range(count):
            st_name, st_info, _other, st_shndx, st_value, st_size = _SYM.unpack_from(
                data, offset + i * entsize
            )
            if st_shndx == 0 or not st_size or (st_info & 0xF) not in (_STT_FUNC, _STT_GNU_IFUNC):
                continue
            at = strings_at + st_name
            end = data.find(b"\0", at, min(strings_end, at + 4096))
            if end < 0:
                continue
            name = data[at:end].decode("utf-8", "replace")
            extents.append((st_value, st_value + st_size, name[:MAX_NAME]))
    return FunctionSymbols(segments, extents, full=full)


class SymbolTables:
    """Function symbols per mapped file, loaded in the background once per file. The file
    is opened where the thread-state reader opens the target's files
    (namespaces.readable_path: through the target's root, a chroot, map_files)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.loaded: dict[str, FunctionSymbols | None] = {}
        self._lock = threading.Lock()

    def name(self, path: str, file_offset: int, mapped: MappedFile | None) -> str | None:
        """The function at `file_offset` of `path`; `mapped`: the file as the target's maps
        give it (None: not mapped from offset 0, opened through the target's root)."""
        with self._lock:
            known = path in self.loaded
            if not known:
                self.loaded[path] = None
            table = self.loaded[path]
        if not known:
            readable = self._readable(path, mapped)
            try:
                small = os.path.getsize(readable) < SYNC_LOAD_BYTES
            except OSError:
                return None
            if small:  # the C library and most extensions: at once, so clock reads are known
                self._load(readable, path)
                return self.name(path, file_offset, mapped)
            threading.Thread(
                target=self._load, args=(readable, path), name="gilprof-symbols", daemon=True
            ).start()
            return None
        return table.name(file_offset) if table is not None else None

    def load_now(self, path: str, mapped: MappedFile | None) -> FunctionSymbols | None:
        """`path`'s table, read at once unless it was read (or is being read) already; None
        when it cannot be read, which `name` then does not try again."""
        with self._lock:
            if path in self.loaded:
                return self.loaded[path]
            self.loaded[path] = None
        self._load(self._readable(path, mapped), path)
        with self._lock:
            return self.loaded[path]

    def _readable(self, path: str, mapped: MappedFile | None) -> str:
        return f"/proc/{self.pid}/root{path}" if mapped is None else readable_path(self.pid, mapped)

    def _load(self, readable: str, path: str) -> None:
        try:
            # a stripped file's debug file: the target's own (a container's) or this machine's
            table = read_function_symbols(readable, (f"/proc/{self.pid}/root", ""))
        except (OSError, ValueError):
            return  # named by its file only
        with self._lock:
            self.loaded[path] = table
