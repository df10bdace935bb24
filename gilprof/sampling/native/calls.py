"""Which words on a copied user stack can be return addresses, from the call before them.

The locator finds a leaf's caller by scanning the stack words above the stack pointer
(perf.CpuSample.callers) for the first address in code. Stacks keep stale words: a frame's
unwritten slots hold return addresses of calls that returned long ago. Measured on two
threads hashing 1 MiB buffers beside a Python loop (benchmarks/accuracy/states_confusion.py
--workload preempted): a thread preempted in glibc's futex wait inside take_gil had a stale
libcrypto return address as its first word in code, so 14.8% of its readings, waits by the
kernel's truth, were placed in the hash (`native:host`); the other hash thread, with other
stale words, 0.2%.

A real return address follows a call instruction, and a direct call names its target. So,
on x86_64, a word is refused as the return address of a call into a file (the library the
callee runs in) only where it is shown stale:
- no call ends just before it (neither `call rel32`, E8, nor an indirect `call`, FF /2);
- or a direct call ends there whose target is in another file and is not a PLT stub
  (through which a call to another library goes).
A direct call into the same file is kept whichever function it names (a tail call, a jump,
may stand between), and an indirect call cannot be checked, so it is kept. Elsewhere
(aarch64) nothing is checked: every word in code is kept, as before.
"""

from __future__ import annotations

from enum import Enum

from gilprof.sampling.threadstate.memory import MemoryReadError, TargetMemory

_BEFORE = 7  # the longest call encoding checked: FF 14 25 disp32 / FF 94 xx disp32


class CallBefore(Enum):
    DIRECT = "direct"  # `call rel32`: its target is known
    INDIRECT = "indirect"  # `call r/m64`: its target is not
    NONE = "none"  # no call ends there: not a return address
    UNKNOWN = "unknown"  # not checked (another architecture, or the code could not be read)


def call_before(code: bytes) -> tuple[CallBefore, int]:
    """What ends at the end of `code` (the _BEFORE bytes before a candidate return address):
    (kind, the direct call's rel32 displacement, else 0)."""
    n = len(code)
    if n >= 5 and code[-5] == 0xE8:
        return CallBefore.DIRECT, int.from_bytes(code[-4:], "little", signed=True)
    for length in (2, 3, 4, 6, 7):
        if n < length or code[-length] != 0xFF:
            continue
        modrm = code[-length + 1]
        mod, reg, rm = modrm >> 6, (modrm >> 3) & 7, modrm & 7
        if reg != 2:
            continue  # FF /2 is call; the other FF forms are not
        size = 2 + (1 if mod != 3 and rm == 4 else 0)  # opcode, ModRM, SIB
        size += {0: 4 if rm == 5 else 0, 1: 1, 2: 4, 3: 0}[mod]
        if mod == 0 and rm == 4 and length >= 3 and (code[-length + 2] & 7) == 5:
            size += 4  # SIB with no base: disp32
        if size == length:
            return CallBefore.INDIRECT, 0
    return CallBefore.NONE, 0


def is_plt_stub(code: bytes) -> bool:
    """Whether code starting here is a PLT entry: `jmp *disp(%rip)`, possibly after
    endbr64 and a bnd prefix (.plt.sec)."""
    if code.startswith(b"\xf3\x0f\x1e\xfa"):
        code = code[4:]
    if code.startswith(b"\xf2"):
        code = code[1:]
    return code.startswith(b"\xff\x25")


class CallSites:
    """The call before each candidate return address of one target, read once from its
    memory (the reader's, which owns it; code does not change) and cached. `checked`: the
    target is x86_64, whose call encodings call_before decodes."""

    def __init__(self, memory: TargetMemory | None, checked: bool) -> None:
        self._memory = memory if checked else None
        self._before: dict[int, tuple[CallBefore, int]] = {}
        self._plt: dict[int, bool] = {}

    def _read(self, address: int, size: int) -> bytes | None:
        if self._memory is None:
            return None
        try:
            return self._memory.read(address, size)
        except MemoryReadError:
            return None

    def before(self, address: int) -> tuple[CallBefore, int]:
        """(kind, the direct call's target or 0) of the call that would return to `address`."""
        found = self._before.get(address)
        if found is None:
            code = self._read(address - _BEFORE, _BEFORE)
            if code is None:
                found = (CallBefore.UNKNOWN, 0)
            else:
                kind, displacement = call_before(code)
                found = (kind, address + displacement if kind is CallBefore.DIRECT else 0)
            self._before[address] = found
        return found

    def is_plt(self, address: int) -> bool:
        found = self._plt.get(address)
        if found is None:
            code = self._read(address, 11)
            found = self._plt[address] = code is not None and is_plt_stub(code)
        return found
