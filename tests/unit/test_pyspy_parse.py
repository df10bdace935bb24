from __future__ import annotations

import pytest

from gilprof.model import Mode, ThreadState
from gilprof.sampling.backends.base import SamplerSettings, WindowResult, realtime_priority
from gilprof.sampling.backends.pyspy import PySpyBackend, parse_raw, parse_raw_line, whole_seconds


def test_raw_line_with_thread_name_and_full_paths():
    s = parse_raw_line(
        "thread (3318): executor-loop;Thread.run (/usr/lib/python3.11/threading.py:982);"
        "safe_broadcast (/srv/app/comm.py:41) 17",
        ThreadState.HELD,
    )
    assert s is not None
    assert (s.tid, s.thread_name, s.count) == (3318, "executor-loop", 17)
    assert [f.name for f in s.frames] == ["Thread.run", "safe_broadcast"]
    assert s.frames[1].file == "/srv/app/comm.py" and s.frames[1].line == 41
    assert s.frames[1].basename == "comm.py"


def test_raw_line_without_name_hex_tid_and_odd_frames():
    s = parse_raw_line(
        "thread (0x7F00AA);<module> (<frozen importlib._bootstrap>:1176);"
        "pthread_cond_timedwait (libc.so.6) 3",
        ThreadState.HELD,
    )
    assert s is not None
    assert s.tid == 0x7F00AA and s.thread_name == ""
    assert s.frames[0].file == "<frozen importlib._bootstrap>"
    assert s.frames[1].name == "pthread_cond_timedwait" and s.frames[1].line == 0


def test_garbage_lines_are_skipped():
    text = "\n".join(
        ["", "not a stack", "thread (12): t;f (a.py:1) notanumber", "thread (12): t;f (a.py:1) 2"]
    )
    assert [s.count for s in parse_raw(text, ThreadState.HELD)] == [2]


def test_command_flags_per_mode():
    backend = PySpyBackend(binary="py-spy")
    gil = backend.command(42, SamplerSettings(mode=Mode.GIL), "out.txt")
    # --idle: without it py-spy drops a holder whose top frame is threading.wait/select
    assert "--gil" in gil and "--nonblocking" in gil and "--idle" in gil
    assert "--duration" not in gil
    wall = backend.command(42, SamplerSettings(mode=Mode.WALL, blocking=True), "out.txt")
    assert "--idle" in wall and "--nonblocking" not in wall
    native = backend.command(42, SamplerSettings(native=True), "out.txt")
    assert "--native" in native and "--nonblocking" not in native


@pytest.mark.parametrize(
    "seconds,whole", [(2.0, 2), (1.7, 2), (2.4, 2), (0.2, 1), (None, None), (float("inf"), None)]
)
def test_windows_run_whole_seconds_for_an_exact_tick_count(seconds, whole):
    assert whole_seconds(seconds) == whole


def test_duration_window_command_and_ticks():
    backend = PySpyBackend(binary="py-spy")
    cmd = backend.command(42, SamplerSettings(mode=Mode.GIL), "out.txt", 1.7)
    assert cmd[cmd.index("--duration") + 1] == "2"
    settings = SamplerSettings(mode=Mode.GIL, rate_hz=100)
    exact = WindowResult(t0=0.0, t1=2.0, ticks_counted=197, ticks_exact=True)
    assert backend.ticks(exact, settings) == (197.0, "sampler")
    # ended early (target exit, Ctrl-C): the count is unknown, estimated from the window
    early = WindowResult(t0=0.0, t1=1.5, sampler_samples=120)
    assert backend.ticks(early, settings) == (150.0, "estimated")


def test_realtime_priority_only_for_non_blocking_samplers():
    assert realtime_priority(SamplerSettings.for_mode("contention", 100))[0] is None
    assert realtime_priority(SamplerSettings(mode=Mode.GIL, blocking=True))[0] is None
    assert realtime_priority(SamplerSettings(mode=Mode.GIL, rate_hz=5000))[0] is None
    assert realtime_priority(SamplerSettings(mode=Mode.GIL, realtime=False))[0] is None
