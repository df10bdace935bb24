"""The target's C library, as far as the GIL's condition variables depend on it.

glibc's `pthread_cond_t` (48 bytes, its size fixed by the ABI) counts the threads inside
pthread_cond_wait in `__wrefs` (in steps of 8). glibc 2.25-2.40 keep `__wrefs` at +36;
2.41 removed the `__g_refs` pair at +16 (bug 25847's fix), which moved `__g_size`,
`__g1_orig_size` and `__wrefs` up 8 bytes: +28 there. Measured: Debian 12's 2.36 counts
at +36; Debian sid's 2.43, with two GIL waiters, read `0x12` at +28 (2 waiters) and
`0x15` at +36 (a futex sequence word).

Which glibc it is comes from the library's own symbol versions (a glibc defines its
architecture's base version, GLIBC_2.2.5 on x86_64 and GLIBC_2.17 on aarch64, chosen by the
library's ELF machine; 2.41+ defines GLIBC_2.41), not from its file name; the attach
check (target._check_gil_waiters) then compares the count against the threads the kernel
shows blocked, so a libc patched otherwise is refused rather than misread.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from gilprof.sampling.threadstate.arch import arch_of
from gilprof.sampling.threadstate.elf import ElfError, read_symbols
from gilprof.sampling.threadstate.namespaces import MappedFile, readable_path

COND_WREFS = 36  # glibc 2.25-2.40
COND_WREFS_241 = 28  # glibc 2.41+


def is_musl(files: Mapping[str, MappedFile]) -> bool:
    return any("ld-musl" in os.path.basename(path) for path in files)


def cond_wrefs(pid: int, files: Mapping[str, MappedFile]) -> int:
    """Where the target's glibc keeps a condition variable's waiter count."""
    # the libc's name orders the search only; its version definitions decide
    names = sorted(files, key=lambda p: not os.path.basename(p).startswith("libc."))
    for path in names:
        if not os.path.basename(path).startswith("libc"):
            continue
        try:
            symbols = read_symbols(readable_path(pid, files[path]), ())
        except ElfError:
            continue
        arch, versions = arch_of(symbols.machine), symbols.versions
        if arch is not None and arch.glibc_base_version in versions:
            return COND_WREFS_241 if "GLIBC_2.41" in versions else COND_WREFS
    return COND_WREFS  # a static glibc: the attach check decides whether it reads right
