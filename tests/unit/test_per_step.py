"""Cost per step and the what-if prediction, on hand-made states-mode profiles."""

from __future__ import annotations

import math
import random

import pytest

from gilprof.analysis.compare import IMPROVED, REGRESSED, UNCHANGED, compare_profiles
from gilprof.analysis.per_step import compare_costs, loop_costs, parse_renames
from gilprof.analysis.verdict import verdict
from gilprof.analysis.what_if import RemovalSpec, parse_specs, predict
from gilprof.errors import UsageError
from gilprof.model import Frame, Mode, Sample, SamplingInfo, Target, ThreadState
from gilprof.profile import Profile
from gilprof.steps import rank_steps

from .builders import steps_log

LOOP, INGRESS = 1, 2
HELD, WAITING, IDLE = ThreadState.HELD, ThreadState.WAITING, ThreadState.IDLE


def _stack(tid: int, state: ThreadState, *names: str) -> Sample:
    thread = "loop" if tid == LOOP else "ingress"
    frames = tuple(
        Frame(n.split(":")[0], "app.py", int(n.split(":")[1]) if ":" in n else 1) for n in names
    )
    return Sample(tid, thread, frames, 1, state)


def states_profile(windows: list[list[tuple[Sample, float]]], window_s: float = 1.0) -> Profile:
    """Each window: (sample, seconds) runs laid end to end per thread, in the given order.
    The loop's held runs also become py-spy counts (one per 10 ms), lines included."""
    profile = Profile(
        Target(pid=1, rank=0, hostname="h", python="3.11.7"),
        SamplingInfo(sampler="test", sampler_version="0", mode=Mode.STATES, rate_hz=100.0),
    )
    t = 0.0
    for runs in windows:
        clocks: dict[int, float] = {}
        spans = []
        counts = []
        for sample, seconds in runs:
            start = clocks.get(sample.tid, 0.0)
            spans.append((sample, start, start + seconds))
            clocks[sample.tid] = start + seconds
            if sample.state is HELD:
                counts.append(
                    Sample(
                        sample.tid, sample.thread_name, sample.frames, round(seconds * 100), HELD
                    )
                )
        profile.add_window(t, t + window_s, window_s * 100, counts, spans)
        t += window_s
    profile.finish()
    return profile


def _window(f_s: float, blamed_s: float, wait_s: float = 0.0) -> list[tuple[Sample, float]]:
    """The loop: f for f_s, then waits for the GIL blamed_s while ingress holds in `parse`,
    then other work, then `wait_s` in a device wait; ingress idles, then holds."""
    other = 1.0 - f_s - blamed_s - wait_s
    return [
        (_stack(LOOP, HELD, "loop", "f"), f_s),
        (_stack(LOOP, WAITING, "loop", "rest"), blamed_s),
        (_stack(LOOP, HELD, "loop", "rest"), other),
        (_stack(LOOP, IDLE, "loop", "Event.synchronize"), wait_s),
        (_stack(INGRESS, IDLE, "ingress", "poll"), f_s),
        (_stack(INGRESS, HELD, "ingress", "parse"), blamed_s),
        (_stack(INGRESS, IDLE, "ingress", "poll"), 1.0 - f_s - blamed_s),
    ]


@pytest.fixture
def host_steps(tmp_path):
    return rank_steps(str(steps_log(tmp_path / "s.log", 40.0, 10.0, n=60)), 0, 0)


def _judge(profile: Profile, steps):
    return verdict(profile, steps.host_step_ms.p50, None, loop_thread="^loop$")


