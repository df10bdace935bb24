"""The flight recorder's pure parts: option syntax, the step trigger, the window ring."""

from __future__ import annotations

from datetime import datetime

import pytest

from gilprof.errors import UsageError
from gilprof.model import Mode, SamplingInfo, Target
from gilprof.sampling.backends.base import WindowResult
from gilprof.sampling.recorder import (
    StepMonitor,
    WindowRing,
    parse_seconds,
    parse_trigger,
    parse_until,
)
from tests.unit.builders import sample

ITER = "iter = {i}, global_rank = 0, rank = 0, host_step_time = {ms}ms"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("5m", 300.0), ("1.5h", 5400.0), ("500ms", 0.5)],
)
def test_durations_take_units(text: str, seconds: float) -> None:
    assert parse_seconds(text, "--keep") == seconds


@pytest.mark.parametrize("text", ["", "5 minutes", "-3", "m"])
def test_a_bad_duration_is_a_usage_error_naming_the_option(text: str) -> None:
    with pytest.raises(UsageError, match="--keep"):
        parse_seconds(text, "--keep")


def test_until_a_clock_time_later_today_or_tomorrow() -> None:
    now = datetime(2026, 1, 1, 10, 30, 0)
    assert parse_until("11:00", now) == 1800
    assert parse_until("10:00", now) == 23.5 * 3600  # already past: tomorrow
    assert parse_until("90m", now) == 5400
    with pytest.raises(UsageError, match="HH:MM"):
        parse_until("25:00", now)


def test_trigger_syntax_absolute_and_relative() -> None:
    absolute = parse_trigger("p50>120")
    assert (absolute.ms, absolute.factor) == (120.0, None)
    assert parse_trigger("P50 > 80ms").ms == 80.0
    relative = parse_trigger("p50>1.5x")
    assert (relative.ms, relative.factor) == (None, 1.5)
    assert relative.limit(40.0) == 60.0
    assert relative.limit(None) is None


@pytest.mark.parametrize("text", ["p90>100", "p50<100", "p50>0", "p50>1x", "p50>0.5x", "100"])
def test_bad_triggers_are_refused(text: str) -> None:
    with pytest.raises(UsageError, match="--trigger"):
        parse_trigger(text)


def feed(monitor: StepMonitor, values: list[float], start: int = 0, t0: float = 0.0) -> list[int]:
    """Iterations (by index) at which the monitor fired, one line per 0.1 s."""
    fired = []
    for k, ms in enumerate(values):
        i = start + k
        if monitor.add(ITER.format(i=i, ms=ms), ms, t0 + 0.1 * i) is not None:
            fired.append(i)
    return fired


def test_absolute_threshold_fires_once_per_crossing_and_rearms_below() -> None:
    monitor = StepMonitor(parse_trigger("p50>100"), over=5, baseline_s=0)
    values = [50.0] * 10 + [150.0] * 10 + [50.0] * 10 + [150.0] * 10
    fired = feed(monitor, values)
    # the p50 of 5 crosses on the third slow iteration of each phase, and only then
    assert fired == [12, 32]


def test_p50_not_mean_one_spike_does_not_fire() -> None:
    monitor = StepMonitor(parse_trigger("p50>100"), over=5, baseline_s=0)
    assert feed(monitor, [50.0, 50.0, 5000.0, 50.0, 50.0, 50.0, 5000.0, 5000.0, 50.0]) == []


def test_relative_threshold_waits_for_its_baseline() -> None:
    monitor = StepMonitor(parse_trigger("p50>2x"), over=4, baseline_s=1.0)
    # slow iterations inside the baseline period raise the baseline, they do not fire
    assert feed(monitor, [40.0] * 10) == []
    assert monitor.baseline_p50 is None  # 1 s of baseline not over yet
    assert feed(monitor, [70.0] * 10, start=10) == []
    assert monitor.baseline_p50 == 40.0
    assert monitor.limit_ms == 80.0
    assert feed(monitor, [90.0] * 6, start=20) == [22]


def test_fire_quotes_the_lines_up_to_the_trigger() -> None:
    monitor = StepMonitor(parse_trigger("p50>100"), over=3, baseline_s=0, context=2)
    for i, ms in enumerate([50.0, 200.0]):
        assert monitor.add(ITER.format(i=i, ms=ms), ms, i) is None
    monitor.add("not an iteration line", None, 2.0)
    fire = monitor.add(ITER.format(i=3, ms=300.0), 300.0, 3.0)
    assert fire is not None
    assert fire.lines == ("not an iteration line", ITER.format(i=3, ms=300.0))
    assert "200.0 ms > 100.0 ms" in fire.detail


def ring() -> WindowRing:
    return WindowRing(
        Target(pid=1, rank=0),
        SamplingInfo(sampler="test", sampler_version="0", mode=Mode.STATES, rate_hz=100),
    )


def test_ring_keeps_only_windows_after_the_cut() -> None:
    r = ring()
    for t in range(10):
        r.add(WindowResult(100.0 + t, 101.0 + t, [sample("main", "loop", f"f{t % 3}")]), 100)
    r.trim(105.5)
    assert [w.t0 for w in r.windows] == [105.0, 106.0, 107.0, 108.0, 109.0]


def test_snapshot_rebases_times_and_keeps_only_used_stacks() -> None:
    r = ring()
    r.add(WindowResult(100.0, 101.0, [sample("main", "loop", "old", count=5)]), 100)
    r.add(
        WindowResult(
            101.0,
            102.0,
            [sample("main", "loop", "hot", count=7)],
            [(sample("main", "loop", "hot"), 0.1, 0.6)],
        ),
        100,
    )
    info = SamplingInfo(sampler="test", sampler_version="0", mode=Mode.STATES, rate_hz=100)
    snap = r.snapshot(101.0, 103.0, info)
    assert [(w.t0, w.t1) for w in snap.windows] == [(0.0, 1.0)]
    assert len(snap.stacks) == 1  # the dropped window's stack is not carried over
    assert [f.name for f in snap.stack_frames(0)] == ["loop", "hot"]
    assert dict(snap.windows[0].counts) == {0: 7}
    (tid, stack, a, b) = next(iter(snap.windows[0].spans))
    assert (stack, round(a, 6), round(b, 6)) == (0, 0.1, 0.6)
    assert snap.threads[tid] == "main"


def test_stack_table_is_rebuilt_when_it_outgrows_the_kept_windows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(WindowRing, "COMPACT_MIN_STACKS", 20)
    r = ring()
    for t in range(200):  # a new distinct stack every window, one window kept
        r.add(WindowResult(float(t), t + 1.0, [sample("main", "loop", f"f{t}")]), 100)
        r.trim(t + 0.5)
        assert len(r.profile.stacks) <= 20 + 10 + 1
    assert r.compactions > 0
    assert len(r.windows) == 1
    last = r.windows[0]
    (index,) = last.counts
    assert r.profile.stack_frames(index)[-1].name == "f199"
