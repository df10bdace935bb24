"""Chrome trace JSON from hand-made profiles: tracks per thread, state slices, counters."""

from __future__ import annotations

import json

from gilprof.analysis.attribution import attribute
from gilprof.renderers import render
from gilprof.renderers.report import ReportData

from .test_flamegraph import INGRESS, MAIN, contention_profile, gil_profile


def _trace(profile, **extra):
    data = ReportData(profile, attribute(profile))
    for key, value in extra.items():
        object.__setattr__(data, key, value)
    return json.loads(render("report", "perfetto", data))


def _names(trace):
    return {
        e["tid"]: e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }


def test_one_named_track_per_thread_and_per_window_slices():
    trace = _trace(gil_profile())
    names = _names(trace)
    assert sorted(names.values()) == sorted(
        [f"MainThread (tid {MAIN})", f"ingress (tid {INGRESS})"]
    )
    assert all(tid < 100 for tid in names)  # small track ids, the real tid is in the name
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    main_track = next(t for t, n in names.items() if n.startswith("MainThread"))
    main = [e for e in slices if e["tid"] == main_track]
    assert len(main) == 4  # one per window
    assert main[0]["name"] == "held 50%" and main[0]["args"]["held"] == 0.5
    assert [e["ts"] for e in main] == [0, 1e6, 2e6, 3e6] and main[0]["dur"] == 1e6
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    assert [c["args"]["held"] for c in counters] == [0.8] * 4


def test_per_tick_spans_become_state_slices_named_by_function():
    trace = _trace(contention_profile())
    names = _names(trace)
    by_track: dict[str, list[tuple[str, float, float]]] = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            by_track.setdefault(names[e["tid"]].split(" ")[0], []).append(
                (e["name"], e["ts"], e["dur"])
            )
    assert by_track["MainThread"] == [("held: spin", 0, 600000), ("waiting: loop", 600000, 400000)]
    assert by_track["ingress"] == [("waiting: recv", 0, 600000), ("held: parse", 600000, 400000)]


def test_step_spans_get_their_own_track():
    trace = _trace(gil_profile(), step_spans=[(0.0, 0.5, 7), (0.5, 1.25, 8)])
    names = _names(trace)
    steps = [e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "step"]
    assert [e["name"] for e in steps] == ["step 7", "step 8"]
    assert names[steps[0]["tid"]] == "steps"