def test_cost_per_step_is_own_time_plus_blamed_wait_times_the_step(host_steps):
    profile = states_profile([_window(0.3, 0.2) for _ in range(10)])
    costs = loop_costs(profile, LOOP, host_steps)
    step = host_steps.host_step_ms.mean
    f = costs.find("f")
    parse = costs.find("parse")
    assert f is not None and parse is not None
    assert f.own_share == pytest.approx(0.3) and f.blamed_share == 0
    assert parse.own_share == 0 and parse.blamed_share == pytest.approx(0.2)
    assert f.per_step_ms.value == pytest.approx(0.3 * step)
    assert parse.per_step_ms.value == pytest.approx(0.2 * step)
    assert f.per_request_ms is not None  # the log gives 4 scheduled requests per step
    assert f.per_request_ms.value == pytest.approx(0.3 * step / 4)
    assert costs.blame


def test_what_if_host_bound_saves_the_cost(host_steps):
    profile = states_profile([_window(0.3, 0.2) for _ in range(10)])
    judged = _judge(profile, host_steps)
    assert judged.bound == "host"
    step = host_steps.host_step_ms.mean
    alone = predict(profile, judged, host_steps, parse_specs(["f"]))
    assert not alone.device_paced
    assert alone.step_saving_ms.value == pytest.approx(0.3 * step)
    both = predict(profile, judged, host_steps, parse_specs(["f,parse"]))
    assert both.step_saving_ms.value == pytest.approx(0.5 * step)
    assert both.step_after_ms.value == pytest.approx(0.5 * step)


def test_a_known_device_step_floors_each_step_after(host_steps):
    """Steps of 42 +- 2 ms, f costs 30% of each: with the device's step given, each step
    after is the slower of its host time less the saving and the device step."""
    profile = states_profile([_window(0.3, 0.0) for _ in range(10)])
    judged = _judge(profile, host_steps)
    specs = parse_specs(["f"])
    free = predict(profile, judged, host_steps, specs)
    saving = free.saving_ms.value
    assert free.step_after_ms.value == pytest.approx(host_steps.host_step_ms.mean - saving)
    # a device step below every step after changes nothing
    low = predict(profile, judged, host_steps, specs, device_step_ms=10.0)
    assert low.step_after_ms.value == pytest.approx(free.step_after_ms.value)
    assert low.device_given and low.device_ms == 10.0
    # one inside the range of the steps after: the mean of the per-step maxima, which is
    # above both the mean host time after and the device step
    device = host_steps.host_step_ms.mean - saving
    hosts = list(host_steps.host_ms)
    expected = sum(max(h - saving, device) for h in hosts) / len(hosts)
    floored = predict(profile, judged, host_steps, specs, device_step_ms=device)
    assert floored.step_after_ms.value == pytest.approx(expected)
    assert floored.step_after_ms.value > device + 0.1
    assert floored.step_saving_ms.value == pytest.approx(host_steps.host_step_ms.mean - expected)
    assert floored.step_after_ms.low <= floored.step_after_ms.value <= floored.step_after_ms.high
    assert "device's step known" in floored.note
    with pytest.raises(UsageError, match="--device-step-ms"):
        predict(profile, judged, host_steps, specs, device_step_ms=0.0)


def test_what_if_device_bound_saves_nothing(tmp_path):
    steps = rank_steps(str(steps_log(tmp_path / "d.log", 40.0, 38.0, n=60)), 0, 0)
    profile = states_profile([_window(0.2, 0.0, wait_s=0.6) for _ in range(10)])
    judged = _judge(profile, steps)
    assert judged.bound == "device"
    predicted = predict(profile, judged, steps, parse_specs(["f"]))
    assert predicted.device_paced
    assert predicted.saving_ms.value == pytest.approx(0.2 * steps.host_step_ms.mean)
    assert predicted.step_saving_ms.value == pytest.approx(0.0)
    assert "will not shorten the step" in predicted.note


def test_a_line_removes_only_that_call_site(host_steps):
    """f at line 5 calls `copy` (0.2 s per window), at line 9 runs itself (0.1 s)."""
    runs = [
        (_stack(LOOP, HELD, "loop", "f:5", "copy"), 0.2),
        (_stack(LOOP, HELD, "loop", "f:9"), 0.1),
        (_stack(LOOP, HELD, "loop", "rest"), 0.7),
    ]
    profile = states_profile([runs for _ in range(10)])
    judged = _judge(profile, host_steps)
    step = host_steps.host_step_ms.mean
    predicted = predict(profile, judged, host_steps, [RemovalSpec("f", 5)])
    assert predicted.step_saving_ms.value == pytest.approx(0.2 * step)
    assert dict(predicted.line_fractions)["f:5"] == pytest.approx(2 / 3)


