"""gilprof.analysis.verdict on hand-made profiles: thread choice, the split, the thresholds."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gilprof.analysis.verdict import (
    DEVICE,
    HOST,
    MIXED,
    UNDETERMINED,
    verdict,
)
from gilprof.cli.main import cli
from gilprof.errors import UsageError
from gilprof.model import Mode, ThreadState
from gilprof.profile import Profile

from .builders import make_profile, sample

LOOP, DECOY = 1, 2
WAIT = (
    "loop",
    "step",
    "StreamEvent.synchronize@sim.py",
    "Event.wait@threading.py",
    "Condition.wait@threading.py",
    "PyThread_acquire_lock_timed@libpython3.11.so",
)


def _contention(busy: list[int], device: list[int], io: int = 0, decoy_busy: int = 95) -> Profile:
    """Per window (100 ticks): the loop holds, waits for the GIL or sleeps in a device wait;
    a decoy thread is busier than the loop but runs no watched function."""
    windows = []
    for b, d in zip(busy, device, strict=True):
        held, waiting = b // 2, b - b // 2
        rest = 100 - b - d
        windows.append(
            (
                100,
                [
                    sample("loop-thread", "loop", "step", "safe_broadcast", count=held, tid=LOOP),
                    sample(
                        "loop-thread",
                        "loop",
                        "step",
                        "safe_broadcast",
                        "pthread_cond_wait@libc.so.6",
                        count=waiting,
                        tid=LOOP,
                        state=ThreadState.WAITING,
                    ),
                    sample("loop-thread", *WAIT, count=d, tid=LOOP, state=ThreadState.IDLE),
                    sample(
                        "loop-thread",
                        "loop",
                        "poll_sockets",
                        "select@libc.so.6",
                        count=rest + io,
                        tid=LOOP,
                        state=ThreadState.IDLE,
                    ),
                    sample("decoy", "spin", count=decoy_busy, tid=DECOY),
                    sample(
                        "decoy",
                        "spin",
                        "clock_nanosleep@libc.so.6",
                        count=100 - decoy_busy,
                        tid=DECOY,
                        state=ThreadState.IDLE,
                    ),
                ],
            )
        )
    return make_profile(windows, mode=Mode.CONTENTION)


def _judge(profile: Profile, **kwargs):
    kwargs.setdefault("watch", ("safe_broadcast",))
    return verdict(profile, 60.0, 59.5, **kwargs)


def test_device_bound_when_the_loop_waits_a_material_share():
    v = _judge(_contention([60, 62, 58, 61, 59, 60], [40, 38, 42, 39, 41, 40]))
    assert v.bound == DEVICE and v.thread == "loop-thread"
    assert v.device_wait_share == pytest.approx(0.40, abs=0.005)
    assert v.busy_share == pytest.approx(0.60, abs=0.005)
    assert v.command is None and "device-bound" in v.reason


def test_host_bound_when_busy_and_never_waiting_for_the_device():
    v = _judge(_contention([97, 98, 99, 97, 98, 99], [1, 0, 1, 2, 1, 0]))
    assert v.bound == HOST and v.busy_share > 0.95
    assert "held 49%" in v.reason and "waiting for the GIL 49%" in v.reason


def test_mixed_between_the_thresholds():
    v = _judge(_contention([84, 83, 85, 84, 83, 85], [16, 17, 15, 16, 17, 15]))
    assert v.bound == MIXED


def test_undetermined_when_the_interval_straddles_a_threshold():
    # 2% .. 18% device wait across windows: the interval contains 10%.
    v = _judge(_contention([98, 82, 97, 83, 98, 82], [2, 18, 3, 17, 2, 18]))
    assert v.bound == UNDETERMINED and "straddles" in v.reason and v.command


def test_io_waits_are_not_device_waits():
    v = _judge(_contention([40] * 6, [0] * 6))  # 60% in select(): neither busy nor the device
    assert v.bound == UNDETERMINED and v.device_wait_share == 0.0
    assert "blocked, unexplained 60%" in v.reason


def test_gil_mode_proves_host_bound_only_from_a_held_share_near_one():
    held = make_profile(
        [
            (100, [sample("loop-thread", "loop", "safe_broadcast", count=n, tid=LOOP)])
            for n in (95, 96, 94, 95, 96, 95)
        ]
    )
    v = _judge(held)
    assert v.bound == HOST and v.device_wait_share is None
    half = make_profile(
        [
            (
                100,
                [
                    sample("loop-thread", "loop", "safe_broadcast", count=n, tid=LOOP),
                    sample("decoy", "spin", count=45, tid=DECOY),
                ],
            )
            for n in (50, 52, 48, 50, 51, 49)
        ]
    )
    v = _judge(half)
    assert v.bound == UNDETERMINED and v.device_wait_share is None
    assert "at most 45%" in v.reason  # of its non-held time, GIL wait is bounded by others' hold
    assert "--mode states" in (v.command or "")


def test_gil_mode_reads_a_named_thread_it_never_saw_as_undetermined_not_as_an_error():
    # gil mode records only the holder: a loop waiting for the device may hold the GIL in
    # no tick of a short run, and is then absent from the profile, not proven missing
    others = make_profile(
        [(100, [sample("ingress", "serve", "recv", count=3, tid=DECOY)]) for _ in range(6)]
    )
    v = _judge(others, loop_thread="executor-loop")
    assert v.bound == UNDETERMINED and v.thread == "executor-loop" and v.busy_share == 0.0
    assert "never seen holding the GIL" in v.loop.thread.chosen_by
    assert "--mode states" in (v.command or "")
    # states and contention mode see every thread: a name that matches none is an error
    with pytest.raises(UsageError, match="matches no sampled thread"):
        _judge(_contention([60] * 6, [40] * 6), loop_thread="executor")


def test_the_loop_thread_is_chosen_by_measurement_not_by_busyness_alone():
    profile = _contention([60] * 6, [40] * 6, decoy_busy=99)
    assert _judge(profile).thread == "loop-thread"  # the decoy is busier but runs no watched code
    assert _judge(profile, watch=()).thread == "decoy"  # without evidence: the busiest thread
    assert _judge(profile, watch=(), loop_thread="loop").thread == "loop-thread"
    chosen = _judge(profile, watch=(), recipe_loop_thread="^loop-")
    assert chosen.thread == "loop-thread" and "recipe" in chosen.loop.thread.chosen_by
    with pytest.raises(UsageError, match="matches no sampled thread; threads: decoy, loop-thread"):
        _judge(profile, loop_thread="executor")


def test_wall_mode_finds_a_named_wait_only():
    def wall(named: bool) -> Profile:
        leaf = "wait_for_gpu" if named else "poll_gpu"
        return make_profile(
            [
                (
                    100,
                    [
                        sample(
                            "loop-thread",
                            "loop",
                            "safe_broadcast",
                            count=50,
                            tid=LOOP,
                            state=ThreadState.UNKNOWN,
                        ),
                        sample(
                            "loop-thread",
                            "loop",
                            leaf,
                            count=50,
                            tid=LOOP,
                            state=ThreadState.UNKNOWN,
                        ),
                    ],
                )
                for _ in range(6)
            ],
            mode=Mode.WALL,
        )

    assert _judge(wall(True), device_wait=("wait_for_gpu",)).bound == DEVICE
    assert _judge(wall(False), device_wait=("wait_for_gpu",)).bound == HOST


def test_report_json_carries_the_documented_verdict(tmp_path):
    profile = tmp_path / "p.json"
    _contention([60, 62, 58, 61, 59, 60], [40, 38, 42, 39, 41, 40]).save(profile)
    log = tmp_path / "steps.log"
    log.write_text(
        "".join(
            f"iter = {i}, global_rank = 0, rank = 0, host_step_time = 80.0ms, "
            f"prev_device_step_time = 79.9ms, num_scheduled_requests: 1\n"
            for i in range(10)
        )
    )
    result = CliRunner().invoke(
        cli,
        [
            "report",
            str(profile),
            "--steps",
            str(log),
            "--format",
            "json",
            "--watch",
            "safe_broadcast",
        ],
    )
    assert result.exit_code == 0, result.output
    v = json.loads(result.stdout)["verdict"]
    assert {
        "bound",
        "thread",
        "busy_share",
        "device_wait_share",
        "host_step_p50_ms",
        "device_step_p50_ms",
        "reason",
    } <= set(v)
    assert (v["bound"], v["thread"]) == ("device", "loop-thread")
    assert v["host_step_p50_ms"] == 80.0 and v["device_step_p50_ms"] == 79.9
    table = CliRunner().invoke(cli, ["report", str(profile), "--steps", str(log)])
    assert table.stdout.startswith("VERDICT  device-bound: loop thread loop-thread")
    without = json.loads(
        CliRunner().invoke(cli, ["report", str(profile), "--format", "json"]).stdout
    )
    assert "verdict" not in without


def test_holding_or_wanting_the_gil_inside_a_wait_function_is_host_work():
    """Returning from Event.wait a thread takes the GIL back: that is GIL wait, not device."""
    profile = make_profile(
        [
            (
                100,
                [
                    sample("loop-thread", *WAIT[:4], count=50, tid=LOOP),
                    sample(
                        "loop-thread",
                        *WAIT[:4],
                        "take_gil@libpython3.11.so",
                        count=50,
                        tid=LOOP,
                        state=ThreadState.WAITING,
                    ),
                ],
            )
        ]
        * 6,
        mode=Mode.CONTENTION,
    )
    v = _judge(profile, loop_thread="loop")
    assert v.bound == HOST and v.device_wait_share == 0.0 and v.busy_share == 1.0


def test_the_demo_summary_gives_each_undetermined_verdicts_own_reason():
    """It said "a gil-mode profile sees only the GIL holder" for any undetermined verdict,
    also of a states profile whose device-wait interval straddled a threshold."""
    from gilprof.analysis.compare import compare_profiles
    from gilprof.renderers.compare import demo_summary

    straddles = _contention([98, 82, 97, 83, 98, 82], [2, 18, 3, 17, 2, 18])
    decided = _judge(_contention([60, 62, 58, 61, 59, 60], [40, 38, 42, 39, 41, 40]))
    undecided = _judge(straddles)
    assert undecided.bound == UNDETERMINED and undecided.command
    comparison = compare_profiles(straddles, straddles)
    text = demo_summary(comparison, (decided, undecided), {}, ("b.json", "a.json"), ("b", "a"))
    assert "gil-mode" not in text
    assert f"The after verdict: {undecided.reason}. To decide: {undecided.command}." in text
    assert "The before verdict:" not in text  # decided: device-bound, nothing to decide
