"""austin 3.x output parsing, on output captured from a real run (tests/unit/data/austin)."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gilprof.errors import SamplerError, UsageError
from gilprof.model import Frame, Mode, Sample, ThreadState
from gilprof.sampling.backends.austin import (
    GIL_MODE_ERROR,
    AustinBackend,
    last_message,
    parse_frame,
    parse_line,
    parse_output,
    read_thread_names,
)
from gilprof.sampling.backends.base import SamplerSettings, WindowResult

DATA = Path(__file__).resolve().parent / "data" / "austin"
# The captured process: MainThread, `spinner` (always in hot) and `sleeper` (always in nap).
MAIN, SPINNER, SLEEPER = 9938, 9980, 9981


def by_thread(samples):
    totals: dict[int, int] = {}
    for s in samples:
        totals[s.tid] = totals.get(s.tid, 0) + s.count
    return totals


def test_captured_wall_output():
    out = parse_output((DATA / "wall.austin").read_text(), ThreadState.UNKNOWN)
    assert out.metadata == {
        "austin": "3.7.0",
        "interval": "20000",
        "mode": "wall",
        "duration": "1000125",
    }
    assert (out.lines, out.ticks, out.invalid, out.skipped) == (147, 49, 0, 0)
    # every thread at every tick
    assert by_thread(out.samples) == {MAIN: 49, SPINNER: 49, SLEEPER: 49}
    assert all(s.state is ThreadState.UNKNOWN for s in out.samples)
    spinner = [s for s in out.samples if s.tid == SPINNER]
    # root first, leaf last; qualnames as CPython 3.11 reports them
    assert [f.name for f in spinner[0].frames] == [
        "Thread._bootstrap",
        "Thread._bootstrap_inner",
        "Thread.run",
        "work",
        "hot",
    ]
    leaf = spinner[0].frames[-1]
    assert leaf.file.endswith("/capture_target.py") and os.path.isabs(leaf.file)
    assert sorted(s.frames[-1].line for s in spinner) == [17, 18]
    assert sum(s.count for s in spinner if s.frames[-1].line == 18) == 39
    main = [s for s in out.samples if s.tid == MAIN]
    assert len(main) == 1 and main[0].frames == (Frame("<module>", leaf.file, 37),)


def test_captured_full_output_drops_idle_samples_but_counts_their_ticks():
    text = (DATA / "full.austin").read_text()
    everything = parse_output(text, ThreadState.ACTIVE)
    # the sleeper is missing at one instant; the instant is still counted
    assert by_thread(everything.samples) == {MAIN: 49, SPINNER: 49, SLEEPER: 48}
    active = parse_output(text, ThreadState.ACTIVE, drop_idle=True)
    assert active.ticks == everything.ticks == 49
    assert by_thread(active.samples) == {SPINNER: 49}
    assert all(s.state is ThreadState.ACTIVE for s in active.samples)
    assert active.metadata["mode"] == "full"


def test_thread_names_are_attached():
    out = parse_output(
        (DATA / "wall.austin").read_text(),
        ThreadState.UNKNOWN,
        names={MAIN: "MainThread", SPINNER: "spinner"},
    )
    names = {s.tid: s.thread_name for s in out.samples}
    assert names == {MAIN: "MainThread", SPINNER: "spinner", SLEEPER: ""}


def test_frame_formats():
    assert parse_frame("/srv/app/comm.py:safe_broadcast:41") == Frame(
        "safe_broadcast", "/srv/app/comm.py", 41
    )
    # colons and spaces in the file name stay in the file name
    assert parse_frame("/srv/a:b c/x.py:Cls.meth:7") == Frame("Cls.meth", "/srv/a:b c/x.py", 7)
    assert (
        parse_frame("<frozen importlib._bootstrap>:_call_with_frames_removed:241").file
        == "<frozen importlib._bootstrap>"
    )
    assert parse_frame("x.py:f:") == Frame("f", "x.py", 0)
    assert parse_frame("justaname") == Frame("justaname", "", 0)


def test_line_variants():
    line = parse_line("P12;T0:345;/a.py:<module>:1;/a.py:f:2 10083,1,-4096")
    assert line is not None
    assert (line.pid, line.tid, line.idle, line.invalid) == (12, 345, True, False)
    assert [f.name for f in line.frames] == ["<module>", "f"]
    assert parse_line("P12;T0:345;/a.py:f:2 10083,0,0").idle is False
    assert parse_line("P12;T0:345;/a.py:f:2 10083").idle is None
    # austin 2 style thread ids in hex, without the interpreter id
    hexed = parse_line("P12;T0x7f00aa;/a.py:f:2 100")
    assert hexed is not None and hexed.tid == 0x7F00AA
    # garbage-collector marker (-g) is not a frame; :INVALID: marks a broken stack
    gc = parse_line("P12;T0:1;/a.py:f:2;:GC: 100")
    assert gc is not None and [f.name for f in gc.frames] == ["f"]
    broken = parse_line("P12;T0:1;:INVALID:;/a.py:f:2 100")
    assert broken is not None and broken.invalid
    empty = parse_line("P12;T0:1 100")
    assert empty is not None and empty.frames == ()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not a sample",
        "P12;T0:1;/a.py:f:2",
        "P12;T0:1;/a.py:f:2 ten",
        "Pxx;T0:1;/a.py:f:2 100",
        "P12;X0:1;/a.py:f:2 100",
        "P12 100",
        "P12;T0:1;/a.py:f:2 1,2",
        "# austin: 3.7.0",
    ],
)
def test_non_samples_are_rejected(text):
    assert parse_line(text) is None


def test_edge_cases_of_whole_files():
    assert parse_output("", ThreadState.UNKNOWN).ticks == 0
    only_metadata = parse_output(
        "# austin: 3.7.0\n# interval: 10000\n# mode: wall\n\n", ThreadState.UNKNOWN
    )
    assert only_metadata.samples == [] and only_metadata.ticks == 0
    assert only_metadata.metadata["interval"] == "10000"
    text = "\n".join(
        [
            "# mode: wall",
            "P1;T0:1;/a.py:main:1 100",
            "P1;T0:2;/a.py:worker:5;/a.py:spin:9 100",
            "P1;T0:1;/a.py:main:1 100",
            "P1;T0:2;:INVALID:;/a.py:spin:9 100",  # counted for the tick, not as a sample
            "some garbage",
            "P1;T0:1 100",  # no frames: counted for the tick, not as a sample
            "P1;T0:2;/a.py:worker:5;/a.py:sp",  # truncated by a hard stop
        ]
    )
    out = parse_output(text, ThreadState.UNKNOWN)
    assert (out.ticks, out.lines, out.invalid, out.skipped) == (3, 5, 1, 2)
    assert by_thread(out.samples) == {1: 2, 2: 1}


def test_ticks_count_threads_that_start_and_stop_inside_a_window():
    # thread 3 starts at the second instant, thread 2 stops after it
    lines = [
        "P1;T0:1;/a.py:m:1 1",
        "P1;T0:2;/a.py:w:1 1",
        "P1;T0:3;/a.py:n:1 1",
        "P1;T0:1;/a.py:m:1 1",
        "P1;T0:2;/a.py:w:1 1",
        "P1;T0:3;/a.py:n:1 1",
        "P1;T0:1;/a.py:m:1 1",
        "P1;T0:3;/a.py:n:1 1",
        "P1;T0:1;/a.py:m:1 1",
    ]
    assert parse_output("\n".join(lines), ThreadState.UNKNOWN).ticks == 4


def test_ticks_from_counted_instants_or_estimated():
    backend = AustinBackend(binary="austin")
    settings = SamplerSettings(mode=Mode.WALL, rate_hz=100)
    counted = WindowResult(t0=0.0, t1=2.0, ticks_counted=187)
    assert backend.ticks(counted, settings) == (187.0, "sampler")
    assert backend.ticks(WindowResult(t0=0.0, t1=2.0), settings) == (200.0, "estimated")


def test_command_per_mode():
    backend = AustinBackend(binary="austin")
    wall = backend.command(42, SamplerSettings(mode=Mode.WALL, rate_hz=100), "out")
    assert wall == ["austin", "-p", "42", "-i", "10000", "-o", "out"]
    cpu = backend.command(42, SamplerSettings(mode=Mode.CPU, rate_hz=250), "out")
    assert cpu[:5] == ["austin", "-p", "42", "-i", "4000"] and "-f" in cpu


@pytest.mark.parametrize(
    "settings,message",
    [
        (SamplerSettings(mode=Mode.GIL), GIL_MODE_ERROR),
        (SamplerSettings(mode=Mode.CONTENTION), GIL_MODE_ERROR),
        (SamplerSettings(mode=Mode.WALL, native=True), "native"),
        (SamplerSettings(mode=Mode.WALL, blocking=True), "pauses"),
    ],
)
def test_settings_austin_cannot_honour_are_refused_before_sampling(settings, message):
    backend = AustinBackend(binary="/nonexistent/austin")
    with pytest.raises(UsageError, match=message):
        backend.sample_window(os.getpid(), settings, 1.0, threading.Event())


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "austin"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_version_checks(tmp_path):
    ok = _script(tmp_path, 'echo "austin 3.7.0"')
    assert AustinBackend(binary=ok).version() == "3.7.0"
    (tmp_path / "austin").unlink()
    glibc = _script(
        tmp_path,
        'echo "austin: /lib/x86_64-linux-gnu/libc.so.6: version '
        "\\`GLIBC_2.38' not found (required by austin)\" >&2; exit 1",
    )
    with pytest.raises(SamplerError, match="glibc"):
        AustinBackend(binary=glibc).version()
    (tmp_path / "austin").unlink()
    four = _script(tmp_path, 'echo "austin 4.0.0"')
    with pytest.raises(SamplerError, match="not supported"):
        AustinBackend(binary=four).version()
    with pytest.raises(SamplerError, match=r"austin-dist==3\.7\.0"):
        AustinBackend(binary=str(tmp_path / "missing")).version()


def test_last_message_of_austin_stderr():
    log = (
        "\x1b[1m  banner \x1b[0m\n\x1b[1m more banner\x1b[0m\n\n"
        "\U0001f47e It looks like you are trying to profile a process that is not a Python\n"
        "process. Make sure that you are targeting the right application.\n"
    )
    assert last_message(log) == (
        "It looks like you are trying to profile a process that is not "
        "a Python process. Make sure that you are targeting the right "
        "application"
    )
    assert last_message("") == "no output"


def test_thread_names_of_this_process():
    names = read_thread_names(os.getpid())
    assert names[os.getpid()] == "MainThread"


# -- garbage, truncation and adversarial input: skipped, never an exception, never slow -------
FUZZ = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NAMES = st.text("abcxyz_<>.", min_size=1, max_size=12)
FILES = st.text("/abc_. <>:-", min_size=1, max_size=24)
STACKS = st.lists(
    st.builds(Frame, NAMES, FILES, st.integers(0, 10**6)), min_size=1, max_size=5
).map(tuple)


def austin_line(tid: int, frames: tuple[Frame, ...], idle: bool | None = None) -> str:
    body = ";".join(f"{f.file}:{f.name}:{f.line}" for f in frames)
    metric = "10000" if idle is None else f"10000,{int(idle)},-512"
    return f"P7;T0:{tid};{body} {metric}"


@given(
    tids=st.lists(st.integers(1, 2**40), min_size=1, max_size=4, unique=True),
    stacks=st.lists(STACKS, min_size=1, max_size=8),
    ticks=st.integers(0, 6),
    idle=st.none() | st.booleans(),
)
@FUZZ
def test_written_lines_parse_back(tids, stacks, ticks, idle):
    lines: list[str] = []
    expected: dict[tuple[int, tuple[str, ...]], int] = {}
    for tick in range(ticks):
        for i, tid in enumerate(tids):
            frames = stacks[(tick + i) % len(stacks)]
            lines.append(austin_line(tid, frames, idle))
            expected[(tid, frames)] = expected.get((tid, frames), 0) + 1
    out = parse_output("\n".join(lines), ThreadState.UNKNOWN)
    assert {(s.tid, s.frames): s.count for s in out.samples} == expected
    assert (out.ticks, out.lines, out.skipped) == (ticks, ticks * len(tids), 0)
    active = parse_output("\n".join(lines), ThreadState.ACTIVE, drop_idle=True)
    assert active.ticks == ticks
    assert sum(s.count for s in active.samples) == (0 if idle else ticks * len(tids))


@given(
    text=st.text(max_size=3000)
    | st.binary(max_size=3000).map(lambda b: b.decode("utf-8", errors="replace"))
)
@FUZZ
def test_garbage_is_skipped(text):
    out = parse_output(text, ThreadState.UNKNOWN, drop_idle=True)
    starts = [line for line in text.splitlines() if line.startswith("P")]
    assert out.lines <= len(starts) and sum(s.count for s in out.samples) <= out.lines
    assert all(isinstance(s, Sample) for s in out.samples)


@pytest.mark.parametrize(
    "junk",
    [
        "P\u00b2;T0:1;a.py:f:1 1",
        "P1;T0:1;a.py:f:\u00b2 1",
        "P1;T0:1;a.py:f:1 \u00b2",
        "P1;T0:" + "9" * 5000 + ";a:f:1 1",
        "P1;T0:1;a.py:f:" + "9" * 5000 + " 1",
        "P1;T0:1;a.py:f:1 " + "9" * 5000,
    ],
)
def test_numbers_int_would_refuse_are_garbage_or_zero(junk):
    out = parse_output(junk, ThreadState.UNKNOWN)
    assert out.lines + out.skipped == 1
    assert all(f.line < 10**9 for s in out.samples for f in s.frames)


def test_every_truncation_of_captured_output():
    text = (DATA / "full.austin").read_text()
    whole = parse_output(text, ThreadState.ACTIVE)
    for length in range(0, len(text) + 1, 97):
        out = parse_output(text[:length], ThreadState.ACTIVE)
        assert out.ticks <= whole.ticks and out.lines <= whole.lines
        assert out.skipped <= 1  # only the cut line


@pytest.mark.parametrize("piece", [":", "a:b:1;", ";", "P1;T0:1", " ", "0x", ",1"])
def test_adversarial_long_lines_parse_in_linear_time(piece):
    line = "P1;T0:1;" + piece * 200_000 + " 3\n"
    started = time.monotonic()
    parse_output(line * 2, ThreadState.UNKNOWN)
    assert time.monotonic() - started < 10.0  # generous: a quadratic parse takes minutes
