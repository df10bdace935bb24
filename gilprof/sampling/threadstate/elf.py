"""Exported symbols of an ELF file, read from its dynamic symbol table.

Enough of ELF64 little-endian to find `_PyRuntime`, `PyCode_Type`, `Py_Version`: the section
headers, `.dynsym` and its string table. No binutils needed on the user's machine, and no
guessing from a file name: a symbol is either in the table or it is not.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

_SHT_DYNSYM = 11
_SHT_GNU_VERDEF = 0x6FFFFFFD
_PT_LOAD = 1
ET_EXEC = 2


class ElfError(Exception):
    """The file is not an ELF64 little-endian object this reader understands."""


@dataclass(frozen=True)
class ElfSymbols:
    path: str
    machine: int  # e_machine: 62 x86_64, 183 aarch64
    file_type: int  # e_type: 2 executable (absolute addresses), 3 shared object / PIE
    first_load_vaddr: int  # p_vaddr of the first PT_LOAD, page-aligned
    symbols: dict[str, int]  # name -> st_value, only the names asked for
    versions: frozenset[str] = frozenset()  # symbol versions it defines (GLIBC_2.41, ...)

    def address(self, name: str, load_base: int) -> int | None:
        """Where `name` lives in a process that mapped this file at `load_base`."""
        value = self.symbols.get(name)
        if value is None:
            return None
        if self.file_type == ET_EXEC:
            return value
        return load_base + value - self.first_load_vaddr


def read_symbols(path: str, wanted: Iterable[str]) -> ElfSymbols:
    """The st_value of each of `wanted` that `path` exports (defined symbols only)."""
    names = set(wanted)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ElfError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ElfError(f"{path}: not a 64-bit little-endian ELF file")
    try:
        return _parse(path, data, names)
    except (struct.error, IndexError, ValueError) as exc:
        raise ElfError(f"{path}: malformed ELF ({exc})") from None


def _parse(path: str, data: bytes, names: set[str]) -> ElfSymbols:
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    e_phoff, e_shoff = struct.unpack_from("<QQ", data, 32)
    e_phentsize, e_phnum, e_shentsize, e_shnum = struct.unpack_from("<HHHH", data, 54)
    first_load = None
    for i in range(e_phnum):
        p_type, _flags, _offset, p_vaddr = struct.unpack_from(
            "<IIQQ", data, e_phoff + i * e_phentsize
        )
        if p_type == _PT_LOAD:
            first_load = p_vaddr & ~0xFFF
            break
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)
    ]
    found: dict[str, int] = {}
    versions: set[str] = set()
    for _name, sh_type, _f, _addr, offset, size, link, info, _align, entsize in sections:
        strtab = sections[link] if sh_type in (_SHT_DYNSYM, _SHT_GNU_VERDEF) else None
        if strtab is None:
            continue
        str_offset, str_size = strtab[4], strtab[5]
        strings = data[str_offset : str_offset + str_size]
        if sh_type == _SHT_GNU_VERDEF:
            versions |= _version_definitions(data, offset, info, strings)
            continue
        if not entsize:
            continue
        for position in range(offset, offset + size, entsize):
            st_name, _st_info, _other, st_shndx, st_value, _size = struct.unpack_from(
                "<IBBHQQ", data, position
            )
            if st_shndx == 0 or not st_name:  # undefined: imported, not exported
                continue
            end = strings.index(b"\0", st_name)
            name = strings[st_name:end].decode("ascii", "replace")
            if name in names:
                found[name] = st_value
    return ElfSymbols(path, e_machine, e_type, first_load or 0, found, frozenset(versions))


def _version_definitions(data: bytes, offset: int, count: int, strings: bytes) -> set[str]:
    """The names of a .gnu.version_d section's `count` entries (Elf64_Verdef, each with its
    first Elf64_Verdaux naming it)."""
    names: set[str] = set()
    at = offset
    for _ in range(count):
        _version, _flags, _ndx, aux_count, _hash, aux, following = struct.unpack_from(
            "<HHHHIII", data, at
        )
        if aux_count:
            (name,) = struct.unpack_from("<I", data, at + aux)
            names.add(strings[name : strings.index(b"\0", name)].decode("ascii", "replace"))
        if not following:
            break
        at += following
    return names