def _noisy(count: int, seed: int = 7) -> Profile:
    rng = random.Random(seed)
    return states_profile([_window(rng.uniform(0.1, 0.5), 0.0) for _ in range(count)])


def test_the_interval_widens_when_windows_are_few(host_steps):
    widths = {}
    for count in (40, 4):
        saving = predict(
            _noisy(count), _judge(_noisy(count), host_steps), host_steps, parse_specs(["f"])
        ).saving_ms
        widths[count] = saving.high - saving.low
    assert math.isfinite(widths[4]) and widths[4] > 2 * widths[40] > 0
    one = predict(_noisy(1), _judge(_noisy(1), host_steps), host_steps, parse_specs(["f"]))
    assert one.saving_ms.low == -math.inf  # one window: no interval at all


def test_compare_judges_on_cost_per_step_not_on_share(tmp_path):
    """After: the loop is faster (less f per step) so ingress's share of wall time grows, but
    its cost to the loop per step does not: not regressed. f's cost fell: improved."""
    before_steps = rank_steps(str(steps_log(tmp_path / "b.log", 40.0, 10.0, n=60)), 0, 0)
    # mean host steps 42 and 21 ms (the builder adds 0-4 ms)
    after_steps = rank_steps(str(steps_log(tmp_path / "a.log", 19.0, 10.0, n=60)), 0, 0)
    rng = random.Random(3)
    before = states_profile([_window(0.5 + rng.uniform(-0.02, 0.02), 0.1) for _ in range(10)])
    # the step halved: parse takes twice the share of wall time for the same ms per step
    after = states_profile([_window(0.2 + rng.uniform(-0.02, 0.02), 0.2) for _ in range(10)])
    costs = compare_costs(
        loop_costs(before, LOOP, before_steps), loop_costs(after, LOOP, after_steps)
    )
    plain = compare_profiles(before, after)
    judged = compare_profiles(before, after, costs=costs)
    by_name = {c.name: c for c in judged.functions}
    plain_by_name = {c.name: c for c in plain.functions}
    assert plain_by_name["parse"].verdict == REGRESSED  # the share alone says so
    assert by_name["parse"].verdict == UNCHANGED
    assert by_name["parse"].share_verdict == REGRESSED
    assert by_name["f"].verdict == IMPROVED
    assert all(t.verdict in ("share up", "share down", UNCHANGED) for t in judged.threads)


def test_renames_make_one_row(host_steps):
    before = states_profile([[(_stack(LOOP, HELD, "loop", "f_before"), 1.0)]] * 4)
    after = states_profile([[(_stack(LOOP, HELD, "loop", "f"), 1.0)]] * 4)
    renames = {"f_before": "f"}
    rows = {c.name for c in compare_profiles(before, after, renames=renames).functions}
    assert "f" in rows and "f_before" not in rows
    costs = compare_costs(
        loop_costs(before, LOOP, host_steps, renames=renames), loop_costs(after, LOOP, host_steps)
    )
    assert ("f", "app.py") in costs.changes and ("f_before", "app.py") not in costs.changes


def test_bad_specs_and_renames_are_usage_errors():
    with pytest.raises(UsageError):
        parse_renames(["no-equals"])
    assert parse_renames(["a=b"]) == {"a": "b"}
    assert parse_specs(["f:12,g"]) == (RemovalSpec("f", 12), RemovalSpec("g"))
    with pytest.raises(UsageError):
        RemovalSpec.parse(" ")


