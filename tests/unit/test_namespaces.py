"""The pieces that let the thread-state reader read a target in another namespace, and the
libc its condition variables depend on."""

from __future__ import annotations

import os
from pathlib import Path

from gilprof.sampling.threadstate.elf import read_symbols
from gilprof.sampling.threadstate.libc import COND_WREFS, COND_WREFS_241, cond_wrefs
from gilprof.sampling.threadstate.namespaces import (
    MappedFile,
    ThreadIds,
    nspids,
    parse_maps,
    readable_path,
    same_file,
)

MAPS = """\
55d0c0a00000-55d0c0a2c000 r--p 00000000 fd:01 1234   /usr/bin/python3.13
55d0c0a2c000-55d0c0c00000 r-xp 0002c000 fd:01 1234   /usr/bin/python3.13
7f00aa000000-7f00aa028000 r--p 00000000 00:2a 99     /usr/lib/x86_64-linux-gnu/libc.so.6
7f00ab000000-7f00ab001000 rw-p 00000000 00:00 0      [heap]
7f00ac000000-7f00ac001000 rw-p 00000000 00:00 0
"""


def test_maps_give_each_file_its_load_base_device_and_inode() -> None:
    files = parse_maps(MAPS)
    assert list(files) == ["/usr/bin/python3.13", "/usr/lib/x86_64-linux-gnu/libc.so.6"]
    exe = files["/usr/bin/python3.13"]
    assert (exe.base, exe.end, exe.device) == (0x55D0C0A00000, 0x55D0C0A2C000, (0xFD, 1))
    assert exe.inode == 1234
    assert files["/usr/lib/x86_64-linux-gnu/libc.so.6"].device == (0, 0x2A)


def test_a_file_is_found_by_what_it_is_not_by_its_name(tmp_path) -> None:
    real = tmp_path / "python3.13"
    real.write_bytes(b"x")
    info = os.stat(real)
    device = (os.major(info.st_dev), os.minor(info.st_dev))
    assert same_file(str(real), MappedFile(str(real), 0, 0, device, info.st_ino))
    assert not same_file(str(real), MappedFile(str(real), 0, 0, device, info.st_ino + 1))
    # this process's root is "/": its path through /proc/PID/root is the same file
    mapped = MappedFile(str(real), 0, 0, device, info.st_ino)
    assert readable_path(os.getpid(), mapped) == f"/proc/{os.getpid()}/root{real}"
    # a file that no candidate is (another inode): the target's root is still where to look
    other = MappedFile(str(real), 0, 0, device, info.st_ino + 1)
    assert readable_path(os.getpid(), other).startswith(f"/proc/{os.getpid()}/root/")


def test_nspid_lines_and_a_process_in_this_namespace(tmp_path) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tpython3\nNSpid:\t21642\t1\nNSsid:\t0\n")
    assert nspids(str(status)) == [21642, 1]
    assert nspids(str(tmp_path / "gone")) == []
    ids = ThreadIds(os.getpid())  # the test's own process: one PID namespace, no mapping
    assert not ids.nested
    assert ids.proc_id(os.getpid()) == os.getpid()


def test_glibc_is_told_by_its_symbol_versions() -> None:
    libc = "/lib/x86_64-linux-gnu/libc.so.6"
    versions = read_symbols(libc, ()).versions
    assert "GLIBC_2.2.5" in versions
    expected = COND_WREFS_241 if "GLIBC_2.41" in versions else COND_WREFS
    files = parse_maps(Path(f"/proc/{os.getpid()}/maps").read_text())
    assert cond_wrefs(os.getpid(), files) == expected
