"""The native code that made a blocking system call: return addresses on the user stack.

/proc/TID/syscall gives a blocked thread's stack pointer at the call. The words above it
(older frames) that point into executable code, just after a call instruction, are return
addresses, innermost first. The C library's wrappers (pthread_cond_wait, the futex call)
and the C++ runtime's waits (std::condition_variable::wait) serve whoever called them: the
caller is the first return address outside them. The interpreter's own code there (the
file `_PyRuntime` was found in: an identity, not a name) is a Python-level lock, condition
or sleep, and the chain stops at it.

A stale word that looks like a return address (left in a frame's unused slot) can pass the
call-instruction check: the chain is evidence, read with the Python frames beside it.
"""

from __future__ import annotations

import fnmatch
import os
import struct

from gilprof.native_classes import is_pass_through
from gilprof.sampling.native.locator import Mappings
from gilprof.sampling.native.symbols import SymbolTables
from gilprof.sampling.threadstate.memory import MemoryReadError, TargetMemory

STACK_SCAN_BYTES = 2048  # from the stack pointer up: the C library's frames and the caller's
MAX_CALLERS = 3  # native frames kept outside the wrappers
NOT_RETURN_KEPT = 65536  # words remembered as no return address, then forgotten at once
# The C++ runtime's waits: their caller is the code that waits.
WAIT_WRAPPER_LIBRARIES = ("libstdc++.so*", "libgcc_s.so*", "libc++.so*", "libc++abi.so*")
AARCH64_USER_ADDRESS = (1 << 48) - 1


def _is_wrapper(library: str) -> bool:
    return is_pass_through(library) or any(
        fnmatch.fnmatchcase(library, p) for p in WAIT_WRAPPER_LIBRARIES
    )


def readable_symbol(symbol: str) -> str:
    """An Itanium-mangled C++ name's nested name ("_ZN4c10d4Work4waitE..." ->
    "c10d::Work::wait"); any other name as it is."""
    if symbol.startswith("_ZZN"):  # an entity local to a function: named by the function
        symbol = "_" + symbol[2:]
    if not symbol.startswith("_ZN"):
        return symbol
    i = 3
    while i < len(symbol) and symbol[i] in "KVrRO":
        i += 1
    parts: list[str] = []
    while i < len(symbol) and symbol[i].isdigit():
        j = i
        while j < len(symbol) and symbol[j].isdigit():
            j += 1
        length = int(symbol[i:j])
        parts.append(symbol[j : j + length])
        i = j + length
        if i < len(symbol) and symbol[i] == "I":  # template arguments: not shown
            break
    return "::".join(parts) if parts else symbol


class CallerChain:
    """Return addresses at a blocked thread's stack pointer, mapped to library and symbol."""

    def __init__(
        self,
        pid: int,
        memory: TargetMemory | None,
        aarch64: bool,
        interpreter_path: str,
        maps: Mappings | None = None,
        symbols: SymbolTables | None = None,
    ) -> None:
        self.memory = memory
        self.aarch64 = aarch64
        self.interpreter_path = interpreter_path
        self.maps = maps or Mappings(pid)
        self.symbols = symbols or SymbolTables(pid)
        self._after_call: dict[int, bool] = {}
        # words that are no return address into a file, for the maps read as `_rows`: most
        # of a blocked stack's words, read again at every new block at the same site
        self._not_return: set[int] = set()
        self._rows: list[tuple[int, int, int, str]] | None = None
        self._places: dict[int, tuple[str, str, bool]] = {}  # address -> library, symbol, final

    def share(self, maps: Mappings, symbols: SymbolTables) -> None:
        """Use the locator's maps and symbol tables (each library's symbols read once)."""
        self.maps, self.symbols = maps, symbols

    def callers(self, sp: int, now_ns: int) -> list[tuple[str, str, bool]]:
        """(library, symbol, in the interpreter) of the callers, innermost first."""
        if self.memory is None:
            return []
        try:
            data = self.memory.read(sp, STACK_SCAN_BYTES)
        except MemoryReadError:
            try:  # near the top of the stack's mapping
                data = self.memory.read(sp, 256)
            except MemoryReadError:
                return []
        self.maps.refresh(now_ns)
        if self.maps.rows is not self._rows:  # the maps changed: so may what a word is
            self._rows = self.maps.rows
            self._not_return.clear()
        out: list[tuple[str, str, bool]] = []
        seen: set[int] = set()
        not_return = self._not_return
        if len(not_return) > NOT_RETURN_KEPT:
            not_return.clear()
        for address in struct.unpack_from(f"<{len(data) // 8}Q", data):
            if self.aarch64:
                address &= AARCH64_USER_ADDRESS
            if address in not_return or address in seen or address < 4096:
                continue
            row = self.maps.find(address)
            if row is None or not row[3].startswith("/") or not self._is_return(address):
                not_return.add(address)
                continue
            seen.add(address)
            library, symbol, interpreter = self._place(address, row)
            if not interpreter and _is_wrapper(library):
                continue
            out.append((library, symbol, interpreter))
            if interpreter or len(out) >= MAX_CALLERS:
                break
        return out

    def _place(self, address: int, row: tuple[int, int, int, str]) -> tuple[str, str, bool]:
        known = self._places.get(address)
        if known is not None:
            return known
        low, _high, offset, path = row
        name = self.symbols.name(path, address - low + offset, self.maps.files.get(path))
        library = os.path.basename(path)
        place = (
            library,
            readable_symbol(name) if name else f"+{address - low + offset:#x}",
            path == self.interpreter_path,
        )
        if name is not None:  # a large library's symbols may still be loading: ask again
            self._places[address] = place
        return place

    def _is_return(self, address: int) -> bool:
        """Whether the instruction before `address` is a call."""
        known = self._after_call.get(address)
        if known is not None:
            return known
        try:
            code = self.memory.read(address - 8, 8) if self.memory is not None else b""
        except MemoryReadError:
            code = b""
        if len(code) != 8:
            self._after_call[address] = False
            return False
        if self.aarch64:
            insn = int.from_bytes(code[4:8], "little")
            found = (insn & 0xFC000000) == 0x94000000 or (insn & 0xFFFFFC1F) == 0xD63F0000
            found = found or (insn & 0xFEFFF800) == 0xD63F0800  # BLRAA/BLRAB and kin
        else:
            found = code[3] == 0xE8 or any(
                code[8 - k] == 0xFF and (code[9 - k] >> 3) & 7 == 2 for k in range(2, 8)
            )
        self._after_call[address] = found
        return found