def test_a_function_the_loop_never_meets_is_a_usage_error(host_steps):
    profile = states_profile([_window(0.3, 0.2) for _ in range(4)])
    with pytest.raises(UsageError, match="nosuch"):
        predict(profile, _judge(profile, host_steps), host_steps, parse_specs(["f,nosuch"]))


def _shared_window(own_s: float, wait_s: float) -> list[tuple[Sample, float]]:
    """The loop holds the GIL in `shared` for own_s, then waits for it in `shared` while
    ingress holds it, also in `shared` (a helper both threads call), for wait_s."""
    return [
        (_stack(LOOP, HELD, "loop", "shared"), own_s),
        (_stack(LOOP, WAITING, "loop", "shared"), wait_s),
        (_stack(LOOP, IDLE, "loop", "Event.wait"), 1.0 - own_s - wait_s),
        (_stack(INGRESS, IDLE, "ingress", "poll"), own_s),
        (_stack(INGRESS, HELD, "ingress", "shared"), wait_s),
        (_stack(INGRESS, IDLE, "ingress", "poll"), 1.0 - own_s - wait_s),
    ]


def test_one_accounting_a_tick_is_own_time_or_blamed_time_never_both(host_steps):
    """The issue's case: the loop and ingress both call `shared`; the loop's wait for the
    GIL in `shared` while ingress holds it in `shared` is the loop's own time, not blamed
    again (it read 1.024 of the step: own 0.98 + blamed 0.044)."""
    profile = states_profile([_shared_window(0.9, 0.1) for _ in range(10)])
    costs = loop_costs(profile, LOOP, host_steps, all_frames=True)
    shared, loop = costs.find("shared"), costs.find("loop")
    assert shared is not None and loop is not None
    assert shared.own_share == pytest.approx(1.0)
    assert shared.blamed_share == 0.0
    assert shared.share.value == pytest.approx(1.0)
    step = host_steps.host_step_ms.mean
    for cost in costs.functions:
        assert cost.own_share + cost.blamed_share <= 1.0 + 1e-9, cost
        assert cost.per_step_ms.value <= step * (1 + 1e-9), cost
    # a function only the holder runs is still blamed
    profile = states_profile([_window(0.3, 0.2) for _ in range(10)])
    parse = loop_costs(profile, LOOP, host_steps).find("parse")
    assert parse is not None and parse.blamed_share == pytest.approx(0.2)


def _nested_window(inner_s: float) -> list[tuple[Sample, float]]:
    """The loop's frames: loop > step > wrapper > inner (inner_s), loop > step > rest, and
    loop > other for the rest of the window (a host-bound loop: always busy)."""
    return [
        (_stack(LOOP, HELD, "loop", "step", "wrapper", "inner"), inner_s),
        (_stack(LOOP, HELD, "loop", "step", "rest"), 0.3),
        (_stack(LOOP, HELD, "loop", "other"), 0.7 - inner_s),
    ]


def test_compare_leads_with_the_changed_function_and_folds_its_outer_frames(tmp_path):
    """`inner` got cheaper; `wrapper` and `step` changed only through it, and `loop` is the
    loop's own frame: inner leads, the others follow, marked, before the unchanged `rest`."""
    steps = rank_steps(str(steps_log(tmp_path / "s.log", 40.0, 10.0, n=60)), 0, 0)
    rng = random.Random(5)
    before = states_profile([_nested_window(0.4 + rng.uniform(-0.01, 0.01)) for _ in range(10)])
    after = states_profile([_nested_window(0.1 + rng.uniform(-0.01, 0.01)) for _ in range(10)])
    costs = compare_costs(
        loop_costs(before, LOOP, steps, all_frames=True),
        loop_costs(after, LOOP, steps, all_frames=True),
    )
    rows = compare_profiles(before, after, costs=costs).functions
    names = [r.name for r in rows]
    assert names[0] == "inner" and rows[0].folded is None and rows[0].verdict == IMPROVED
    folded = {r.name: r.folded for r in rows}
    assert folded["wrapper"] == "outer frame of inner"
    assert folded["step"] == "outer frame of wrapper"
    assert folded["loop"] == "loop frame"
    assert folded["rest"] is None
    assert names.index("rest") > max(names.index(n) for n in ("wrapper", "step", "loop"))


