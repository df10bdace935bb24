"""Native time's classes: the rules, the locator's decisions on hand-made samples, the
verdict on native readings, and the recipe's [native] section."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys

import pytest

from gilprof.analysis.verdict import DEVICE, HOST, PEERS, UNDETERMINED, verdict
from gilprof.errors import InputError
from gilprof.model import Mode, ThreadState
from gilprof.native_classes import (
    NOT_PLACED,
    LibraryRule,
    NativeClass,
    NativeRules,
    is_clock_read,
    is_pass_through,
    native_class_of,
    native_frame,
)
from gilprof.profile import Profile
from gilprof.recipes.loader import parse_recipe
from gilprof.sampling.native.calls import CallBefore
from gilprof.sampling.native.locator import NEAREST_NS, NativeLocator
from gilprof.sampling.native.perf import CpuSample
from gilprof.sampling.native.symbols import read_function_symbols

from .builders import make_profile, sample

# -- rules ---------------------------------------------------------------------------------


def test_libraries_are_classed_by_their_file_name():
    rules = NativeRules()
    assert rules.library_class("libcuda.so.1") is NativeClass.DEVICE
    assert rules.library_class("libamdhip64.so.6") is NativeClass.DEVICE
    assert rules.library_class("libmpi.so.12") is NativeClass.PEERS
    assert rules.library_class("libucp.so.0") is NativeClass.PEERS
    assert rules.library_class("libnccl.so.2") is NativeClass.PEERS
    assert rules.library_class("libz.so.1.2.13") is NativeClass.HOST
    assert rules.library_class("libtorch_cuda.so") is NativeClass.HOST  # the launch path


def test_a_recipe_rule_comes_before_the_built_in_ones():
    rules = NativeRules.with_recipe([LibraryRule("libcudart.so*", NativeClass.HOST, "recipe r")])
    assert rules.library_class("libcudart.so.13") is NativeClass.HOST
    assert rules.library_class("libcuda.so.1") is NativeClass.DEVICE
    assert "host (recipe r): libcudart.so*" in rules.describe()


def test_a_native_frame_carries_its_class_and_place():
    frame = native_frame(NativeClass.PEERS, "libmpi.so.12 MPIDI_progress")
    assert frame.name == "[native] libmpi.so.12 MPIDI_progress"
    assert native_class_of(frame) is NativeClass.PEERS
    assert not frame.is_python
    assert native_class_of(frame.__class__("step", "app.py", 3)) is None


def test_clock_reads_and_the_c_library_pass_through_to_their_caller():
    assert is_clock_read("[vdso]", None)
    assert is_clock_read("/usr/lib/x86_64-linux-gnu/libc.so.6", "clock_gettime")
    assert not is_clock_read("/usr/lib/x86_64-linux-gnu/libc.so.6", "memcpy")
    assert is_pass_through("libc.so.6") and is_pass_through("ld-linux-x86-64.so.2")
    assert not is_pass_through("libcuda.so.1")


# -- symbols -------------------------------------------------------------------------------


def _libc() -> str:
    with open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libc.so"):
                return path
    pytest.fail("no libc mapped")


def test_a_function_is_named_only_inside_its_own_extent():
    table = read_function_symbols(_libc())
    start, end, _name = next(e for e in table._extents if e[2] == "clock_gettime")
    segment = next(s for s in table.segments if s.vaddr <= start < s.vaddr + s.size)
    offset = start - segment.vaddr + segment.offset
    assert table.name(offset) == "clock_gettime"
    assert table.name(offset + (end - start) - 1) == "clock_gettime"
    gaps = [
        (a_end, b_start)
        for (_a, a_end, _n), (b_start, _b, _m) in zip(
            table._extents, table._extents[1:], strict=False
        )
        if b_start - a_end > 16
    ]
    gap_start = gaps[0][0] + 8
    segment = next(s for s in table.segments if s.vaddr <= gap_start < s.vaddr + s.size)
    assert table.name(gap_start - segment.vaddr + segment.offset) is None


# -- the locator's decisions, on hand-made samples --------------------------------------------

LIB = {  # path -> (start address, function extents relative to it)
    "/opt/lib/libcuda.so.1": 0x10000,
    "/opt/lib/libtorch_cpu.so": 0x20000,
    "/usr/lib/libc.so.6": 0x30000,
    "/usr/bin/python3.11": 0x40000,
    "[vdso]": 0x50000,
}


class _Maps:
    def __init__(self) -> None:
        self.files: dict = {}  # no file's identity: symbols are opened through the root

    def find(self, ip: int):
        for path, start in LIB.items():
            if start <= ip < start + 0x1000:
                return (start, start + 0x1000, 0, path)
        return None

    def refresh(self, now_ns: int) -> None:
        pass


class _Symbols:
    def name(self, path: str, file_offset: int, mapped=None) -> str | None:
        if path.endswith("libc.so.6"):
            return "clock_gettime" if file_offset < 0x100 else "sched_yield"
        return None


class _Calls:
    """The call before each scripted return address (unscripted: not checked), and the
    addresses that are PLT stubs."""

    def __init__(self) -> None:
        self.calls: dict[int, tuple[CallBefore, int]] = {}
        self.plt: set[int] = set()

    def before(self, address: int) -> tuple[CallBefore, int]:
        return self.calls.get(address, (CallBefore.UNKNOWN, 0))

    def is_plt(self, address: int) -> bool:
        return address in self.plt


def _locator() -> NativeLocator:
    locator = NativeLocator.__new__(NativeLocator)
    locator.calls = _Calls()  # type: ignore[assignment]
    locator.interpreter_path = "/usr/bin/python3.11"
    locator.rules = NativeRules()
    locator.maps = _Maps()  # type: ignore[assignment]
    locator.symbols = _Symbols()  # type: ignore[assignment]
    locator._times, locator._samples = {}, {}
    locator._classes, locator._pass_through = {}, {}
    locator._switch_times, locator._switch_kinds = {}, {}
    locator._drained, locator._place_cache = {}, {}
    locator.placed = locator.unplaced = locator.samples = 0
    return locator


def _sample(
    t_ms: float, where: str, offset: int = 0x200, callers: tuple[int, ...] = ()
) -> CpuSample:
    stack = b"".join(struct.pack("<Q", c) for c in callers)
    return CpuSample(int(t_ms * 1e6), LIB[where] + offset, b"", stack)


def _feed(locator: NativeLocator, tid: int, samples: list[CpuSample]) -> None:
    locator._samples[tid] = samples
    locator._times[tid] = [s.time_ns for s in samples]


def _class(locator: NativeLocator, at_ms: float, tid: int = 1) -> NativeClass | None:
    return native_class_of(locator.place(tid, int(at_ms * 1e6)))


def test_a_spin_in_the_driver_is_a_wait_and_a_driver_sample_amid_host_code_a_launch():
    locator = _locator()
    cuda, vdso = "/opt/lib/libcuda.so.1", "[vdso]"
    spin = [_sample(t, cuda if t % 3 else vdso, callers=(LIB[cuda] + 8,)) for t in range(0, 20)]
    _feed(locator, 1, spin)
    assert _class(locator, 10.2) is NativeClass.DEVICE
    launches = [_sample(t, cuda if t % 2 else "/opt/lib/libtorch_cpu.so") for t in range(0, 20)]
    _feed(locator, 2, launches)
    assert _class(locator, 9.1, tid=2) is NativeClass.LAUNCH


def test_a_clock_read_or_a_c_library_call_takes_its_callers_class():
    locator = _locator()
    stale = LIB["/usr/lib/libc.so.6"] + 0x300  # a libc return address: passed over too
    caller = LIB["/opt/lib/libcuda.so.1"] + 0x40
    _feed(locator, 1, [_sample(5.0, "[vdso]", callers=(0x7, stale, caller))])
    frame = locator.place(1, int(5.0e6))
    assert native_class_of(frame) is NativeClass.DEVICE and "libcuda.so.1" in frame.name
    _feed(locator, 2, [_sample(5.0, "/usr/lib/libc.so.6", 0x400, callers=(caller,))])
    assert _class(locator, 5.0, tid=2) is NativeClass.DEVICE


def test_the_interpreters_own_code_is_the_gil_hand_off():
    locator = _locator()
    _feed(locator, 1, [_sample(5.0, "/usr/bin/python3.11")])
    assert _class(locator, 5.3) is NativeClass.GIL


def test_off_its_cpu_a_thread_is_placed_where_it_was_preempted_if_that_holds():
    locator = _locator()
    torch = "/opt/lib/libtorch_cpu.so"
    _feed(locator, 1, [_sample(0.0, torch), _sample(12.0, torch)])  # preempted in between
    assert _class(locator, 6.0) is NativeClass.HOST
    _feed(locator, 2, [_sample(0.0, torch), _sample(12.0, "/opt/lib/libcuda.so.1")])
    assert _class(locator, 6.0, tid=2) is NativeClass.UNPLACED  # the two sides disagree
    _feed(locator, 3, [_sample(0.0, torch)])  # not run since its last sample
    assert _class(locator, NEAREST_NS / 1e6 + 0.5, tid=3) is NativeClass.HOST
    assert _class(locator, 40.0, tid=3) is NativeClass.UNPLACED  # too long ago
    assert _class(locator, 1.0, tid=4) is NativeClass.UNPLACED  # a thread with no samples


# -- the verdict on native readings ------------------------------------------------------------

LOOP = 11


def _native_profile(cls: NativeClass, native: int, held: int = 10, messages=()) -> Profile:
    leaf = native_frame(cls, "libx.so.1")
    windows = []
    for _ in range(6):
        wait = sample("loop", "loop", "step", count=native, tid=LOOP, state=ThreadState.NATIVE)
        wait = wait.__class__(wait.tid, wait.thread_name, (*wait.frames, leaf), native, wait.state)
        windows.append((100, [sample("loop", "loop", "step", count=held, tid=LOOP), wait]))
    # contention mode: every thread's state at every tick as samples (states mode keeps the
    # same readings as spans); the class comes from the locator's leaf frame either way
    profile = make_profile(windows, mode=Mode.CONTENTION)
    if messages:
        from dataclasses import replace

        profile.sampling = replace(profile.sampling, messages=tuple(messages))
    return profile


@pytest.mark.parametrize(
    ("cls", "bound"),
    [
        (NativeClass.DEVICE, DEVICE),
        (NativeClass.PEERS, PEERS),
        (NativeClass.HOST, HOST),
        (NativeClass.LAUNCH, HOST),
        (NativeClass.UNPLACED, UNDETERMINED),
    ],
)
def test_the_verdict_follows_the_class_of_the_loops_native_time(cls, bound):
    v = verdict(_native_profile(cls, 90), 30.0, None, loop_thread="loop")
    assert v.bound == bound, v.reason
    assert dict(v.loop.native_by_class)[cls.value] == pytest.approx(0.9)


def test_unplaced_native_time_names_the_refusal_and_what_would_decide():
    note = f"{NOT_PLACED}: perf_event_open refused for thread 7: Operation not permitted"
    v = verdict(_native_profile(NativeClass.UNPLACED, 90, messages=[note]), 30.0, None)
    assert v.bound == UNDETERMINED and "Operation not permitted" in v.reason
    assert v.command is not None and "perf_event_paranoid" in v.command


def test_a_little_unplaced_time_does_not_stop_a_host_verdict():
    profile = _native_profile(NativeClass.UNPLACED, 2, held=98)
    v = verdict(profile, 30.0, None, loop_thread="loop")
    assert v.bound == HOST, v.reason


# -- the recipe's [native] section ---------------------------------------------------------------


def test_a_recipe_declares_libraries_per_class():
    recipe = parse_recipe(
        'name = "r"\ndescription = "d"\n[native]\ndevice = ["libmydrv.so*"]\n'
        'peers = ["libmycomm.so*"]\n',
        "r.toml",
    )
    assert [(r.pattern, r.cls) for r in recipe.native] == [
        ("libmydrv.so*", NativeClass.DEVICE),
        ("libmycomm.so*", NativeClass.PEERS),
    ]
    assert recipe.to_dict()["native"][0] == {"library": "libmydrv.so*", "class": "device-wait"}


@pytest.mark.parametrize(
    "section",
    [
        '[native]\ngpu = ["x.so"]\n',
        '[native]\ndevice = "x.so"\n',
        '[native]\ndevice = ["a/b.so"]\n',
    ],
)
def test_a_bad_native_section_is_one_clear_error(section):
    with pytest.raises(InputError) as raised:
        parse_recipe('name = "r"\ndescription = "d"\n' + section, "r.toml")
    assert "native" in str(raised.value) and "\n" not in str(raised.value)


def test_this_interpreter_is_readable_for_symbols():
    # the locator names functions in the interpreter itself: its own table must parse
    table = read_function_symbols(os.path.realpath(sys.executable))
    assert table.segments


def test_a_thread_just_woken_from_a_system_call_is_woken_not_where_it_slept():
    locator = _locator()
    python = "/usr/bin/python3.11"
    # it went to sleep from the interpreter at 0 ms, was read blocked at 1 ms, and runs
    # again from 12 ms: at 10 ms it is runnable, not in the GIL's code
    _feed(locator, 1, [_sample(0.0, python), _sample(12.0, python)])
    frame = locator.place(1, int(10e6), blocked_ns=int(1e6))
    assert native_class_of(frame) is NativeClass.WOKEN and NativeClass.WOKEN.is_host_work
    # sampled running since the wake-up: placed by that sample
    frame = locator.place(1, int(12.5e6), blocked_ns=int(1e6))
    assert native_class_of(frame) is NativeClass.GIL


def test_context_switches_tell_a_preempted_thread_from_one_that_blocked():
    locator = _locator()
    python, torch = "/usr/bin/python3.11", "/opt/lib/libtorch_cpu.so"
    _feed(locator, 1, [_sample(0.0, torch), _sample(1.0, torch)])
    locator._switch_times[1], locator._switch_kinds[1] = [int(1.2e6)], ["preempted"]
    assert _class(locator, 8.0) is NativeClass.HOST  # runnable where it was preempted
    _feed(locator, 2, [_sample(0.0, python), _sample(1.0, python)])
    locator._switch_times[2], locator._switch_kinds[2] = (
        [int(1.2e6), int(50e6)],
        [
            "blocked",
            "in",
        ],
    )
    assert _class(locator, 40.0, tid=2) is NativeClass.WOKEN  # woken, waiting for a core
    assert _class(locator, 50.5, tid=2) is NativeClass.WOKEN  # running, not sampled yet


class _Python(_Symbols):
    def name(self, path: str, file_offset: int, mapped=None) -> str | None:
        if path == "/usr/bin/python3.11":  # from 0x800 a function outside the GIL's: Python
            return "_PyEval_EvalFrameDefault" if file_offset >= 0x800 else None
        return super().name(path, file_offset)


def test_preempted_between_two_samples_of_the_interpreter_is_the_gil_hand_off():
    # A spinner ran Python (holding the GIL) at 0 and 1 ms, dropped the GIL for the other
    # spinner and was preempted at 1.2 ms (the waiter it woke took its core), and runs
    # Python again from 12 ms: read not holding the GIL at 6 ms, it is in the hand-off
    locator = _locator()
    python, torch = "/usr/bin/python3.11", "/opt/lib/libtorch_cpu.so"
    named = 0x900
    locator.symbols = _Python()  # type: ignore[assignment]
    run = [_sample(0.0, python, named), _sample(1.0, python, named), _sample(12.0, python, named)]
    _feed(locator, 1, run)
    locator._switch_times[1], locator._switch_kinds[1] = (
        [int(1.2e6), int(12e6)],
        ["preempted", "in"],
    )
    frame = locator.place(1, int(6e6))
    assert native_class_of(frame) is NativeClass.GIL and "hand-off" in frame.name
    # preempted 0.2 ms after a sample, the reading 0.5 ms after it: the same
    assert _class(locator, 1.5) is NativeClass.GIL
    # the same when its next sample is in the C library's futex call made by take_gil
    take_gil = LIB[python] + 0x40  # a function the stripped interpreter does not name
    futex = _sample(12.0, "/usr/lib/libc.so.6", 0x400, callers=(take_gil,))
    _feed(locator, 5, [_sample(0.0, python, named), futex])
    locator._switch_times[5], locator._switch_kinds[5] = [int(1.2e6)], ["preempted"]
    assert _class(locator, 6.0, tid=5) is NativeClass.GIL
    # a thread that went from Python into a library and was preempted there is host work
    _feed(locator, 2, [_sample(0.0, python, named), _sample(12.0, torch)])
    locator._switch_times[2], locator._switch_kinds[2] = [int(1.2e6)], ["preempted"]
    assert _class(locator, 6.0, tid=2) is NativeClass.HOST
    # not run since: where it went is not known, so no hand-off is claimed
    _feed(locator, 3, [_sample(0.0, python, named), _sample(1.0, python, named)])
    locator._switch_times[3], locator._switch_kinds[3] = [int(1.2e6)], ["preempted"]
    assert _class(locator, 6.0, tid=3) is NativeClass.HOST
    # on its CPU (no preemption) next to a sample of Python: as before, placed there
    _feed(
        locator,
        4,
        [_sample(0.0, python, named), _sample(1.0, python, named), _sample(2.0, python, named)],
    )
    assert _class(locator, 1.3, tid=4) is NativeClass.HOST


def _built(tmp_path, name: str, body: str) -> str:
    """A shared library built here with cc (its GNU build id by default)."""
    source = tmp_path / f"{name}.c"
    source.write_text(body)
    out = tmp_path / f"{name}.so"
    subprocess.run(
        ["cc", "-O1", "-shared", "-fPIC", "-Wl,--build-id", "-o", str(out), str(source)],
        check=True,
    )
    return str(out)


def test_a_stripped_file_is_named_from_its_debug_file_found_by_build_id(tmp_path):
    """Debian strips its interpreters and ships their full tables in python3.X-dbg, under
    /usr/lib/debug/.build-id: a local function (take_gil) is named only from there."""
    if not all(shutil.which(tool) for tool in ("cc", "objcopy", "strip")):
        pytest.fail("cc and binutils (objcopy, strip) are needed")
    body = "__attribute__((noinline)) static int hidden_work(int n) { volatile int s = 0; while (n--) s += n; return s; }\n"
    body += "int api(int n) { return hidden_work(n) + 1; }\n"
    library = _built(tmp_path, "lib", body)
    full = read_function_symbols(library)
    assert full.full and full.has("hidden_work") and full.debug_file is None
    build_id = _build_id_of(library)
    debug = tmp_path / "root" / "usr/lib/debug/.build-id" / build_id[:2] / f"{build_id[2:]}.debug"
    debug.parent.mkdir(parents=True)
    subprocess.run(["objcopy", "--only-keep-debug", library, str(debug)], check=True)
    subprocess.run(["strip", "--strip-all", library], check=True)
    stripped = read_function_symbols(library)
    assert not stripped.full and stripped.has("api") and not stripped.has("hidden_work")
    named = read_function_symbols(library, ("/nonexistent", str(tmp_path / "root")))
    assert named.full and named.has("hidden_work") and named.debug_file == str(debug)
    # the same names at the same places as the unstripped file's
    start, _end, _name = next(e for e in full.extents if e[2].startswith("hidden_work"))
    segment = next(s for s in named.segments if s.vaddr <= start < s.vaddr + s.size)
    assert named.name(start - segment.vaddr + segment.offset).startswith("hidden_work")
    # a debug file of another build at that path (a package of another version) is not used
    other = _built(tmp_path, "other", body.replace("s += n", "s += 2 * n"))
    subprocess.run(["objcopy", "--only-keep-debug", other, str(debug)], check=True)
    assert not read_function_symbols(library, (str(tmp_path / "root"),)).full


def _build_id_of(path: str) -> str:
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, check=True)
    return next(line.split()[-1] for line in out.stdout.splitlines() if "Build ID" in line)
