"""Run a command with perf_event_open refused, as Docker's default seccomp profile does.

    python no_perf.py COMMAND [ARGS...]

Installs a seccomp filter (no_new_privs first, as an unprivileged process must) that makes
perf_event_open fail with EPERM and allows every other system call, then execs COMMAND. The
filter is inherited by COMMAND's children (py-spy needs no perf events).
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

_NR = {"x86_64": 298, "aarch64": 241}
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_LD_W_ABS, _JEQ_K, _RET_K = 0x20, 0x15, 0x06
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050000 | 1
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def install() -> None:
    machine = platform.machine()
    program = b"".join(
        [
            _insn(_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
            _insn(_JEQ_K, 0, 3, _AUDIT_ARCH[machine]),  # another ABI: allow
            _insn(_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
            _insn(_JEQ_K, 0, 1, _NR[machine]),
            _insn(_RET_K, 0, 0, _RET_EPERM),
            _insn(_RET_K, 0, 0, _RET_ALLOW),
        ]
    )
    filters = ctypes.create_string_buffer(program, len(program))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Program(len(program) // 8, ctypes.addressof(filters))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


if __name__ == "__main__":
    install()
    os.execvp(sys.argv[1], sys.argv[1:])