def test_the_compare_table_names_every_row_whole_at_100_columns(tmp_path):
    """Long names that share their start (the demo's PyExecutor._run, ._executor_loop,
    ._fetch_new_requests) wrap instead of being cut to the same "PyExecutor._…"."""
    from gilprof.renderers.compare import CompareView, render_table

    steps = rank_steps(str(steps_log(tmp_path / "s.log", 40.0, 10.0, n=60)), 0, 0)
    long = ["PyExecutor._run", "PyExecutor._executor_loop", "PyExecutor._fetch_new_requests"]

    def side(inner_s: float) -> Profile:
        return states_profile(
            [
                [
                    (_stack(LOOP, HELD, *long, "DefaultADPRouter._balance_requests"), inner_s),
                    (_stack(LOOP, HELD, *long[:2], "PyExecutor._handle_responses"), 1 - inner_s),
                ]
                for _ in range(10)
            ]
        )

    before, after = side(0.6), side(0.3)
    costs = compare_costs(loop_costs(before, LOOP, steps), loop_costs(after, LOOP, steps))
    text = render_table(CompareView(compare_profiles(before, after, costs=costs)), width=100)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 100
    flat = "".join(line.strip("│ ") for line in text.splitlines())
    for name in [*long, "DefaultADPRouter._balance_requests"]:
        assert name in flat.replace("│", "").replace(" ", ""), name


def _fed_window() -> list[tuple[Sample, float]]:
    """A device-paced loop (f 0.2 s, rest 0.1 s, then a device wait) whose device work the
    ingress-named thread launches: it waits for the GIL while the loop holds it in f."""
    return [
        (_stack(LOOP, HELD, "loop", "f"), 0.2),
        (_stack(LOOP, HELD, "loop", "rest"), 0.1),
        (_stack(LOOP, IDLE, "loop", "Event.synchronize"), 0.7),
        (_stack(INGRESS, WAITING, "launch"), 0.2),
        (_stack(INGRESS, HELD, "launch"), 0.05),
        (_stack(INGRESS, IDLE, "launch", "sleep"), 0.75),
    ]


def test_what_if_follows_the_critical_path_through_a_feeding_thread(tmp_path):
    steps = rank_steps(str(steps_log(tmp_path / "d.log", 40.0, 38.0, n=60)), 0, 0)
    rng = random.Random(11)
    windows = []
    for _ in range(10):
        window = _fed_window()
        jitter = rng.uniform(-0.01, 0.01)
        window[0] = (window[0][0], 0.2 + jitter)
        window[2] = (window[2][0], 0.7 - jitter)
        window[3] = (window[3][0], 0.2 + jitter)
        window[5] = (window[5][0], 0.75 - jitter)
        windows.append(window)
    profile = states_profile(windows)
    judged = _judge(profile, steps)
    assert judged.bound == "device"
    period = steps.host_step_ms.mean
    fed = predict(profile, judged, steps, parse_specs(["f"]), feeders=[INGRESS])
    assert fed.device_paced and fed.feeder_saving_ms is not None
    assert fed.feeder_saving_ms.value == pytest.approx(0.2 * period, rel=0.05)
    assert fed.step_saving_ms.value == pytest.approx(0.2 * period, rel=0.05)
    assert "ingress" in fed.note
    # unnamed: ~0, and the note says undetermined and names the waiting thread
    alone = predict(profile, judged, steps, parse_specs(["f"]))
    assert alone.step_saving_ms.value == pytest.approx(0.0, abs=1e-9)
    assert "Undetermined" in alone.note and "ingress" in alone.note
    # removing a function nobody waits on leaves the chain as it is
    rest = predict(profile, judged, steps, parse_specs(["rest"]), feeders=[INGRESS])
    assert rest.step_saving_ms.value == pytest.approx(0.0, abs=1e-9)
    # the costs: f's wait on the device path is the feeder's wait, beside its own time
    costs = loop_costs(profile, LOOP, steps, feeders=[INGRESS])
    f, rest_cost = costs.find("f"), costs.find("rest")
    assert f is not None and f.feeder_wait_ms is not None
    assert f.feeder_wait_ms.value == pytest.approx(0.2 * period, rel=0.05)
    assert rest_cost is not None and rest_cost.feeder_wait_ms is not None
    assert rest_cost.feeder_wait_ms.value == 0.0
    plain = loop_costs(profile, LOOP, steps).find("f")
    assert plain is not None and plain.feeder_wait_ms is None


