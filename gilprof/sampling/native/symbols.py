"""Function symbols of an ELF file with their extents, to name the function an instruction
pointer is in.

The full symbol table (.symtab) where the file still has one, else the exported one
(.dynsym). A pointer is named only when it falls inside a symbol's own extent
(st_value .. st_value + st_size): a stripped library's internal code lies between exported
functions, and the nearest exported name before it would be a confident wrong answer.
Files are read through an mmap and only their section headers and symbol tables are
touched, so a 1 GB libtorch costs its symbol table, not its size.
"""

from __future__ import annotations

import bisect
import mmap
import struct
from dataclasses import dataclass

_SHT_SYMTAB, _SHT_DYNSYM = 2, 11
_PT_LOAD = 1
_STT_FUNC, _STT_GNU_IFUNC = 2, 10
_SYM = struct.Struct("<IBBHQQ")
MAX_SYMBOLS = 2_000_000  # larger tables are cut: the tail is named by library only
MAX_NAME = 120


@dataclass(frozen=True)
class Segment:
    offset: int  # p_offset
    vaddr: int  # p_vaddr
    size: int  # p_filesz


class FunctionSymbols:
    """Sorted extents of one file's functions, and its loadable segments."""

    def __init__(self, segments: list[Segment], extents: list[tuple[int, int, str]]) -> None:
        self.segments = segments
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


def read_function_symbols(path: str) -> FunctionSymbols:
    """The functions of the ELF file at `path` (OSError/ValueError when it cannot be read)."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
        try:
            return _parse(data)
        except (struct.error, IndexError) as exc:
            raise ValueError(f"{path}: malformed ELF ({exc})") from None


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
    return FunctionSymbols(segments, extents)
