"""Stale stack words: the call before a candidate return address (gilprof.sampling.native.
calls), decoded from bytes, and the locator passing over a word shown stale."""

from __future__ import annotations

import struct

from gilprof.native_classes import NativeClass, native_class_of
from gilprof.sampling.native.calls import CallBefore, call_before, is_plt_stub

from .test_native_classes import LIB, _Calls, _feed, _locator, _sample

PAD = b"\x90" * 7  # call_before is given the 7 bytes before a return address


def _before(code: bytes) -> tuple[CallBefore, int]:
    return call_before((PAD + code)[-7:])


def test_a_direct_call_gives_its_displacement():
    assert _before(b"\xe8" + struct.pack("<i", -0x1234)) == (CallBefore.DIRECT, -0x1234)


def test_indirect_calls_of_every_length_are_calls():
    for code in (
        b"\xff\xd0",  # call *%rax
        b"\x41\xff\xd0",  # call *%r8 (REX)
        b"\xff\x50\x08",  # call *0x8(%rax)
        b"\xff\x54\x24\x08",  # call *0x8(%rsp)
        b"\xff\x15" + struct.pack("<i", 0x2000),  # call *0x2000(%rip)
        b"\xff\x90" + struct.pack("<i", 0x100),  # call *0x100(%rax)
        b"\xff\x14\x25" + struct.pack("<i", 0x601000),  # call *0x601000
    ):
        assert _before(code)[0] is CallBefore.INDIRECT, code.hex()


def test_bytes_that_end_no_call_are_not_a_return_address():
    assert _before(b"\x48\x89\xc7\x31\xc0")[0] is CallBefore.NONE  # mov, xor
    assert _before(b"\xff\xe0")[0] is CallBefore.NONE  # jmp *%rax: FF /4, not a call


def test_plt_stubs_with_and_without_the_cet_prefixes():
    assert is_plt_stub(b"\xff\x25\x00\x10\x00\x00\x68\x00\x00\x00\x00")
    assert is_plt_stub(b"\xf3\x0f\x1e\xfa\xf2\xff\x25\x00\x10\x00\x00")
    assert is_plt_stub(b"\xf3\x0f\x1e\xfa\xff\x25\x00\x10\x00\x00\x90")
    assert not is_plt_stub(b"\xf3\x0f\x1e\xfa\x55\x48\x89\xe5\x90\x90\x90")  # a function


def _scripted(locator) -> _Calls:
    calls = locator.calls
    assert isinstance(calls, _Calls)
    return calls


def test_a_stale_word_is_passed_over_for_the_caller_through_the_plt():
    # a thread preempted in the C library's futex wait: the first word in code is a stale
    # libtorch return address (a direct call into libtorch itself, not the C library), the
    # next the real one (a call through the caller's PLT stub)
    locator = _locator()
    torch, cuda = LIB["/opt/lib/libtorch_cpu.so"], LIB["/opt/lib/libcuda.so.1"]
    stale, real, plt = torch + 0x80, cuda + 0x40, cuda + 0x900
    _scripted(locator).calls[stale] = (CallBefore.DIRECT, torch + 0x10)
    _scripted(locator).calls[real] = (CallBefore.DIRECT, plt)
    _scripted(locator).plt.add(plt)
    _feed(locator, 1, [_sample(5.0, "/usr/lib/libc.so.6", 0x400, callers=(stale, real))])
    frame = locator.place(1, int(5.0e6))
    assert native_class_of(frame) is NativeClass.DEVICE and "libcuda" in frame.name
    # unchecked (no call decoded for either word): the first word in code, as before
    plain = _locator()
    _feed(plain, 1, [_sample(5.0, "/usr/lib/libc.so.6", 0x400, callers=(stale, real))])
    assert native_class_of(plain.place(1, int(5.0e6))) is NativeClass.HOST


def test_a_word_with_no_call_before_it_is_skipped_and_a_call_into_the_same_file_kept():
    locator = _locator()
    libc, torch, cuda = (
        LIB[p] for p in ("/usr/lib/libc.so.6", "/opt/lib/libtorch_cpu.so", "/opt/lib/libcuda.so.1")
    )
    data, inner, caller = torch + 0x100, libc + 0x500, cuda + 0x40
    _scripted(locator).calls[data] = (CallBefore.NONE, 0)  # an address in code, after no call
    _scripted(locator).calls[inner] = (CallBefore.DIRECT, libc + 0x10)  # libc calling libc
    _scripted(locator).calls[caller] = (CallBefore.INDIRECT, 0)
    _feed(locator, 1, [_sample(5.0, "/usr/lib/libc.so.6", 0x400, callers=(data, inner, caller))])
    assert native_class_of(locator.place(1, int(5.0e6))) is NativeClass.DEVICE
