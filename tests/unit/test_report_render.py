"""The report tells the reader how far to trust it: sampler priority and accuracy notes."""

from __future__ import annotations

import json

from gilprof.analysis.attribution import attribute
from gilprof.renderers import render
from gilprof.renderers.report import ReportData

from .builders import make_profile, sample

NOTE = "sampler not real-time: short GIL bursts may read low under load"


def _data(priority: str, messages: tuple[str, ...]) -> ReportData:
    profile = make_profile([(100, [sample("main", "loop", count=60)])])
    profile.finish(priority=priority, messages=messages)
    return ReportData(profile, attribute(profile))


def test_table_and_markdown_show_priority_and_every_note() -> None:
    data = _data("normal (no CAP_SYS_NICE)", (NOTE,))
    for fmt in ("table", "markdown"):
        text = " ".join(render("report", fmt, data).split())
        assert "priority sampler ran normal (no CAP_SYS_NICE)" in text, fmt
        assert NOTE in text, fmt


def test_json_carries_them_and_a_clean_capture_prints_no_note() -> None:
    doc = json.loads(render("report", "json", _data("SCHED_FIFO 10", (NOTE,))))
    assert doc["sampling"]["priority"] == "SCHED_FIFO 10"
    assert doc["sampling"]["messages"] == [NOTE]
    assert "NOTE" not in render("report", "table", _data("SCHED_FIFO 10", ()))
