"""The report tells the reader how far to trust it: sampler priority and accuracy notes."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gilprof.analysis.attribution import attribute
from gilprof.analysis.empty import why_empty
from gilprof.cli.main import cli
from gilprof.model import Mode, ThreadState
from gilprof.profile import Profile
from gilprof.renderers import render
from gilprof.renderers.report import ReportData

from .builders import make_profile, sample, saved

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


def _asleep(mode: Mode) -> Profile:
    """A states-mode capture of a loop that slept through it: no holder, every state kept."""
    profile = make_profile([], mode=mode)
    profile.windows.clear()
    asleep = sample("loop", "run", "sleep", tid=7, state=ThreadState.IDLE)
    for t in (0.0, 1.0):
        profile.add_window(t, t + 1.0, 100, [], [(asleep, 0.0, 1.0)] if mode.reads_states else [])
    profile.finish()
    return profile


def test_a_capture_where_no_thread_held_the_gil_says_so_not_zero_samples(tmp_path: Path) -> None:
    slept = _asleep(Mode.STATES)
    warning = why_empty(slept)
    assert warning and "no thread held the GIL at any tick" in warning
    assert "0 samples" not in warning  # every thread's state was recorded
    result = CliRunner().invoke(cli, ["report", str(saved(slept, tmp_path / "slept.json"))])
    assert result.exit_code == 0 and "slept or waited" in result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("│ loop ")]
    # the states table (six columns): idle all the time; "Where threads block" has it too
    (row,) = [line for line in rows if len(line.split("│")) == 8]
    assert row.split("│")[5].strip() == "100.0%"
    assert any("blocked, unexplained" in line for line in rows)
    # gil mode keeps no states: nothing was recorded, and the warning says that
    assert "0 samples in 2.0 s" in (why_empty(_asleep(Mode.GIL)) or "")
