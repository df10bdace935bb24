"""The thread-state reader's per-architecture tables (arch.py): the system call numbers a
thread's /proc syscall line is read with, the GIL struct's pthread members, glibc's
struct pthread and base symbol version; chosen by the target file's ELF e_machine."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from gilprof.model import ThreadState
from gilprof.sampling.threadstate.arch import (
    AARCH64,
    AARCH64_NAMES,
    X86_64,
    X86_64_NAMES,
    arch_of,
)
from gilprof.sampling.threadstate.elf import read_symbols
from gilprof.sampling.threadstate.libc import COND_WREFS, COND_WREFS_241, cond_wrefs
from gilprof.sampling.threadstate.namespaces import MappedFile
from gilprof.sampling.threadstate.reader import Recording, StateReader
from gilprof.sampling.threadstate.syscalls import (
    GIL_SWITCH_WAIT,
    GIL_WAIT,
    RUNNING,
    classify,
)
from gilprof.sampling.threadstate.target import StatesUnavailable, target_arch

GIL = 0x7F0000001000


def line(nr: int, *args: int) -> bytes:
    words = [str(nr), *(hex(a) for a in args)]
    words += ["0x0"] * (6 - len(args)) + ["0xfffffd0000", "0xffff00dead"]
    return (" ".join(words) + "\n").encode()


@pytest.mark.parametrize(
    ("text", "kind", "syscall"),
    [
        (b"running\n", RUNNING, ""),
        (line(98, GIL + 72, 0x89, 0), GIL_WAIT, "cond"),  # the GIL's cond: +32..+80
        (line(98, GIL + 80, 0x81), GIL_WAIT, "mutex"),  # its mutex, 48 bytes here
        (line(98, GIL + 124, 0x81), GIL_WAIT, "mutex"),  # x86_64's switch_cond, not here
        (line(98, GIL + 128 + 40, 0x89), GIL_SWITCH_WAIT, "cond"),  # switch_cond +128
        (line(98, GIL + 176, 0x81), GIL_SWITCH_WAIT, "mutex"),  # switch_mutex +176
        (line(98, GIL + 216, 0x81), GIL_SWITCH_WAIT, "mutex"),  # still inside: size 224
        (line(98, GIL + 224, 0x189), "syscall", "futex"),  # past the GIL: a lock
        (line(98, 0x5555_0000, 0x189), "syscall", "futex"),  # an Event's own semaphore
        (line(202, GIL + 72, 0x89), "syscall", "accept"),  # x86_64's futex number
        (line(115, 1, 0), "syscall", "clock_nanosleep"),  # time.sleep
        (line(101, 1), "syscall", "nanosleep"),
        (line(22, 5), "syscall", "epoll_pwait"),  # there is no epoll_wait on aarch64
        (line(73, 5), "syscall", "ppoll"),  # nor poll
        (line(72, 5), "syscall", "pselect6"),  # nor select
        (line(63, 3), "syscall", "read"),
        (line(207, 3), "syscall", "recvfrom"),
        (line(260, 3), "syscall", "wait4"),
        (line(999, 1), "syscall", "syscall 999"),
    ],
)
def test_an_aarch64_syscall_line_classifies_by_its_own_table(
    text: bytes, kind: str, syscall: str
) -> None:
    activity = classify(text, GIL, AARCH64)
    assert (activity.kind, activity.syscall) == (kind, syscall)


@pytest.mark.parametrize(
    ("nr", "x86_64", "aarch64"),
    [
        (98, "syscall 98", "futex"),  # getitimer on x86_64: not in its table
        (202, "futex", "accept"),
        (230, "clock_nanosleep", "syscall 230"),
        (0, "read", "syscall 0"),
    ],
)
def test_one_number_is_named_by_the_targets_architecture(nr: int, x86_64: str, aarch64: str):
    # the cache of named calls is per architecture: whichever is read first, each keeps its own
    for first, second in ((X86_64, AARCH64), (AARCH64, X86_64)):
        names = {a.name: classify(line(nr, 0x1), 0, a).syscall for a in (first, second)}
        assert names == {"x86_64": x86_64, "aarch64": aarch64}


def test_the_gil_struct_follows_each_architectures_pthread_sizes() -> None:
    # cond at +32 (48 bytes on both), then the mutex: 40 bytes on x86_64, 48 on aarch64
    for arch, mutex in ((X86_64, 40), (AARCH64, 48)):
        assert arch.gil_mutex == 32 + 48
        assert arch.gil_switch == arch.gil_mutex + mutex
        assert arch.gil_switch_mutex == arch.gil_switch + 48
        assert arch.gil_size == arch.gil_switch_mutex + mutex


def test_every_aarch64_call_has_the_name_x86_64_gives_it() -> None:
    # what the analysis decides by a system call's name (an I/O wait, a sleep) reads the same
    # on both: aarch64's calls are a subset of x86_64's names, at other numbers
    assert set(AARCH64_NAMES.values()) <= set(X86_64_NAMES.values())
    assert AARCH64_NAMES[AARCH64.futex] == X86_64_NAMES[X86_64.futex] == "futex"
    shared = {98, 115, 22, 73, 63, 64}
    assert {AARCH64_NAMES[n] for n in shared} == {
        "futex", "clock_nanosleep", "epoll_pwait", "ppoll", "read", "write",
    }  # fmt: skip


def test_the_architecture_is_the_target_files_elf_machine() -> None:
    assert arch_of(62) is X86_64 and arch_of(183) is AARCH64
    assert target_arch("/usr/bin/python3", 183) is AARCH64
    assert target_arch("/usr/bin/python3", 62) is X86_64
    for machine in (40, 3, 243):  # 32-bit ARM, i386, RISC-V: no tables
        assert arch_of(machine) is None
        with pytest.raises(StatesUnavailable, match=f"ELF machine {machine}.*x86_64 and aarch64"):
            target_arch("/usr/bin/python3", machine)


# -- a synthetic ELF: header, one PT_LOAD, .dynstr, .dynsym and .gnu.version_d ------------


def elf(machine: int, symbols: dict[str, int], versions: list[str]) -> bytes:
    """A minimal ELF64 little-endian shared object for `machine`, exporting `symbols` and
    defining the symbol `versions`."""
    strings = b"\0"
    offsets = {}
    for name in [*symbols, *versions]:
        offsets[name] = len(strings)
        strings += name.encode() + b"\0"
    dynsym = b"\0" * 24 + b"".join(
        struct.pack("<IBBHQQ", offsets[n], 0x11, 0, 5, v, 8) for n, v in symbols.items()
    )
    verdef = b""
    for i, name in enumerate(versions):
        following = 28 if i < len(versions) - 1 else 0
        verdef += struct.pack("<HHHHIII", 1, 0, i + 1, 1, 0, 20, following)
        verdef += struct.pack("<II", offsets[name], 0)
    header_end = 64 + 56
    dynstr_at = header_end
    dynsym_at = dynstr_at + len(strings)
    verdef_at = dynsym_at + len(dynsym)
    sections_at = verdef_at + len(verdef)
    header = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    header += struct.pack(
        "<HHIQQQIHHHHHH", 3, machine, 1, 0, 64, sections_at, 0, 64, 56, 1, 64, 4, 0
    )
    load = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, sections_at, sections_at, 0x1000)

    def section(kind: int, at: int, size: int, link: int = 0, info: int = 0, ent: int = 0):
        return struct.pack("<IIQQQQIIQQ", 0, kind, 0, 0, at, size, link, info, 8, ent)

    sections = b"\0" * 64
    sections += section(3, dynstr_at, len(strings))
    sections += section(11, dynsym_at, len(dynsym), link=1, ent=24)
    sections += section(0x6FFFFFFD, verdef_at, len(verdef), link=1, info=len(versions))
    return header + load + strings + dynsym + verdef + sections


def test_the_elf_reader_reports_an_aarch64_files_machine(tmp_path) -> None:
    path = tmp_path / "python3.11"
    path.write_bytes(elf(183, {"_PyRuntime": 0x5000, "PyCode_Type": 0x6000}, []))
    symbols = read_symbols(str(path), ("_PyRuntime", "PyCode_Type"))
    assert symbols.machine == 183
    assert symbols.symbols == {"_PyRuntime": 0x5000, "PyCode_Type": 0x6000}
    assert target_arch(str(path), symbols.machine) is AARCH64


def _mapped(path: Path) -> MappedFile:
    info = os.stat(path)
    return MappedFile(str(path), 0, 0, (os.major(info.st_dev), os.minor(info.st_dev)), info.st_ino)


@pytest.mark.parametrize(
    ("machine", "versions", "expected"),
    [
        (183, ["GLIBC_2.17", "GLIBC_2.36"], COND_WREFS),  # Debian 12 arm64
        (183, ["GLIBC_2.17", "GLIBC_2.41"], COND_WREFS_241),
        (62, ["GLIBC_2.2.5", "GLIBC_2.41"], COND_WREFS_241),
        # an aarch64 glibc has no GLIBC_2.2.5, an x86_64 one no GLIBC_2.17 as its base: a
        # version set that is not its own architecture's is not read as glibc 2.41
        (62, ["GLIBC_2.17", "GLIBC_2.41"], COND_WREFS),
        (183, ["GLIBC_2.2.5", "GLIBC_2.41"], COND_WREFS),
    ],
)
def test_glibc_is_told_by_its_architectures_base_version(tmp_path, machine, versions, expected):
    libc = tmp_path / "libc.so.6"
    libc.write_bytes(elf(machine, {"gnu_get_libc_version": 0x100}, versions))
    assert read_symbols(str(libc), ()).versions == frozenset(versions)
    assert cond_wrefs(os.getpid(), {str(libc): _mapped(libc)}) == expected


# -- the reader ticks with its target's table -----------------------------------------------


class _Located:
    arch = AARCH64
    path = "/usr/bin/python3.11"


class _Interpreter:
    """Three Python threads of an aarch64 target: 1 holds the GIL, 2 waits for it in futex
    (98) on the GIL's condition variable, 3 sleeps in clock_nanosleep (115)."""

    pid = 0
    gil = GIL
    located = _Located()
    memory = None  # no stack to scan behind a blocked call

    def __init__(self) -> None:
        from gilprof.sampling.threadstate.target import PythonThread

        self.list = {t: PythonThread(t, t, 0x100 * t, t) for t in (1, 2, 3)}

    def threads(self):
        return self.list

    def gil_state(self):
        return 1, 1, 1

    def stack(self, tstate: int):
        from gilprof.model import Frame

        return (Frame(f"f{tstate // 0x100}", "app.py", 1),)


