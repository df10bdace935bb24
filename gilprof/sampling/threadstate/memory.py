"""A target's memory, read through /proc/PID/mem, and the reader's refusals.

pread on /proc/PID/mem is the access py-spy's process_vm_readv has: the target is never
stopped. Kept apart from target.py so that the attach checks (verify.py) and the reader
share the errors without importing each other.
"""

from __future__ import annotations

import os
import struct


class StatesUnavailable(Exception):
    """The reader cannot (or must not) read this target; the message is one line."""


class NotReadyYet(StatesUnavailable):
    """The interpreter is not initialised yet: a just-started process. Try again."""


class MemoryReadError(OSError):
    """An address the target does not map (a stale pointer read mid-update)."""


class TargetMemory:
    """/proc/PID/mem, read with pread: the same access py-spy's process_vm_readv has."""

    def __init__(self, pid: int) -> None:
        try:
            self.fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
        except PermissionError:
            raise StatesUnavailable(f"PID {pid}: no permission to read its memory") from None
        except FileNotFoundError:
            raise StatesUnavailable(f"PID {pid}: no such process") from None

    def read(self, address: int, size: int) -> bytes:
        if address <= 0:
            raise MemoryReadError(f"null pointer read at {address:#x}")
        try:
            data = os.pread(self.fd, size, address)
        except (OSError, OverflowError) as exc:  # OverflowError: a garbage pointer >= 2**63
            raise MemoryReadError(f"cannot read {size} bytes at {address:#x}: {exc}") from None
        if len(data) != size:
            raise MemoryReadError(f"short read at {address:#x}")
        return data

    def pointer(self, address: int) -> int:
        return int(struct.unpack("<Q", self.read(address, 8))[0])

    def int32(self, address: int) -> int:
        return int(struct.unpack("<i", self.read(address, 4))[0])

    def close(self) -> None:
        os.close(self.fd)
