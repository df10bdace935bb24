"""Start triggers (gilprof.sampling.triggers): the wait logic with fake line sources and a fake
clock, the option parsing, the log follower on real files, the recipes' [start] table."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from gilprof.cli._options import StartChoice
from gilprof.cli._recipe import start_of
from gilprof.errors import InputError, UsageError
from gilprof.model import Mode, SamplingInfo
from gilprof.profile.reader import ProfileReader
from gilprof.recipes import load_recipe, parse_recipe
from gilprof.sampling.triggers import (
    Clock,
    Fired,
    Line,
    LogFollower,
    OutputPump,
    StartSpec,
    TriggerNotFired,
    WaitInterrupted,
    start_spec,
    wait_for_start,
)


class FakeTime:
    """A clock that only moves when the wait pauses or a source is read."""

    def __init__(self) -> None:
        self.now = 100.0

    def clock(self) -> Clock:
        return Clock(monotonic=lambda: self.now, wall=lambda: 1_700_000_000.0 + self.now)

    def pause(self, seconds: float) -> bool:
        self.now += seconds
        return False


class ScriptedLines:
    """Lines handed out one batch per read; each read costs `timeout` of fake time."""

    def __init__(self, time: FakeTime, batches: list[list[str]], ended_after: int | None = None):
        self.time = time
        self.batches = list(batches)
        self.reads = 0
        self.ended_after = ended_after

    def read(self, timeout: float) -> list[Line]:
        self.reads += 1
        self.time.now += timeout
        batch = self.batches.pop(0) if self.batches else []
        return [Line(text, "stdout") for text in batch]

    @property
    def ended(self) -> bool:
        return self.ended_after is not None and self.reads >= self.ended_after


def running() -> str | None:
    return None


def wait(spec: StartSpec, source, time: FakeTime, ended=running, stop=None, on_wait=None):
    return wait_for_start(
        spec,
        source,
        ended,
        stop or threading.Event(),
        clock=time.clock(),
        pause=time.pause,
        on_wait=on_wait,
    )


def test_the_first_matching_line_fires_and_is_recorded_redacted() -> None:
    time = FakeTime()
    source = ScriptedLines(
        time, [["loading weights"], [], ["iter = 0, --api-key sk-123, host_step_time = 5ms"]]
    )
    spec = start_spec(on=r"iter\s*=")
    assert spec is not None
    fired = wait(spec, source, time)
    assert fired.line is not None and fired.line.text.startswith("iter = 0")
    assert fired.waited_s == pytest.approx(0.3)
    record = fired.record(first_window_t0=fired.monotonic + 0.25)
    assert record.kind == "output" and record.source == "stdout"
    assert record.line is not None and "sk-123" not in record.line
    assert "--api-key <redacted>" in record.line
    assert record.first_window_after_s == pytest.approx(0.25)
    assert record.fired_at.startswith("2023-11-14T")  # wall clock of the fake time, UTC
    assert "'iter\\s*='" in record.description


def test_lines_before_the_match_do_not_fire() -> None:
    time = FakeTime()
    source = ScriptedLines(time, [["step 10", "step 11"], ["step 1 t=5"]])
    spec = start_spec(on=r"^step 1\b")
    assert spec is not None
    fired = wait(spec, source, time)
    assert fired.line is not None and fired.line.text == "step 1 t=5"


def test_after_alone_waits_that_long_and_reports_progress() -> None:
    time = FakeTime()
    seen: list[float] = []
    spec = start_spec(after=2.0)
    assert spec is not None
    fired = wait(spec, None, time, on_wait=lambda _what, seconds: seen.append(seconds))
    assert fired.line is None
    assert fired.waited_s == pytest.approx(2.0)
    assert seen and seen[-1] < 2.0 and seen == sorted(seen)
    assert fired.record().kind == "after"


def test_after_with_a_line_counts_from_the_line() -> None:
    time = FakeTime()
    source = ScriptedLines(time, [[], [], [], ["ready"]])
    spec = start_spec(after=1.5, on="ready")
    assert spec is not None
    fired = wait(spec, source, time)
    assert fired.waited_s == pytest.approx(0.4 + 1.5)
    assert fired.line is not None and fired.line.text == "ready"


def test_the_job_exiting_first_names_its_status_and_the_regex() -> None:
    time = FakeTime()
    source = ScriptedLines(time, [["warming up"]] + [[]] * 20)
    exited = {"now": False}

    def ended() -> str | None:
        return "the job exited (status 1)" if exited["now"] else None

    spec = start_spec(on="iter =")
    assert spec is not None
    exited["now"] = True
    with pytest.raises(TriggerNotFired) as caught:
        wait(spec, source, time, ended=ended)
    assert str(caught.value) == "the job exited (status 1) before its output matched 'iter ='"
    assert caught.value.exit_code != 0


def test_lines_still_in_the_pipe_after_the_exit_are_read_first() -> None:
    time = FakeTime()
    source = ScriptedLines(time, [[], ["iter = 3"]])
    spec = start_spec(on="iter =")
    assert spec is not None
    fired = wait(spec, source, time, ended=lambda: "the job exited (status 0)")
    assert fired.line is not None and fired.line.text == "iter = 3"


def test_a_closed_output_of_a_running_job_cannot_fire() -> None:
    time = FakeTime()
    source = ScriptedLines(time, [["a"]], ended_after=1)
    spec = start_spec(on="iter =")
    assert spec is not None
    with pytest.raises(TriggerNotFired, match="closed its output"):
        wait(spec, source, time)


def test_the_start_timeout_ends_the_wait() -> None:
    time = FakeTime()
    source = ScriptedLines(time, [])
    spec = start_spec(on="iter =", timeout=3.0)
    assert spec is not None
    with pytest.raises(TriggerNotFired, match=r"no start after 3 s \(--start-timeout\)"):
        wait(spec, source, time)
    assert time.now == pytest.approx(103.0, abs=0.15)


def test_a_stop_during_the_wait_raises_interrupted_with_exit_130() -> None:
    time = FakeTime()
    stop = threading.Event()
    source = ScriptedLines(time, [])
    calls = {"n": 0}

    def on_wait(_what: str, _seconds: float) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            stop.set()

    spec = start_spec(on="x")
    assert spec is not None
    with pytest.raises(WaitInterrupted, match="nothing sampled") as caught:
        wait(spec, source, time, stop=stop, on_wait=on_wait)
    assert caught.value.exit_code == 130


def test_the_job_ending_during_the_delay_is_not_fired() -> None:
    time = FakeTime()
    spec = start_spec(after=5)
    assert spec is not None
    ended = iter([None, None, "the target (PID 7) exited"])
    with pytest.raises(
        TriggerNotFired, match=r"PID 7\) exited before the start \(a delay of 5 s\)"
    ):
        wait(spec, None, time, ended=lambda: next(ended, "the target (PID 7) exited"))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"on": "a(", "on_log": None}, "--start-on: bad regular expression"),
        ({"on_log": "gen.log"}, "--start-on-log: expected FILE:REGEX"),
        ({"on_log": ":iter"}, "--start-on-log: expected FILE:REGEX"),
        ({"on_log": "gen.log:("}, "--start-on-log: bad regular expression"),
        ({"on": "a", "on_log": "f:a"}, "alternatives"),
        ({"timeout": 5.0}, "--start-timeout needs"),
    ],
)
def test_bad_options_are_one_usage_error(kwargs: dict, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        start_spec(**kwargs)


def test_no_option_is_no_trigger_and_the_log_spec_splits_at_the_first_colon() -> None:
    assert start_spec() is None
    spec = start_spec(on_log="gen.log:Decode batch. #running-req: \\d+")
    assert spec is not None and spec.on_log is not None
    assert spec.on_log.path == "gen.log"
    assert spec.on_log.regex.pattern == "Decode batch. #running-req: \\d+"
    assert spec.kind == "log"


def test_log_follower_starts_at_the_end_and_follows_replacement(tmp_path: Path) -> None:
    log = tmp_path / "gen.log"
    log.write_text("iter = 0 (old run)\n")
    follower = LogFollower(str(log), sleep=lambda _s: None)
    assert follower.read(0.0) == []  # what was there before is not new
    with log.open("a") as handle:
        handle.write("loading\niter = 1, host")
    assert [line.text for line in follower.read(0.0)] == ["loading"]  # "iter = 1" incomplete
    with log.open("a") as handle:
        handle.write("_step_time = 3ms\n")
    assert [line.text for line in follower.read(0.0)] == ["iter = 1, host_step_time = 3ms"]
    log.unlink()
    log.write_text("new file\n")  # rotated: read from its start
    assert [line.text for line in follower.read(0.0)] == ["new file"]
    log.write_text("")  # truncated in place, then written again
    assert follower.read(0.0) == []
    log.write_text("again\n")
    assert [line.text for line in follower.read(0.0)] == ["again"]
    follower.close()


def test_log_follower_waits_for_a_file_that_does_not_exist_yet(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    follower = LogFollower(str(log), sleep=lambda _s: None)
    assert follower.read(0.0) == [] and not follower.ended
    log.write_text("first\nsecond\n")
    assert [(line.text, line.source) for line in follower.read(0.0)] == [
        ("first", str(log)),
        ("second", str(log)),
    ]
    follower.close()


def test_output_pump_passes_bytes_through_unchanged_and_splits_lines(tmp_path: Path) -> None:
    out_path = tmp_path / "out.bin"
    data = b"warm\r\n\x00\xffbinary\nstep 1 ok\nno newline at the end"
    read_end, write_end = os.pipe()
    with open(out_path, "wb") as sink:
        pump = OutputPump([(os.fdopen(read_end, "rb"), sink.fileno(), "stdout")])
        os.write(write_end, data[:7])
        os.write(write_end, data[7:])
        os.close(write_end)
        pump.join(10)
    assert out_path.read_bytes() == data
    texts = [line.text for line in pump.read(0.0)]
    assert texts == ["warm\r", "\x00\ufffdbinary", "step 1 ok", "no newline at the end"]
    assert pump.ended


def test_output_pump_stops_splitting_once_the_trigger_fired(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    with open(tmp_path / "out", "wb") as sink:
        pump = OutputPump([(os.fdopen(read_end, "rb"), sink.fileno(), "stderr")])
        pump.stop_matching()
        os.write(write_end, b"a\nb\n")
        os.close(write_end)
        pump.join(10)
    assert pump.read(0.0) == []
    assert (tmp_path / "out").read_bytes() == b"a\nb\n"


RECIPE = """
name = "mine"
description = "a test recipe"
[start]
{body}
"""


def test_recipes_start_table_is_loaded_and_checked() -> None:
    recipe = parse_recipe(RECIPE.format(body="on = 'iter ='\nafter = 2"), "mine.toml")
    assert recipe.start is not None
    assert (recipe.start.on, recipe.start.on_log, recipe.start.after) == ("iter =", None, 2.0)
    assert recipe.to_dict()["start"] == {"on": "iter =", "on_log": None, "after": 2.0}


@pytest.mark.parametrize(
    "body, message",
    [
        ("on = 'iter ('", "start.on: expected a valid regular expression"),
        ("on_log = 'gen.log'", "start.on_log: expected FILE:REGEX"),
        ("on_log = 'gen.log:('", "start.on_log: expected a valid regular expression"),
        ("after = -1", "start.after: expected a number >= 0"),
        ("when = 3", "start.when: unknown key"),
    ],
)
def test_a_bad_start_table_is_one_input_error(body: str, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)) as caught:
        parse_recipe(RECIPE.format(body=body), "mine.toml")
    assert caught.value.exit_code == 2


@pytest.mark.parametrize(
    "name, line",
    [
        ("trtllm-disagg-gen", "[TRT-LLM] [I] iter = 12, global_rank = 0, host_step_time = 4ms"),
        ("trtllm-serve", "iter = 0, global_rank = 0, rank = 0, host_step_time = 9.1ms"),
        ("sglang", "[2026-01-01 TP0] Decode batch. #running-req: 3, #token: 812"),
    ],
)
def test_builtin_recipes_start_at_their_engines_step_line(name: str, line: str) -> None:
    start = load_recipe(name).start
    assert start is not None and start.on is not None
    assert re.search(start.on, line)
    assert not re.search(start.on, "max_iter = 5, loading weights")


@pytest.mark.parametrize("name", ["torchrun", "mpi-generic", "vllm"])
def test_recipes_without_a_known_step_line_start_at_once(name: str) -> None:
    assert load_recipe(name).start is None


def choice(**given: object) -> StartChoice:
    values: dict[str, Any] = dict.fromkeys(
        ("start_after", "start_on", "start_on_log", "start_timeout")
    )
    values.update(given)
    return StartChoice(**values, given=frozenset(given))


def test_the_command_line_replaces_the_recipes_start() -> None:
    recipe = load_recipe("trtllm-serve")
    from_recipe = start_of(choice(), recipe, launch=True)
    assert from_recipe is not None and from_recipe.on_output is not None
    assert from_recipe.on_output.search("iter = 3, host_step_time = 2ms")
    mine = start_of(choice(start_after=4.0), recipe, launch=True)
    assert mine is not None and mine.on_output is None and mine.after_s == 4.0
    timed = start_of(choice(start_timeout=30.0), recipe, launch=True)
    assert timed is not None and timed.on_output is not None and timed.timeout_s == 30.0


def test_attached_a_recipes_output_trigger_gives_way_to_its_log_or_to_none(
    capsys: pytest.CaptureFixture[str],
) -> None:
    recipe = load_recipe("sglang")
    assert start_of(choice(), recipe, launch=False) is None
    assert "needs a launched job's output" in capsys.readouterr().err
    both = parse_recipe(RECIPE.format(body="on = 'x'\non_log = 'gen.log:iter ='"), "both.toml")
    attached = start_of(choice(), both, launch=False)
    assert attached is not None and attached.on_log is not None
    assert attached.on_log.path == "gen.log"
    launched = start_of(choice(), both, launch=True)
    assert launched is not None and launched.on_output is not None and launched.on_log is None


def test_the_trigger_survives_a_profile_round_trip() -> None:
    fired = Fired(
        StartSpec(on_output=re.compile("ready")),
        10.0,
        1_700_000_000.5,
        3.25,
        Line("ready", "stderr"),
    )
    info = SamplingInfo("py-spy", "0.4.3", Mode.STATES, 100, start_trigger=fired.record(10.4))
    back = ProfileReader("p.json").read_sampling(json.loads(json.dumps(info.to_dict())))
    assert back.start_trigger == info.start_trigger
    assert back.start_trigger is not None and back.start_trigger.first_window_after_s == 0.4
    assert "line 'ready' (stderr); first window 0.40 s later" in back.start_trigger.summary()