class _Files:
    def __init__(self, lines: dict[int, bytes]) -> None:
        self.lines = lines

    def read(self, tid: int) -> bytes:
        return self.lines[tid]

    def keep_only(self, tids) -> None:
        pass


def _reader() -> StateReader:
    reader = StateReader(_Interpreter(), 100)  # type: ignore[arg-type]
    reader.files.close()
    reader.files = _Files(  # type: ignore[assignment]
        {1: b"running\n", 2: line(98, GIL + 40, 0x89, 0), 3: line(115, 1, 0)}
    )
    return reader


def test_the_reader_reads_an_aarch64_targets_threads_with_aarch64_numbers() -> None:
    reader = _reader()
    assert reader.arch is AARCH64  # from the target's located file, not from this machine
    out = Recording()
    readings = reader.tick(0.0, out)
    assert readings[1][0] is ThreadState.HELD
    assert readings[2][0] is ThreadState.WAITING
    assert readings[3][0] is ThreadState.IDLE
    assert readings[3][1][-1].name == "clock_nanosleep"
    assert out.gil_waits_seen == 1
    # the same lines read with x86_64's table: 98 and 115 are no known calls there, and
    # nothing waits for the GIL
    reader = _reader()
    reader.arch = X86_64
    readings = reader.tick(1.0, out)
    assert readings[2][0] is ThreadState.IDLE and readings[2][1][-1].name == "syscall 98"
    assert readings[3][1][-1].name == "syscall 115"


def test_aarch64_return_addresses_lose_their_pointer_authentication_bits() -> None:
    from gilprof.sampling.native.perf import CpuSample

    lr, saved = 0x0000_AAAA_0000_1234, 0x0000_FFFF_8000_4321
    signed = lambda address, pac: address | (pac << 48)  # noqa: E731
    registers = signed(lr, 0x2A).to_bytes(8, "little") + bytes(16)  # LR, SP, PC
    stack = signed(saved, 0x7F).to_bytes(8, "little") + saved.to_bytes(8, "little")
    sample = CpuSample(0, lr, registers, stack)
    assert sample.callers() == [lr, saved, saved]
    # x86_64 (SP, IP): the stack words as they are
    x86 = CpuSample(0, lr, bytes(16), stack)
    assert x86.callers() == [signed(saved, 0x7F), saved]