def test_the_function_the_change_rewrote_leads_and_is_not_folded(tmp_path):
    """With --rename wrapper_before=wrapper the change under review rewrote `wrapper`: its
    change (all in `inner`, which it calls) leads instead of being folded under inner."""
    steps = rank_steps(str(steps_log(tmp_path / "s.log", 40.0, 10.0, n=60)), 0, 0)
    rng = random.Random(5)

    def side(inner_s: float, wrapper: str) -> Profile:
        return states_profile(
            [
                [
                    (_stack(LOOP, HELD, "loop", "step", wrapper, "inner"), inner_s + jitter),
                    (_stack(LOOP, HELD, "loop", "step", "rest"), 0.3),
                    (_stack(LOOP, HELD, "loop", "other"), 0.7 - inner_s - jitter),
                ]
                for jitter in (rng.uniform(-0.01, 0.01) for _ in range(10))
            ]
        )

    before, after = side(0.4, "wrapper_before"), side(0.1, "wrapper")
    renames = {"wrapper_before": "wrapper"}
    costs = compare_costs(
        loop_costs(before, LOOP, steps, all_frames=True, renames=renames),
        loop_costs(after, LOOP, steps, all_frames=True, renames=renames),
    )
    rows = compare_profiles(before, after, costs=costs, renames=renames).functions
    assert rows[0].name == "wrapper" and rows[0].folded is None
    assert rows[1].name == "inner"
    assert {r.name: r.folded for r in rows}["step"] is not None


def test_watched_names_stay_on_one_line_at_100_columns(tmp_path):
    """The watched table keeps `_balance_requests_across_ranks` whole on its row (the verdict
    and its ms per step wrap at their spaces instead); `--wide` brings back the relative
    change. The demo's table used to fold the name in the middle."""
    from gilprof.renderers.compare import CompareView, render_table

    name = "_balance_requests_across_ranks"
    steps = rank_steps(str(steps_log(tmp_path / "s.log", 40.0, 10.0, n=60)), 0, 0)

    def side(inner_s: float) -> Profile:
        return states_profile(
            [
                [
                    (_stack(LOOP, HELD, "PyExecutor._run", name), inner_s),
                    (_stack(LOOP, HELD, "PyExecutor._run", "broadcast_sample_state"), 0.1),
                    (_stack(LOOP, HELD, "PyExecutor._run", "safe_broadcast"), 0.9 - inner_s),
                ]
                for _ in range(10)
            ]
        )

    before, after = side(0.6), side(0.3)
    costs = compare_costs(loop_costs(before, LOOP, steps), loop_costs(after, LOOP, steps))
    watch = (name, "safe_broadcast", "broadcast_sample_state")
    comparison = compare_profiles(before, after, watch=watch, costs=costs)
    text = render_table(CompareView(comparison), width=100)
    assert max(len(line) for line in text.splitlines()) <= 100
    watched = text.split("Watched functions", 1)[1].split("Threads", 1)[0]
    assert any(f"│ {name} " in line for line in watched.splitlines()), watched
    assert "ms)" in watched and " rel " not in watched
    wide = render_table(CompareView(comparison, wide=True), width=140)
    assert " rel " in wide.split("Watched functions", 1)[1].split("Threads", 1)[0]
